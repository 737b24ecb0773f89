package kuberuntime

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	kubecontainer "mykubelet/mylib/container"
)

// hookRuntime answers ExecSync with exec (the hooks) and records the
// timeout of every StopContainer by container ID.
type hookRuntime struct {
	runtimeapi.RuntimeServiceClient
	exec  func(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error)
	mu    sync.Mutex
	execs [][]string
	stops map[string]int64
}

func (h *hookRuntime) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest, _ ...grpc.CallOption) (*runtimeapi.ExecSyncResponse, error) {
	h.mu.Lock()
	h.execs = append(h.execs, req.Cmd)
	h.mu.Unlock()
	return h.exec(ctx, req)
}

func (h *hookRuntime) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest, opts ...grpc.CallOption) (*runtimeapi.StopContainerResponse, error) {
	h.mu.Lock()
	h.stops[req.ContainerId] = req.Timeout
	h.mu.Unlock()
	return h.RuntimeServiceClient.StopContainer(ctx, req, opts...)
}

func (h *hookRuntime) stopOf(id kubecontainer.ContainerID) (int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.stops[id.ID]
	return t, ok
}

func exitWith(code int32) func(context.Context, *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	return func(context.Context, *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
		return &runtimeapi.ExecSyncResponse{ExitCode: code, Stdout: []byte("out"), Stderr: []byte("err")}, nil
	}
}

// hookPod is webPod without init containers, its app container given a
// preStop hook and the pod a grace period.
func hookPod(grace int64) *v1.Pod {
	pod := webPod()
	pod.Spec.InitContainers = nil
	pod.Spec.TerminationGracePeriodSeconds = ptr.To(grace)
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"/bin/drain"}}}}
	return pod
}

// runningHookPod syncs the pod and wraps the runtime with a hookRuntime.
func runningHookPod(t *testing.T, f *syncFixture, pod *v1.Pod) (*hookRuntime, *kubecontainer.PodStatus) {
	t.Helper()
	require.NoError(t, f.m.SyncPod(context.Background(), pod, f.status(t, pod), nil, nil).Error())
	st := f.status(t, pod)
	h := &hookRuntime{RuntimeServiceClient: f.m.rs, exec: exitWith(0), stops: map[string]int64{}}
	f.m.rs = h
	f.drain()
	return h, st
}

func TestPreStopHookTimeIsTakenOffTheGracePeriod(t *testing.T) {
	f := newSyncFixture(t)
	pod := hookPod(30)
	h, st := runningHookPod(t, f, pod)
	h.exec = func(context.Context, *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
		f.clk.Step(7 * time.Second) // the hook takes 7 s
		return &runtimeapi.ExecSyncResponse{}, nil
	}
	require.NoError(t, f.m.KillPod(context.Background(), pod, kubecontainer.ConvertPodStatusToRunningPod(f.m.Type(), st), nil))

	app, _ := h.stopOf(st.FindContainerStatusByName("app").ID)
	sidecar, _ := h.stopOf(st.FindContainerStatusByName("sidecar").ID)
	assert.Equal(t, int64(23), app, "30 s minus the 7 s the preStop hook took")
	assert.Equal(t, int64(30), sidecar, "no hook: the whole grace period")
	assert.Equal(t, [][]string{{"/bin/drain"}}, h.execs, "the hook ran once, in the container")
}

func TestPreStopHookThatOutlivesTheGracePeriodLeavesTheMinimum(t *testing.T) {
	f := newSyncFixture(t)
	pod := hookPod(10)
	pod.Spec.Containers = pod.Spec.Containers[:1]
	h, st := runningHookPod(t, f, pod)
	release := make(chan struct{})
	defer close(release)
	h.exec = func(context.Context, *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
		<-release // a hook that hangs
		return &runtimeapi.ExecSyncResponse{}, nil
	}
	// The containers' own scripts sleep on the same fake clock: wait for
	// one more waiter than they make, the kubelet's wait for the hook.
	before := f.clk.Waiters()
	done := make(chan error, 1)
	go func() {
		done <- f.m.KillPod(context.Background(), pod, kubecontainer.ConvertPodStatusToRunningPod(f.m.Type(), st), nil)
	}()
	require.Eventually(t, func() bool { return f.clk.Waiters() > before }, 5*time.Second, time.Millisecond, "waiting for the hook, at most the grace period")
	_, stopped := h.stopOf(st.FindContainerStatusByName("app").ID)
	assert.False(t, stopped, "not stopped while the hook runs within the grace period")
	f.clk.Step(10 * time.Second)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second): // a guard against a hang, not a timing
		t.Fatal("KillPod still waits for the hook after the grace period")
	}
	app, _ := h.stopOf(st.FindContainerStatusByName("app").ID)
	assert.Equal(t, int64(minimumGracePeriodInSeconds), app, "the grace period is used up; StopContainer still gets upstream's 2 s")
}

func TestPreStopHookWithAGracePeriodOverride(t *testing.T) {
	f := newSyncFixture(t)
	pod := hookPod(30)
	pod.Spec.Containers = pod.Spec.Containers[:1]
	h, st := runningHookPod(t, f, pod)
	h.exec = func(context.Context, *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
		f.clk.Step(3 * time.Second)
		return &runtimeapi.ExecSyncResponse{}, nil
	}
	id := st.FindContainerStatusByName("app").ID
	running := kubecontainer.Pod{Containers: []*kubecontainer.Container{{ID: id, Name: "app"}}}
	require.NoError(t, f.m.KillPod(context.Background(), pod, running, ptr.To[int64](8)))
	got, _ := h.stopOf(id)
	assert.Equal(t, int64(5), got, "the override bounds the hook too: 8 s minus 3 s")
}

func TestPreStopHookThatFailsIsRecordedAndTheContainerStillStops(t *testing.T) {
	f := newSyncFixture(t)
	pod := hookPod(30)
	pod.Spec.Containers = pod.Spec.Containers[:1]
	h, st := runningHookPod(t, f, pod)
	h.exec = exitWith(1)
	require.NoError(t, f.m.KillPod(context.Background(), pod, kubecontainer.ConvertPodStatusToRunningPod(f.m.Type(), st), nil))
	got, _ := h.stopOf(st.FindContainerStatusByName("app").ID)
	assert.Equal(t, int64(30), got)
	assert.Equal(t, []string{"Normal Killing Stopping container app", "Warning FailedPreStopHook PreStopHook failed"}, eventPrefixes(f.drain()))
}

// eventPrefixes cuts the FakeRecorder's trailing involvedObject part.
func eventPrefixes(events []string) []string {
	var out []string
	for _, e := range events {
		if i := strings.Index(e, " involvedObject{"); i >= 0 {
			e = e[:i]
		}
		out = append(out, e)
	}
	return out
}

func postStartPod() *v1.Pod {
	pod := webPod()
	pod.Spec.InitContainers = nil
	pod.Spec.Containers = pod.Spec.Containers[:1]
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"/bin/warm", "up"}}}}
	return pod
}

func TestPostStartHookRunsAfterTheContainerStarts(t *testing.T) {
	f := newSyncFixture(t)
	h := &hookRuntime{RuntimeServiceClient: f.m.rs, exec: exitWith(0), stops: map[string]int64{}}
	f.m.rs = h
	pod := postStartPod()
	require.NoError(t, f.m.SyncPod(context.Background(), pod, f.status(t, pod), nil, nil).Error())
	assert.Equal(t, [][]string{{"/bin/warm", "up"}}, h.execs)
	assert.Equal(t, kubecontainer.ContainerStateRunning, f.status(t, pod).FindContainerStatusByName("app").State)
}

func TestPostStartHookThatFailsKillsTheContainer(t *testing.T) {
	f := newSyncFixture(t)
	h := &hookRuntime{RuntimeServiceClient: f.m.rs, exec: exitWith(3), stops: map[string]int64{}}
	f.m.rs = h
	pod := postStartPod()
	res := f.m.SyncPod(context.Background(), pod, f.status(t, pod), nil, nil)
	require.Error(t, res.Error())
	last := res.SyncResults[len(res.SyncResults)-1]
	assert.Equal(t, kubecontainer.StartContainer, last.Action)
	assert.Equal(t, ErrPostStartHook, last.Error)
	assert.Equal(t, `Exec lifecycle hook ([/bin/warm up]) for Container "app" in Pod "web_default(uid-web)" failed - error: command '/bin/warm up' exited with 3: err, message: "outerr"`, last.Message)

	events := eventPrefixes(f.drain())
	require.GreaterOrEqual(t, len(events), 2)
	assert.Equal(t, []string{"Warning FailedPostStartHook PostStartHook failed", "Normal Killing FailedPostStartHook"}, events[len(events)-2:])
	st := f.status(t, pod).FindContainerStatusByName("app")
	assert.Equal(t, kubecontainer.ContainerStateExited, st.State, "killed")
	got, ok := h.stopOf(st.ID)
	assert.True(t, ok)
	assert.Equal(t, int64(30), got)
}

// hookServer counts the requests of httpGet hooks; it answers status.
func hookServer(t *testing.T, status int) (*httptest.Server, chan *http.Request) {
	got := make(chan *http.Request, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func TestHTTPGetPostStartHookIsSentAndAnyAnswerIsSuccess(t *testing.T) {
	srv, got := hookServer(t, http.StatusInternalServerError) // as upstream: any answer will do
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	f := newSyncFixture(t)
	pod := postStartPod()
	pod.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "hooks", ContainerPort: int32(port)}}
	pod.Spec.Containers[0].Lifecycle.PostStart = &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{
		Host: "127.0.0.1", Port: intstr.FromString("hooks"), Path: "/echo?msg=poststart"}}
	require.NoError(t, f.m.SyncPod(context.Background(), pod, f.status(t, pod), nil, nil).Error())
	r := <-got
	assert.Equal(t, "/echo?msg=poststart", r.URL.RequestURI())
	assert.Equal(t, "kube-lifecycle/1.37", r.Header.Get("User-Agent"))
	assert.Equal(t, kubecontainer.ContainerStateRunning, f.status(t, pod).FindContainerStatusByName("app").State)
}

func TestHTTPGetHookWithNoHostGoesToThePodIP(t *testing.T) {
	srv, got := hookServer(t, http.StatusOK)
	f := newSyncFixture(t)
	var dialed []string
	var mu sync.Mutex
	f.m.SetLifecycleHTTPDial(func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, addr)
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, srv.Listener.Addr().String()) // the "pod" is the test's server
	})
	pod := hookPod(30)
	pod.Spec.Containers[0].Lifecycle.PreStop = &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(8080), Path: "/drain"}}
	_, st := runningHookPod(t, f, pod)
	require.NotEmpty(t, st.IPs, "the fixture's runtime gives the pod an IP")
	c := st.FindContainerStatusByName("app")
	require.NoError(t, f.m.killContainer(context.Background(), pod, &kubecontainer.Container{ID: c.ID, Name: "app"}, "", nil))
	r := <-got
	assert.Equal(t, "/drain", r.URL.Path)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{net.JoinHostPort(st.IPs[0], "8080")}, dialed)
}

func TestHTTPGetPostStartHookThatCannotConnectKillsTheContainer(t *testing.T) {
	f := newSyncFixture(t)
	f.m.SetLifecycleHTTPDial(func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("connection refused")
	})
	pod := postStartPod()
	pod.Spec.Containers[0].Lifecycle.PostStart = &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt32(9), Path: "/warm"}}
	res := f.m.SyncPod(context.Background(), pod, f.status(t, pod), nil, nil)
	require.Error(t, res.Error())
	last := res.SyncResults[len(res.SyncResults)-1]
	assert.Equal(t, ErrPostStartHook, last.Error)
	assert.Contains(t, last.Message, `HTTP lifecycle hook (/warm) for Container "app" in Pod "web_default(uid-web)" failed - error: Get "http://127.0.0.1:9/warm": connection refused`)
	assert.Equal(t, kubecontainer.ContainerStateExited, f.status(t, pod).FindContainerStatusByName("app").State, "killed")
}
