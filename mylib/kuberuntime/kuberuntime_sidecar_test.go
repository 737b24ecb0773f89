package kuberuntime

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	kubecontainer "mykubelet/mylib/container"
	proberesults "mykubelet/mylib/prober/results"
)

// sidecarPod has init containers named in inits, those starting with "s"
// being sidecars (restartPolicy Always), and regular containers.
func sidecarPod(policy v1.RestartPolicy, inits []string, containers ...string) *v1.Pod {
	pod := testPod(policy, inits, containers...)
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name[0] == 's' {
			pod.Spec.InitContainers[i].RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
		}
	}
	return pod
}

func TestComputePodActionsWithSidecars(t *testing.T) {
	// s0 and s1 are sidecars, i2 a regular init container.
	always := sidecarPod(v1.RestartPolicyAlways, []string{"s0", "s1", "i2"}, "a")
	never := sidecarPod(v1.RestartPolicyNever, []string{"s0", "s1", "i2"}, "a")
	onFailure := sidecarPod(v1.RestartPolicyOnFailure, []string{"s0"}, "a")
	probed := sidecarPod(v1.RestartPolicyAlways, []string{"s0", "s1"}, "a")
	// Each probe's own grace period is the kill's, as for a regular
	// container (the e2e specs "Probing restartable init container should
	// override timeoutGracePeriodSeconds when … Probe field is set").
	startupGrace, livenessGrace := int64(7), int64(5)
	probed.Spec.InitContainers[0].StartupProbe = &v1.Probe{TerminationGracePeriodSeconds: &startupGrace}
	probed.Spec.InitContainers[0].LivenessProbe = &v1.Probe{TerminationGracePeriodSeconds: &livenessGrace}
	ps0 := running(probed, "s0")

	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		status  *kubecontainer.PodStatus
		startup probeResults
		live    probeResults
		want    podActions
	}{
		{name: "fresh pod: the first init container only", pod: always, status: podStatusOf(nil),
			want: podActions{KillPod: true, CreateSandbox: true, InitContainersToStart: []int{0}}},
		{name: "a sidecar running without startup probe has started: the next one goes", pod: always,
			status: podStatusOf(ready(), running(always, "s0")),
			want:   podActions{SandboxID: "s1", InitContainersToStart: []int{1}}},
		{name: "both sidecars started: the regular init container", pod: always,
			status: podStatusOf(ready(), running(always, "s1"), running(always, "s0")),
			want:   podActions{SandboxID: "s1", InitContainersToStart: []int{2}}},
		{name: "the regular init container runs: wait, sidecars keep running", pod: always,
			status: podStatusOf(ready(), running(always, "i2"), running(always, "s1"), running(always, "s0")),
			want:   podActions{SandboxID: "s1"}},
		{name: "initialized: the regular containers start beside the sidecars", pod: always,
			status: podStatusOf(ready(), exited(always, "i2", 0), running(always, "s1"), running(always, "s0")),
			want:   podActions{SandboxID: "s1", ContainersToStart: []int{0}}},
		{name: "a sidecar exited after initialization: restarted", pod: always,
			status: podStatusOf(ready(), running(always, "a"), exited(always, "i2", 0), exited(always, "s1", 1), running(always, "s0")),
			want:   podActions{SandboxID: "s1", InitContainersToStart: []int{1}}},
		{name: "a sidecar exited 0 under Never: restarted all the same", pod: never,
			status: podStatusOf(ready(), running(never, "a"), exited(never, "i2", 0), running(never, "s1"), exited(never, "s0", 0)),
			want:   podActions{SandboxID: "s1", InitContainersToStart: []int{0}}},
		{name: "a sidecar the runtime forgot after initialization: started again", pod: always,
			status: podStatusOf(ready(), running(always, "a"), running(always, "s1")),
			want:   podActions{SandboxID: "s1", InitContainersToStart: []int{0}}},
		{name: "a sidecar exited before the next started: restarted, the next waits", pod: always,
			status: podStatusOf(ready(), exited(always, "s0", 1)),
			want:   podActions{SandboxID: "s1", InitContainersToStart: []int{0}}},
		{name: "startup probe pending: the next init container waits", pod: probed,
			status: podStatusOf(ready(), ps0), startup: probeResults{}, live: probeResults{},
			want: podActions{SandboxID: "s1"}},
		{name: "startup probe unknown: the next init container waits", pod: probed,
			status: podStatusOf(ready(), ps0), startup: probeResults{ps0.ID: proberesults.Unknown}, live: probeResults{},
			want: podActions{SandboxID: "s1"}},
		{name: "startup probe succeeded: the next init container goes", pod: probed,
			status: podStatusOf(ready(), ps0), startup: probeResults{ps0.ID: proberesults.Success}, live: probeResults{},
			want: podActions{SandboxID: "s1", InitContainersToStart: []int{1}}},
		{name: "startup probe failed: the sidecar is killed and started again", pod: probed,
			status: podStatusOf(ready(), ps0), startup: probeResults{ps0.ID: proberesults.Failure}, live: probeResults{},
			want: podActions{SandboxID: "s1", InitContainersToStart: []int{0}, ContainersToKill: map[kubecontainer.ContainerID]containerToKillInfo{
				ps0.ID: {container: &kubecontainer.Container{ID: ps0.ID, Name: "s0"}, name: "s0", message: "Init container s0 failed startup probe", gracePeriodOverride: &startupGrace}}}},
		{name: "liveness failed after initialization: the sidecar is restarted", pod: probed,
			status:  podStatusOf(ready(), running(probed, "a"), running(probed, "s1"), ps0),
			startup: probeResults{ps0.ID: proberesults.Success}, live: probeResults{ps0.ID: proberesults.Failure},
			want: podActions{SandboxID: "s1", InitContainersToStart: []int{0}, ContainersToKill: map[kubecontainer.ContainerID]containerToKillInfo{
				ps0.ID: {container: &kubecontainer.Container{ID: ps0.ID, Name: "s0"}, name: "s0", message: "Init container s0 failed liveness probe", gracePeriodOverride: &livenessGrace}}}},
		{name: "Never: the regular container finished, the sidecars still run: kill the pod", pod: never,
			status: podStatusOf(ready(), exited(never, "a", 0), exited(never, "i2", 0), running(never, "s1"), running(never, "s0")),
			want:   podActions{KillPod: true, SandboxID: "s1"}},
		{name: "OnFailure: the regular container succeeded: kill the pod", pod: onFailure,
			status: podStatusOf(ready(), exited(onFailure, "a", 0), running(onFailure, "s0")),
			want:   podActions{KillPod: true, SandboxID: "s1"}},
		{name: "OnFailure, sandbox gone after success: no new sandbox", pod: onFailure,
			status: podStatusOf([]*runtimeapi.PodSandboxStatus{sandboxStatus("s1", 0, false)}, exited(onFailure, "a", 0), exited(onFailure, "s0", 143)),
			want:   podActions{KillPod: true, SandboxID: "s1", Attempt: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want.ContainersToKill == nil {
				tc.want.ContainersToKill = map[kubecontainer.ContainerID]containerToKillInfo{}
			}
			m := &Manager{}
			if tc.startup != nil {
				m.startupManager, m.livenessManager = tc.startup, tc.live
			}
			assert.Equal(t, tc.want, m.computePodActions(tc.pod, tc.status))
		})
	}
}

// orderedStops is a RuntimeService whose StopContainer blocks for the
// containers in block until released, and records the order in which the
// stops end and the timeout each was given.
type orderedStops struct {
	runtimeapi.RuntimeServiceClient
	mu       sync.Mutex
	block    map[string]chan struct{}
	called   chan string
	stopped  []string
	timeouts map[string]int64
}

func (s *orderedStops) StopContainer(_ context.Context, req *runtimeapi.StopContainerRequest, _ ...grpc.CallOption) (*runtimeapi.StopContainerResponse, error) {
	s.called <- req.ContainerId
	if ch, ok := s.block[req.ContainerId]; ok {
		<-ch
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = append(s.stopped, req.ContainerId)
	s.timeouts[req.ContainerId] = req.Timeout
	return &runtimeapi.StopContainerResponse{}, nil
}

func runningPodOf(names ...string) kubecontainer.Pod {
	p := kubecontainer.Pod{ID: "uid-1"}
	for _, n := range names {
		p.Containers = append(p.Containers, &kubecontainer.Container{ID: kubecontainer.ContainerID{Type: "fake", ID: n}, Name: n})
	}
	return p
}

// TestKillPodStopsSidecarsLastInReverseOrder: the regular containers stop
// first, then the sidecars from the last to the first; each sidecar's stop
// gets what is left of the grace period after waiting for its turn.
func TestKillPodStopsSidecarsLastInReverseOrder(t *testing.T) {
	pod := sidecarPod(v1.RestartPolicyAlways, []string{"s0", "i1", "s2"}, "a", "b")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	release := make(chan struct{})
	rs := &orderedStops{block: map[string]chan struct{}{"a": release}, called: make(chan string, 10), timeouts: map[string]int64{}}
	m := &Manager{rs: rs, clock: clk}

	done := make(chan []*kubecontainer.SyncResult)
	go func() {
		done <- m.killContainersWithSyncResult(context.Background(), pod, runningPodOf("s0", "s2", "a", "b"), nil)
	}()
	// a and b are told to stop at once; a takes its time.
	got := map[string]bool{<-rs.called: true, <-rs.called: true}
	assert.Equal(t, map[string]bool{"a": true, "b": true}, got, "the regular containers stop first")
	// Both sidecars wait for their turn on the clock: 10 s pass.
	require.Eventually(t, func() bool { return clk.HasWaiters() }, 10*time.Second, time.Millisecond)
	clk.Step(10 * time.Second)
	close(release)

	results := <-done
	require.Len(t, results, 4)
	for _, r := range results {
		assert.NoError(t, r.Error)
	}
	assert.Equal(t, []string{"b", "a", "s2", "s0"}, rs.stopped)
	assert.Equal(t, int64(30), rs.timeouts["a"])
	assert.Equal(t, int64(20), rs.timeouts["s2"], "what is left of the grace period")
	assert.Equal(t, int64(20), rs.timeouts["s0"])
}

// TestKillPodSidecarsGoWhenTheGracePeriodIsOver: a regular container that
// does not stop within the grace period does not keep the sidecars
// waiting longer; they get the minimum.
func TestKillPodSidecarsGoWhenTheGracePeriodIsOver(t *testing.T) {
	pod := sidecarPod(v1.RestartPolicyAlways, []string{"s0"}, "a")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	release := make(chan struct{})
	rs := &orderedStops{block: map[string]chan struct{}{"a": release}, called: make(chan string, 10), timeouts: map[string]int64{}}
	m := &Manager{rs: rs, clock: clk}
	done := make(chan []*kubecontainer.SyncResult)
	go func() {
		done <- m.killContainersWithSyncResult(context.Background(), pod, runningPodOf("a", "s0"), nil)
	}()
	assert.Equal(t, "a", <-rs.called)
	require.Eventually(t, func() bool { return clk.HasWaiters() }, 10*time.Second, time.Millisecond)
	clk.Step(5 * time.Second)
	assert.Equal(t, "s0", <-rs.called, "the sidecar goes once the grace period is over")
	close(release)
	<-done
	assert.Equal(t, []string{"s0", "a"}, rs.stopped)
	assert.Equal(t, int64(minimumGracePeriodInSeconds), rs.timeouts["s0"])
}

// sidecarJob is a Job-like pod: a sidecar that serves until SIGTERM, a
// regular init container that completes at once, and a main container.
func sidecarJob() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "default", UID: "uid-job"},
		Spec: v1.PodSpec{
			RestartPolicy:                 v1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			InitContainers: []v1.Container{
				{Name: "logshipper", Image: "busybox:1.37", ImagePullPolicy: v1.PullIfNotPresent,
					RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways), Command: []string{"sh", "-c", serveUntilTERM}},
				{Name: "setup", Image: "busybox:1.37", ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sh", "-c", serveUntilTERM}},
			},
			Containers: []v1.Container{{Name: "main", Image: "busybox:1.37", ImagePullPolicy: v1.PullIfNotPresent,
				Command: []string{"sh", "-c", serveUntilTERM}}},
		},
	}
}

// TestSyncPodStartsSidecarThenNextAndRestartsIt drives a pod through the
// mock runtime: the sidecar starts first and stays; the next init
// container starts once it has; the main container once that completed;
// a sidecar that exits is started again (with CrashLoopBackOff, though the
// pod's policy is Never); when the main container is done, the pod is
// killed and the sidecar stopped.
func TestSyncPodStartsSidecarThenNextAndRestartsIt(t *testing.T) {
	ctx := context.Background()
	f := newSyncFixture(t)
	pod := sidecarJob()
	backOff := flowcontrol.NewFakeBackOff(10*time.Second, 300*time.Second, f.clk)
	sync := func() kubecontainer.PodSyncResult {
		t.Helper()
		return f.m.SyncPod(ctx, pod, f.status(t, pod), nil, backOff)
	}
	stop := func(name string) {
		t.Helper()
		cs := f.status(t, pod).FindContainerStatusByName(name)
		require.NotNil(t, cs, name)
		_, err := f.m.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: cs.ID.ID, Timeout: 10})
		require.NoError(t, err)
	}
	state := func(name string) kubecontainer.State {
		t.Helper()
		cs := f.status(t, pod).FindContainerStatusByName(name)
		if cs == nil {
			return ""
		}
		return cs.State
	}

	require.NoError(t, sync().Error())
	assert.Equal(t, kubecontainer.ContainerStateRunning, state("logshipper"))
	assert.Empty(t, state("setup"), "the next init container waits for the sidecar")

	require.NoError(t, sync().Error())
	assert.Equal(t, kubecontainer.ContainerStateRunning, state("setup"), "the sidecar started: the next one goes")
	assert.Equal(t, kubecontainer.ContainerStateRunning, state("logshipper"))

	stop("setup") // completes with 0
	require.NoError(t, sync().Error())
	assert.Equal(t, kubecontainer.ContainerStateRunning, state("main"))
	assert.Equal(t, kubecontainer.ContainerStateRunning, state("logshipper"))

	// The sidecar exits: started again, with restart count 1.
	stop("logshipper")
	f.drain()
	require.NoError(t, sync().Error())
	cs := f.status(t, pod).FindContainerStatusByName("logshipper")
	require.NotNil(t, cs)
	assert.Equal(t, kubecontainer.ContainerStateRunning, cs.State)
	assert.Equal(t, 1, cs.RestartCount)

	// It exits again at once: now it waits for the back-off.
	stop("logshipper")
	res := sync()
	require.Error(t, res.Error())
	assert.ErrorIs(t, res.Error(), kubecontainer.ErrCrashLoopBackOff)
	assert.Contains(t, f.drain(), "Warning BackOff Back-off restarting failed container logshipper in pod job_default(uid-job)")
	f.clk.Step(20 * time.Second)
	require.NoError(t, sync().Error())
	assert.Equal(t, kubecontainer.ContainerStateRunning, state("logshipper"))

	// The main container finishes: the pod is killed, sidecar included.
	stop("main")
	require.NoError(t, sync().Error())
	assert.Equal(t, kubecontainer.ContainerStateExited, state("logshipper"))
	st := f.status(t, pod)
	require.Len(t, st.SandboxStatuses, 1)
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, st.SandboxStatuses[0].State)
	// Nothing more: no new sandbox, nothing started.
	res = sync()
	require.NoError(t, res.Error())
	for _, r := range res.SyncResults {
		assert.NotContains(t, []kubecontainer.SyncAction{kubecontainer.CreatePodSandbox, kubecontainer.InitContainer, kubecontainer.StartContainer}, r.Action)
	}
	assert.Equal(t, kubecontainer.ContainerStateExited, state("logshipper"))
}
