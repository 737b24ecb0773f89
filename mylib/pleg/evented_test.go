package pleg

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeEvents is a CRI runtime client that serves only GetContainerEvents:
// every stream it opens reads the events the test sends on ch; openErr
// makes opening fail.
type fakeEvents struct {
	runtimeapi.RuntimeServiceClient // nil: the EventedPLEG calls nothing else
	ch                              chan *runtimeapi.ContainerEventResponse

	mu      sync.Mutex
	opens   int
	openErr error
}

func (f *fakeEvents) GetContainerEvents(ctx context.Context, _ *runtimeapi.GetEventsRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[runtimeapi.ContainerEventResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opens++
	if f.openErr != nil {
		return nil, f.openErr
	}
	return &fakeStream{ctx: ctx, ch: f.ch}, nil
}

func (f *fakeEvents) openCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opens
}

type fakeStream struct {
	grpc.ClientStream
	ctx context.Context
	ch  chan *runtimeapi.ContainerEventResponse
}

func (s *fakeStream) Recv() (*runtimeapi.ContainerEventResponse, error) {
	select {
	case ev, ok := <-s.ch:
		if !ok {
			return nil, io.EOF
		}
		return ev, nil
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

// event is an event about containerID, a container of the pod's sandbox
// "sandbox-<podUID>", or that sandbox itself.
func event(kind runtimeapi.ContainerEventType, podUID, containerID string) *runtimeapi.ContainerEventResponse {
	return &runtimeapi.ContainerEventResponse{ContainerId: containerID, ContainerEventType: kind,
		PodSandboxStatus: &runtimeapi.PodSandboxStatus{Id: "sandbox-" + podUID, Metadata: &runtimeapi.PodSandboxMetadata{Uid: podUID}}}
}

// runEvented starts e.Run; the returned function stops it and waits.
func runEvented(t *testing.T, e *EventedPLEG) (done <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan struct{})
	go func() { e.Run(ctx); close(ch) }()
	t.Cleanup(func() { cancel(); <-ch })
	return ch
}

// waitEvents waits until the PLEG has sent n events and returns them.
func waitEvents(t *testing.T, g *GenericPLEG, n int) []string {
	t.Helper()
	var got []string
	require.Eventually(t, func() bool { got = append(got, drain(g)...); return len(got) >= n }, 10*time.Second, time.Millisecond)
	return got
}

// TestEventedPLEGRelistsThePodAnEventNames: an event relists its pod at
// once, with no relist period passing: the pod's events are sent and its
// cache entry is fresh; the next full relist finds nothing new. A
// "created" event relists nothing, nor does a sandbox's "started" (the
// kubelet goes on with its containers in the same sync).
func TestEventedPLEGRelistsThePodAnEventNames(t *testing.T) {
	g, rt, cache, _ := newTestPLEG(100)
	rt.set(withSandbox(pod("a", ctr("c1", created)), ctr("s1", running)), pod("b", ctr("c2", created)))
	g.Relist(context.Background())
	assert.Equal(t, []string{"ContainerStarted a/s1"}, drain(g))

	fe := &fakeEvents{ch: make(chan *runtimeapi.ContainerEventResponse, 10)}
	runEvented(t, NewEventedPLEG(g, fe))
	rt.set(withSandbox(pod("a", ctr("c1", running)), ctr("s1", running)), pod("b", ctr("c2", running)))
	fe.ch <- event(runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, "b", "c2")        // ignored
	fe.ch <- event(runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, "b", "sandbox-b") // ignored
	fe.ch <- event(runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, "a", "c1")

	assert.Equal(t, []string{"ContainerStarted a/c1"}, waitEvents(t, g, 1), "only the pod of the started container")
	st, err := cache.Get("a")
	require.NoError(t, err)
	require.Len(t, st.ContainerStatuses, 1)
	assert.Equal(t, running, st.ContainerStatuses[0].State, "the cache has the started container")

	g.Relist(context.Background())
	assert.Equal(t, []string{"ContainerStarted b/c2"}, drain(g), "the relist sends a's start no second time; b's comes with it")
}

// TestEventedPLEGRemovedPod: when the runtime no longer has the pod an
// event names, its containers die and are removed, and its cache entry goes.
func TestEventedPLEGRemovedPod(t *testing.T) {
	g, rt, cache, _ := newTestPLEG(100)
	rt.set(withSandbox(pod("a", ctr("c1", running)), ctr("s1", running)))
	g.Relist(context.Background())
	drain(g)
	_, err := cache.Get("a")
	require.NoError(t, err)

	fe := &fakeEvents{ch: make(chan *runtimeapi.ContainerEventResponse, 10)}
	runEvented(t, NewEventedPLEG(g, fe))
	rt.set()
	fe.ch <- event(runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, "a", "s1")

	assert.ElementsMatch(t, []string{"ContainerDied a/c1", "ContainerRemoved a/c1", "ContainerDied a/s1", "ContainerRemoved a/s1"}, waitEvents(t, g, 4))
	st, err := cache.Get("a")
	require.NoError(t, err)
	assert.Empty(t, st.ContainerStatuses, "the pod is gone from the cache")
	assert.Empty(t, st.Name)
}

// TestEventedPLEGFallsBackToRelisting: a runtime without the event stream
// is asked EventedPLEGMaxStreamRetries times, one relist period apart,
// and then the EventedPLEG stops.
func TestEventedPLEGFallsBackToRelisting(t *testing.T) {
	g, _, _, clk := newTestPLEG(100)
	fe := &fakeEvents{openErr: errors.New("rpc error: code = Unimplemented")}
	done := runEvented(t, NewEventedPLEG(g, fe))
	for i := 1; i < EventedPLEGMaxStreamRetries; i++ {
		require.Eventually(t, func() bool { return fe.openCount() == i && clk.HasWaiters() }, 10*time.Second, time.Millisecond)
		clk.Step(RelistPeriod)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the last attempt")
	}
	assert.Equal(t, EventedPLEGMaxStreamRetries, fe.openCount())
}

// TestEventedPLEGReopensABrokenStream: a stream that ended is opened again
// after a relist period, and events on the new one are heard.
func TestEventedPLEGReopensABrokenStream(t *testing.T) {
	g, rt, _, clk := newTestPLEG(100)
	fe := &fakeEvents{ch: make(chan *runtimeapi.ContainerEventResponse, 10)}
	runEvented(t, NewEventedPLEG(g, fe))
	require.Eventually(t, func() bool { return fe.openCount() == 1 }, 10*time.Second, time.Millisecond)
	close(fe.ch) // the runtime ends the stream
	fe.mu.Lock()
	fe.ch = make(chan *runtimeapi.ContainerEventResponse, 10)
	fe.mu.Unlock()
	require.Eventually(t, clk.HasWaiters, 10*time.Second, time.Millisecond)
	clk.Step(RelistPeriod)
	require.Eventually(t, func() bool { return fe.openCount() == 2 }, 10*time.Second, time.Millisecond)

	rt.set(withSandbox(pod("a"), ctr("s1", running)))
	fe.ch <- event(runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, "a", "s1")
	assert.Equal(t, []string{"ContainerStarted a/s1"}, waitEvents(t, g, 1))
}
