package kubelet

import (
	"context"
	"errors"
	"testing"
	"time"

	"strings"
	"sync/atomic"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/nodestatus"
)

// fakeCRI answers Status and Version; the other calls are not used here.
type fakeCRI struct {
	runtimeapi.RuntimeServiceClient
	status *runtimeapi.RuntimeStatus
	err    error
}

func (f *fakeCRI) Status(context.Context, *runtimeapi.StatusRequest, ...grpc.CallOption) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{Status: f.status}, f.err
}

func (f *fakeCRI) Version(context.Context, *runtimeapi.VersionRequest, ...grpc.CallOption) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "fakecri", RuntimeVersion: "1.2.3"}, f.err
}

func readyStatus(runtimeReady, networkReady bool) *runtimeapi.RuntimeStatus {
	return &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: runtimeReady, Reason: "R", Message: "runtime says so"},
		{Type: runtimeapi.NetworkReady, Status: networkReady, Reason: "N", Message: "cni says so"},
	}}
}

// newRuntimeKubelet is a Kubelet whose runtime health comes from cri, on a
// fake clock, with a healthy PLEG unless pleg says otherwise.
func newRuntimeKubelet(cri *fakeCRI, clk clock.WithTicker, pleg func() (bool, error)) *Kubelet {
	kl := &Kubelet{clock: clk, cri: cri, runtimeState: newRuntimeState(MaxWaitForContainerRuntime, clk)}
	kl.runtimeState.addHealthCheck("PLEG", pleg)
	return kl
}

func healthy() (bool, error) { return true, nil }

func TestRuntimeIsDownAfter30sWithoutAGoodStatus(t *testing.T) {
	assert.Equal(t, 5*time.Second, RuntimeUpPeriod)
	assert.Equal(t, 30*time.Second, MaxWaitForContainerRuntime)
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	cri := &fakeCRI{status: readyStatus(true, true)}
	kl := newRuntimeKubelet(cri, clk, healthy)

	assert.EqualError(t, kl.RuntimeErrors(), "container runtime status check may not have completed yet\nnetwork state unknown")
	kl.updateRuntimeUp(context.Background())
	assert.NoError(t, kl.RuntimeErrors())

	cri.err = errors.New("connection refused") // the runtime went away
	clk.Step(29 * time.Second)
	kl.updateRuntimeUp(context.Background())
	assert.NoError(t, kl.RuntimeErrors(), "29 s after the last good Status")
	clk.Step(time.Second)
	assert.EqualError(t, kl.RuntimeErrors(), "container runtime is down")

	cri.err = nil // back
	kl.updateRuntimeUp(context.Background())
	assert.NoError(t, kl.RuntimeErrors())
}

func TestRuntimeAndNetworkNotReadyConditions(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	cri := &fakeCRI{status: readyStatus(true, false)}
	kl := newRuntimeKubelet(cri, clk, healthy)
	kl.updateRuntimeUp(context.Background())
	assert.EqualError(t, kl.RuntimeErrors(), "container runtime network not ready: NetworkReady=false reason:N message:cni says so")

	cri.status = readyStatus(false, true)
	kl.updateRuntimeUp(context.Background())
	assert.EqualError(t, kl.RuntimeErrors(), "container runtime not ready: RuntimeReady=false reason:R message:runtime says so")

	cri.status = &runtimeapi.RuntimeStatus{} // no conditions at all
	kl.updateRuntimeUp(context.Background())
	assert.EqualError(t, kl.RuntimeErrors(), "container runtime not ready: <nil>\ncontainer runtime network not ready: <nil>")
}

func TestAnUnhealthyPLEGMakesTheNodeNotReady(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	kl := newRuntimeKubelet(&fakeCRI{status: readyStatus(true, true)}, clk, func() (bool, error) {
		return false, errors.New("pleg was last seen active 3m1s ago; threshold is 3m0s")
	})
	kl.updateRuntimeUp(context.Background())
	node := &v1.Node{Status: v1.NodeStatus{Capacity: v1.ResourceList{}}}
	for _, r := range nodestatus.RequiredCapacities {
		node.Status.Capacity[r] = resource.MustParse("1")
	}
	require.NoError(t, nodestatus.ReadyCondition(clk.Now, kl.RuntimeErrors, nodestatus.RequiredCapacities)(context.Background(), node))
	_, ready := nodestatus.GetNodeCondition(&node.Status, v1.NodeReady)
	require.NotNil(t, ready)
	assert.Equal(t, v1.ConditionFalse, ready.Status)
	assert.Equal(t, "KubeletNotReady", ready.Reason)
	assert.Equal(t, "PLEG is not healthy: pleg was last seen active 3m1s ago; threshold is 3m0s", ready.Message)
}

func TestRuntimeVersionComesFromCRIVersion(t *testing.T) {
	kl := newRuntimeKubelet(&fakeCRI{}, clock.RealClock{}, healthy)
	v, err := kl.RuntimeVersion(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "fakecri://1.2.3", v)
	assert.NoError(t, (&Kubelet{}).RuntimeErrors(), "no pod half: nothing to say")
}

func TestRunContainersNeedsARuntimeThatRunsPods(t *testing.T) {
	_, err := New(Config{Client: fake.NewClientset(), NodeName: "n1", Pods: &PodsConfig{
		Updates: make(chan kubetypes.PodUpdate), Runtime: emptyRuntime{}, RunContainers: true}})
	assert.ErrorIs(t, err, errNeedsContainerRuntime)
}

func TestTheCRIOrARuntimeNotBoth(t *testing.T) {
	rs := runtimeapi.NewRuntimeServiceClient(nil)
	is := runtimeapi.NewImageServiceClient(nil)
	for name, tc := range map[string]struct {
		pods PodsConfig
		want string
	}{
		"half the CRI": {PodsConfig{RemoteRuntimeService: rs}, "go together"},
		"both":         {PodsConfig{RemoteRuntimeService: rs, RemoteImageService: is, Runtime: emptyRuntime{}}, "not both"},
		"neither":      {PodsConfig{}, "is required (or WithoutWorkers)"},
	} {
		t.Run(name, func(t *testing.T) {
			tc.pods.Updates = make(chan kubetypes.PodUpdate)
			_, err := New(Config{Client: fake.NewClientset(), NodeName: "n1", Pods: &tc.pods})
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestSyncSummary(t *testing.T) {
	var r kubecontainer.PodSyncResult
	assert.Equal(t, "", syncSummary(r))
	assert.False(t, startedSomething(r))
	r.AddSyncResult(kubecontainer.NewSyncResult(kubecontainer.CreatePodSandbox, "default/p"),
		kubecontainer.NewSyncResult(kubecontainer.ConfigPodSandbox, "id"),
		kubecontainer.NewSyncResult(kubecontainer.InitContainer, "init"))
	failed := kubecontainer.NewSyncResult(kubecontainer.StartContainer, "web")
	failed.Fail(kubecontainer.ErrCrashLoopBackOff, "back-off 10s")
	r.AddSyncResult(failed)
	assert.Equal(t, "created sandbox, started init container init, start web failed: CrashLoopBackOff", syncSummary(r))
	assert.True(t, startedSomething(r))
}

func TestDefaultNodeStatusFuncsNeedARootDir(t *testing.T) {
	_, err := New(Config{Client: fake.NewClientset(), NodeName: "n1", Node: &NodeConfig{Status: &NodeStatusOptions{}}})
	assert.EqualError(t, err, "kubelet: Config.Node.Status.RootDir is required (the filesystem of ephemeral-storage)")
	kl, err := New(Config{Client: fake.NewClientset(), NodeName: "n1", Node: &NodeConfig{Status: &NodeStatusOptions{RootDir: t.TempDir()}}})
	require.NoError(t, err)
	assert.Len(t, kl.node.setters, 10, "upstream's defaultNodeStatusFuncs (Images among them), Ready last")
	node, err := kl.InitialNode(context.Background())
	require.NoError(t, err)
	_, ready := nodestatus.GetNodeCondition(&node.Status, v1.NodeReady)
	require.NotNil(t, ready)
	assert.Equal(t, v1.ConditionTrue, ready.Status, "no pod half: only the capacity decides")
	assert.Equal(t, "", node.Status.NodeInfo.ContainerRuntimeVersion, "no runtime to ask")
}

func TestNewClientsUseTheKubeletRates(t *testing.T) {
	assert.Equal(t, 50, DefaultKubeAPIQPS, "kubeAPIQPS, not client-go's 5")
	assert.Equal(t, 100, DefaultKubeAPIBurst)
	assert.Equal(t, 50, DefaultEventRecordQPS)
	assert.Equal(t, 100, DefaultEventBurst)
	client, events, err := NewClients(&rest.Config{Host: "https://127.0.0.1:1"})
	require.NoError(t, err)
	assert.InDelta(t, 50, client.CoreV1().RESTClient().GetRateLimiter().QPS(), 0.01)
	assert.InDelta(t, 50, events.CoreV1().RESTClient().GetRateLimiter().QPS(), 0.01)
	assert.NotSame(t, client.CoreV1().RESTClient().GetRateLimiter(), events.CoreV1().RESTClient().GetRateLimiter(), "events have a rate limiter of their own")
}

// switchRuntime is an empty runtime whose GetPods fails while broken.
type switchRuntime struct {
	emptyRuntime
	broken atomic.Bool
}

func (r *switchRuntime) GetPods(ctx context.Context, all bool) ([]*kubecontainer.Pod, error) {
	if r.broken.Load() {
		return nil, errors.New("rpc error: code = Unavailable desc = the runtime is down")
	}
	return r.emptyRuntime.GetPods(ctx, all)
}

// TestSyncLoopSkipsSyncsWhileThePLEGIsUnhealthy: while the PLEG cannot
// relist, the sync loop takes no update and logs why ("Skipping pod
// synchronization" … "PLEG is not healthy: …"); once a relist succeeds it
// takes the waiting update.
func TestSyncLoopSkipsSyncsWhileThePLEGIsUnhealthy(t *testing.T) {
	f := newPodFixture(t)
	rt := &switchRuntime{}
	rt.broken.Store(true)
	updates := make(chan kubetypes.PodUpdate, 1)
	require.NoError(t, f.kl.newPodHalf(PodsConfig{Updates: updates, Runtime: rt, Out: f.out}))
	f.kl.podWorkers = f.workers

	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer()
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), logger), time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.kl.RunPods(runCtx) }()
	defer func() { stop(); <-done }()

	updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{apiPod("a", "1")}}
	// stepUntil advances the fake clock (the loop's back-off, the PLEG's
	// relist timer) until cond holds; the test's context bounds it.
	stepUntil := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("gave up waiting until %s", what)
			case <-time.After(time.Millisecond):
			}
			f.clock.Step(time.Second)
		}
	}
	skips := func() int { return strings.Count(logs.String(), "Skipping pod synchronization") }
	stepUntil("the loop skipped three times", func() bool { return skips() >= 3 })
	assert.Contains(t, logs.String(), "PLEG is not healthy: pleg has yet to be successful")
	assert.Empty(t, f.workers.dispatched(), "nothing synced while the PLEG is unhealthy")
	assert.Len(t, updates, 1, "the update waits")

	rt.broken.Store(false)
	stepUntil("the waiting update is synced", func() bool { return len(f.workers.dispatched()) > 0 })
	assert.Equal(t, []string{"create a"}, f.workers.dispatched())
}

func TestRuntimeErrorsNamesEachFailingCheck(t *testing.T) {
	s := &runtimeState{}
	assert.NoError(t, s.runtimeErrors())
	s.addHealthCheck("PLEG", func() (bool, error) {
		return false, errors.New("pleg was last seen active 3m1s ago; threshold is 3m0s")
	})
	s.addHealthCheck("other", func() (bool, error) { return true, nil })
	assert.EqualError(t, s.runtimeErrors(), "PLEG is not healthy: pleg was last seen active 3m1s ago; threshold is 3m0s")
}

// TestCrashLoopBackOffRunsOnTheKubeletsClock: the back-off between
// restarts of a container is timed by the clock the Kubelet is given, so a
// test (or a learner's fake clock) drives it.
func TestCrashLoopBackOffRunsOnTheKubeletsClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(podT0)
	rt := fakeruntime.New(clk)
	m, err := kuberuntime.Connect(context.Background(), "unix://"+fakeruntimetest.Serve(t, rt), clk)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	kl, err := New(Config{Client: fake.NewClientset(), NodeName: "n1", Clock: clk, Pods: &PodsConfig{
		Updates: make(chan kubetypes.PodUpdate), RemoteRuntimeService: m.RuntimeService(), RemoteImageService: m.ImageService(), RunContainers: true}})
	require.NoError(t, err)
	require.Same(t, clk, kl.backOff.Clock)
	died := clk.Now() // the container exited now
	kl.backOff.Next("c", died)
	assert.True(t, kl.backOff.IsInBackOffSince("c", died))
	clk.Step(kuberuntime.InitialCrashLoopBackOff + time.Second)
	assert.False(t, kl.backOff.IsInBackOffSince("c", died), "over 10 s later on the kubelet's clock")
}
