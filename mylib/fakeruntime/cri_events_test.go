package fakeruntime

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// eventsBound bounds every wait of these tests, so that a missing event
// fails the test instead of hanging it; nothing here is timed.
const eventsBound = time.Minute

// serveCRI serves r on a unix socket in a short temporary directory (unix
// socket paths are limited to 107 bytes) and returns a CRI client on it,
// as the kubelet reaches containerd, and stop, which ends Serve and
// returns what it returned (the test's end calls it too).
func serveCRI(t *testing.T, r *Runtime) (rs runtimeapi.RuntimeServiceClient, stop func() error) {
	t.Helper()
	dir, err := os.MkdirTemp("", "crt")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	lis, err := ListenUnix(filepath.Join(dir, "rt.sock"))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx, lis) }()
	var serveErr error
	stopped := false
	stop = func() error {
		if !stopped {
			cancel()
			serveErr, stopped = <-served, true
		}
		return serveErr
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "rt.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		conn.Close()
		assert.NoError(t, stop())
	})
	return runtimeapi.NewRuntimeServiceClient(conn), stop
}

// subscribers is how many GetContainerEvents calls r is serving.
func subscribers(r *Runtime) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events.subs)
}

// waitSubscribers waits until r serves n GetContainerEvents calls.
func waitSubscribers(t *testing.T, r *Runtime, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return subscribers(r) == n }, eventsBound, time.Millisecond,
		"the runtime serves %d GetContainerEvents calls, want %d", subscribers(r), n)
}

// subscribe calls GetContainerEvents and waits until the runtime has
// subscribed it: the events from then on are the stream's.
func subscribe(ctx context.Context, t *testing.T, r *Runtime, rs runtimeapi.RuntimeServiceClient) runtimeapi.RuntimeService_GetContainerEventsClient {
	t.Helper()
	n := subscribers(r)
	stream, err := rs.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	require.NoError(t, err)
	waitSubscribers(t, r, n+1)
	return stream
}

// recvN receives n events.
func recvN(t *testing.T, stream runtimeapi.RuntimeService_GetContainerEventsClient, n int) []*runtimeapi.ContainerEventResponse {
	t.Helper()
	var got []*runtimeapi.ContainerEventResponse
	for range n {
		ev, err := stream.Recv()
		require.NoError(t, err, "after %d events: %v", len(got), eventNames(got, nil))
		got = append(got, ev)
	}
	return got
}

// eventNames writes each event as "TYPE name", with names for the IDs.
func eventNames(evs []*runtimeapi.ContainerEventResponse, names map[string]string) []string {
	var out []string
	for _, ev := range evs {
		name, ok := names[ev.ContainerId]
		if !ok {
			name = short(ev.ContainerId)
		}
		out = append(out, ev.ContainerEventType.String()+" "+name)
	}
	return out
}

const (
	created = "CONTAINER_CREATED_EVENT "
	started = "CONTAINER_STARTED_EVENT "
	stopped = "CONTAINER_STOPPED_EVENT "
	deleted = "CONTAINER_DELETED_EVENT "
)

// TestContainerEventsFollowAPodsLifecycle runs a pod whose container exits
// 3 by itself, stops it and removes it over the socket, and checks the
// events GetContainerEvents streams: their order, and the statuses they
// carry, as PodSandboxStatus and ContainerStatus answer them. Both ways a
// script runs send them: in the runtime's process, and in the sandbox
// process (root only).
func TestContainerEventsFollowAPodsLifecycle(t *testing.T) {
	for _, tc := range []struct {
		name    string
		runtime func(*testing.T) *Runtime
	}{
		{"in the runtime's process", func(t *testing.T) *Runtime { r, _ := fixture(t); return r }},
		{"in the sandbox process", sandboxRuntime},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.runtime(t)
			rs, _ := serveCRI(t, r)
			ctx, cancel := context.WithTimeout(context.Background(), eventsBound)
			defer cancel()
			events := subscribe(ctx, t, r, rs)

			sb, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
				Metadata: &runtimeapi.PodSandboxMetadata{Name: "job", Namespace: "default", Uid: "uid-job"}}})
			require.NoError(t, err)
			c, err := rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: "exits"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
				Command: []string{"sh", "-c", "exit 3"}}})
			require.NoError(t, err)
			_, err = rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId})
			require.NoError(t, err)

			// The fifth event is the container's exit: the pod is left alone until then.
			got := recvN(t, events, 5)
			sbStatus, err := rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.PodSandboxId})
			require.NoError(t, err)
			cStatus, err := rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.ContainerId})
			require.NoError(t, err)

			_, err = rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.ContainerId, Timeout: 10}) // exited already: no event
			require.NoError(t, err)
			_, err = rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.PodSandboxId})
			require.NoError(t, err)
			_, err = rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c.ContainerId})
			require.NoError(t, err)
			_, err = rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId})
			require.NoError(t, err)
			got = append(got, recvN(t, events, 3)...)

			names := map[string]string{sb.PodSandboxId: "sandbox", c.ContainerId: "exits"}
			require.Equal(t, []string{
				created + "sandbox", started + "sandbox",
				created + "exits", started + "exits", stopped + "exits",
				stopped + "sandbox", deleted + "exits", deleted + "sandbox",
			}, eventNames(got, names))

			// Every event carries the sandbox's status, its IP and metadata among it.
			require.NotEmpty(t, sbStatus.Status.Network.GetIp())
			for i, ev := range got {
				assert.NotZero(t, ev.CreatedAt, "event %d", i)
				if i > 0 {
					assert.GreaterOrEqual(t, ev.CreatedAt, got[i-1].CreatedAt, "event %d", i)
				}
				ps := ev.PodSandboxStatus
				require.NotNil(t, ps, "event %d", i)
				assert.Equal(t, sb.PodSandboxId, ps.Id, "event %d", i)
				assert.Equal(t, "uid-job", ps.Metadata.GetUid(), "event %d", i)
				assert.Equal(t, sbStatus.Status.Network.GetIp(), ps.Network.GetIp(), "event %d", i)
				want := runtimeapi.PodSandboxState_SANDBOX_READY
				if i >= 5 {
					want = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				}
				assert.Equal(t, want, ps.State, "event %d", i)
			}
			assert.True(t, proto.Equal(sbStatus.Status, got[4].PodSandboxStatus), "the exit's sandbox status is PodSandboxStatus's:\n%v\n%v", sbStatus.Status, got[4].PodSandboxStatus)

			// The containers' statuses after each change.
			assert.Empty(t, got[1].ContainersStatuses, "a new sandbox has no container")
			require.Len(t, got[2].ContainersStatuses, 1)
			assert.Equal(t, runtimeapi.ContainerState_CONTAINER_CREATED, got[2].ContainersStatuses[0].State)
			require.Len(t, got[3].ContainersStatuses, 1)
			assert.Equal(t, c.ContainerId, got[3].ContainersStatuses[0].Id)
			assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, got[3].ContainersStatuses[0].State, "STARTED: running")
			require.Len(t, got[4].ContainersStatuses, 1)
			exited := got[4].ContainersStatuses[0]
			assert.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, exited.State, "STOPPED: exited")
			assert.Equal(t, int32(3), exited.ExitCode)
			assert.Equal(t, ReasonError, exited.Reason)
			assert.True(t, proto.Equal(cStatus.Status, exited), "the exit's container status is ContainerStatus's:\n%v\n%v", cStatus.Status, exited)
			require.Len(t, got[5].ContainersStatuses, 1, "the sandbox's STOPPED still lists its container")
			assert.True(t, proto.Equal(cStatus.Status, got[5].ContainersStatuses[0]))
			assert.Empty(t, got[6].ContainersStatuses, "a deleted container is no longer listed")
			assert.Empty(t, got[7].ContainersStatuses)
		})
	}
}

// TestContainerEventsReachEverySubscriber: two callers get the same
// events, here of a pod removed while its container runs (killed: 137),
// as containerd stops a ready sandbox before it removes it.
func TestContainerEventsReachEverySubscriber(t *testing.T) {
	r, _ := fixture(t)
	rs, _ := serveCRI(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), eventsBound)
	defer cancel()
	one := subscribe(ctx, t, r, rs)
	two := subscribe(ctx, t, r, rs)

	sb := runSandbox(t, r, "web", "uid-web", nil)
	c := createContainer(t, r, sb, "pause") // runs until stopped
	startContainer(t, r, c)
	_, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb})
	require.NoError(t, err)

	want := []string{
		created + "sandbox", started + "sandbox", created + "pause", started + "pause",
		stopped + "pause", stopped + "sandbox", deleted + "pause", deleted + "sandbox",
	}
	names := map[string]string{sb: "sandbox", c: "pause"}
	got1, got2 := recvN(t, one, len(want)), recvN(t, two, len(want))
	assert.Equal(t, want, eventNames(got1, names))
	for i := range got1 {
		assert.True(t, proto.Equal(got1[i], got2[i]), "event %d:\n%v\n%v", i, got1[i], got2[i])
	}
	require.Len(t, got1[4].ContainersStatuses, 1)
	assert.Equal(t, int32(ExitCodeSIGKILL), got1[4].ContainersStatuses[0].ExitCode)
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, got1[7].PodSandboxStatus.GetState(), "a deleted sandbox's last status")
}

// TestContainerEventsOverflowEndsTheStream: a caller that never reads
// falls behind; the runtime drops it with ResourceExhausted rather than
// wait for it, and keeps answering.
func TestContainerEventsOverflowEndsTheStream(t *testing.T) {
	r, _ := fixture(t)
	r.mu.Lock()
	r.events.queueSize = 4
	r.mu.Unlock()
	rs, _ := serveCRI(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), eventsBound)
	defer cancel()
	events := subscribe(ctx, t, r, rs)

	// Big events fill gRPC's flow-control window (up to 16 MiB) soon; then
	// the server's Send waits for the reader, and the queue fills.
	resp, err := r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata:    &runtimeapi.PodSandboxMetadata{Name: "big", Namespace: "default", Uid: "uid-big"},
		Annotations: map[string]string{"big": strings.Repeat("x", 32<<10)},
	}})
	require.NoError(t, err)
	sent := 2
	const most = 5000 // 16 MiB of 32 KiB events is 512
	for sent < most && subscribers(r) > 0 {
		id := createContainer(t, r, resp.PodSandboxId, "c") // each call returns: nothing waits for the reader
		_, err := r.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
		require.NoError(t, err)
		sent += 2
	}
	require.Less(t, sent, most, "the subscriber that never reads is dropped")

	// The runtime answers on the same connection, whose stream is stuck.
	pods, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	assert.Len(t, pods.Items, 1)

	// What was sent before the overflow arrives, then the error.
	received := 0
	for {
		if _, err = events.Recv(); err != nil {
			break
		}
		received++
	}
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), "the event queue overflowed")
	assert.Less(t, received, sent, "events were lost")
	t.Logf("%d events sent, %d received before the error", sent, received)

	// A new caller is served.
	again := subscribe(ctx, t, r, rs)
	next := runSandbox(t, r, "next", "uid-next", nil)
	assert.Equal(t, []string{created + "next", started + "next"}, eventNames(recvN(t, again, 2), map[string]string{next: "next"}))
}

// TestContainerEventsEndWithTheCallersContext: cancelling the call ends
// it on the server too, which forgets the subscriber, and returns nil.
func TestContainerEventsEndWithTheCallersContext(t *testing.T) {
	r, _ := fixture(t)
	rs, _ := serveCRI(t, r)
	ctx, cancel := context.WithCancel(context.Background())
	events := subscribe(ctx, t, r, rs)
	cancel()
	waitSubscribers(t, r, 0)
	_, err := events.Recv()
	assert.Equal(t, codes.Canceled, status.Code(err), "%v", err)

	// What the handler returns, called in the process.
	ctx, cancel = context.WithCancel(context.Background())
	rec := newEventRecorder(ctx)
	done := make(chan error, 1)
	go func() { done <- r.GetContainerEvents(&runtimeapi.GetEventsRequest{}, rec) }()
	waitSubscribers(t, r, 1)
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(eventsBound):
		t.Fatal("GetContainerEvents did not return when its context ended")
	}
	assert.Zero(t, subscribers(r))
}

// TestContainerEventsEndWhenTheRuntimeShutsDown: Serve's shutdown ends the
// calls (nil: the client reads EOF) rather than wait out ShutdownGrace
// for them and cut them (Unavailable); a call after it ends at once.
func TestContainerEventsEndWhenTheRuntimeShutsDown(t *testing.T) {
	r, _ := fixture(t)
	rs, stop := serveCRI(t, r)
	events := subscribe(context.Background(), t, r, rs)
	require.NoError(t, stop())
	_, err := events.Recv()
	assert.ErrorIs(t, err, io.EOF)

	rec := newEventRecorder(context.Background())
	assert.NoError(t, r.GetContainerEvents(&runtimeapi.GetEventsRequest{}, rec), "a shut-down runtime answers at once")
	assert.Zero(t, subscribers(r))
}

// TestContainerEventsForEveryWayAContainerStops sends a STOPPED event
// whichever way a container exits: killed or removed by the control API,
// StopContainer without a grace period, the sandbox killed, a script that
// ends; and DELETED for what the control API removes.
func TestContainerEventsForEveryWayAContainerStops(t *testing.T) {
	r, clk := fixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := newEventRecorder(ctx)
	go func() { _ = r.GetContainerEvents(&runtimeapi.GetEventsRequest{}, rec) }()
	waitSubscribers(t, r, 1)

	sb := runSandbox(t, r, "p", "uid-p", nil)
	create := func(name string, cmd ...string) string {
		clk.Step(time.Second) // the sandbox's containers are sent oldest first
		return createContainer(t, r, sb, name, cmd...)
	}
	killed, stoppedC, ends, removed, last := create("killed"), create("stopped"), create("ends", "sh", "-c", "exit 0"), create("removed"), create("last")
	for _, id := range []string{killed, stoppedC, removed, last} {
		startContainer(t, r, id)
	}
	names := map[string]string{sb: "sandbox", killed: "killed", stoppedC: "stopped", ends: "ends", removed: "removed", last: "last"}
	rec.skip(t, 2+5+4) // the sandbox's two, five CREATED, four STARTED

	_, err := r.ContainerAction(killed, ActionKill)
	require.NoError(t, err)
	_, err = r.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: stoppedC})
	require.NoError(t, err)
	startContainer(t, r, ends)
	assert.Equal(t, []string{stopped + "killed", stopped + "stopped", started + "ends", stopped + "ends"}, eventNames(rec.next(t, 4), names))

	_, err = r.ContainerAction(removed, ActionRemove)
	require.NoError(t, err)
	assert.Equal(t, []string{stopped + "removed", deleted + "removed"}, eventNames(rec.next(t, 2), names))

	_, err = r.PodAction("default", "p", ActionKill)
	require.NoError(t, err)
	assert.Equal(t, []string{stopped + "last", stopped + "sandbox"}, eventNames(rec.next(t, 2), names))
	_, err = r.PodAction("default", "p", ActionKill) // NOTREADY already: nothing changes
	require.NoError(t, err)
	_, err = r.SandboxAction(sb, ActionRemove)
	require.NoError(t, err)
	assert.Equal(t, []string{deleted + "killed", deleted + "stopped", deleted + "ends", deleted + "last", deleted + "sandbox"},
		eventNames(rec.next(t, 5), names))
}

// eventRecorder is a GetContainerEvents stream in the process: what is
// sent is kept, in order.
type eventRecorder struct {
	grpc.ServerStream // nil: only Context and Send are called
	ctx               context.Context
	sent              chan *runtimeapi.ContainerEventResponse
}

func newEventRecorder(ctx context.Context) *eventRecorder {
	return &eventRecorder{ctx: ctx, sent: make(chan *runtimeapi.ContainerEventResponse, 100)}
}

func (e *eventRecorder) Context() context.Context { return e.ctx }

func (e *eventRecorder) Send(ev *runtimeapi.ContainerEventResponse) error {
	select {
	case e.sent <- ev:
		return nil
	case <-e.ctx.Done():
		return e.ctx.Err()
	}
}

// next returns the next n events sent.
func (e *eventRecorder) next(t *testing.T, n int) []*runtimeapi.ContainerEventResponse {
	t.Helper()
	var got []*runtimeapi.ContainerEventResponse
	for range n {
		select {
		case ev := <-e.sent:
			got = append(got, ev)
		case <-time.After(eventsBound):
			t.Fatalf("%d events of %d: %v", len(got), n, eventNames(got, nil))
		}
	}
	return got
}

// skip drops the next n events.
func (e *eventRecorder) skip(t *testing.T, n int) { t.Helper(); e.next(t, n) }
