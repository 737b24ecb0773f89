package prober

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/prober/results"
)

// fakeStatus is a status manager holding one status per pod.
type fakeStatus struct {
	mu sync.Mutex
	m  map[types.UID]v1.PodStatus
}

func (f *fakeStatus) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.m[uid]
	return s, ok
}

func (f *fakeStatus) set(uid types.UID, s v1.PodStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[uid] = s
}

// fakeProber answers what next says, and counts its calls.
type fakeProber struct {
	mu    sync.Mutex
	next  results.Result
	err   error
	calls int
}

func (f *fakeProber) probe(context.Context, probeType, *v1.Pod, v1.PodStatus, v1.Container, kubecontainer.ContainerID) (results.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.next, f.err
}

func (f *fakeProber) answer(r results.Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next = r
}

const testContainerID = "mykubelet-fake://c1"

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type fixture struct {
	clock  *testclock.FakeClock
	status *fakeStatus
	prober *fakeProber
	m      *manager
	pod    *v1.Pod
}

func newFixture(t *testing.T, probe v1.Probe) *fixture {
	t.Helper()
	f := &fixture{clock: testclock.NewFakeClock(t0), status: &fakeStatus{m: map[types.UID]v1.PodStatus{}}, prober: &fakeProber{next: results.Success}}
	m, err := newManager(Config{StatusManager: f.status, Clock: f.clock, Jitter: func(time.Duration) time.Duration { return 0 }})
	require.NoError(t, err)
	m.prober = f.prober
	f.m = m
	p := probe
	f.pod = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-1"},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "c", ReadinessProbe: &p, LivenessProbe: &p, StartupProbe: &p}}}}
	return f
}

// running sets a status with the container running since startedAt,
// started as given.
func (f *fixture) running(startedAt time.Time, started bool) {
	f.status.set(f.pod.UID, v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.88.0.2", ContainerStatuses: []v1.ContainerStatus{{
		Name: "c", ContainerID: testContainerID, Started: &started,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(startedAt)}},
	}}})
}

func (f *fixture) worker(t probeType) *worker {
	return newWorker(f.m, t, f.pod, f.pod.Spec.Containers[0])
}

func get(t *testing.T, w *worker) results.Result {
	t.Helper()
	r, ok := w.resultsManager.Get(kubecontainer.ContainerID{Type: "mykubelet-fake", ID: "c1"})
	require.True(t, ok, "a result for the container")
	return r
}

func TestInitialValues(t *testing.T) {
	f := newFixture(t, v1.Probe{InitialDelaySeconds: 100})
	f.running(t0, false)
	for pt, want := range map[probeType]results.Result{readiness: results.Failure, liveness: results.Success, startup: results.Unknown} {
		w := f.worker(pt)
		require.True(t, w.doProbe(context.Background()))
		assert.Equal(t, want, get(t, w), "%s starts %s", pt, want)
	}
	assert.Equal(t, 0, f.prober.calls, "within initialDelaySeconds nothing is probed")
}

func TestInitialDelaySeconds(t *testing.T) {
	f := newFixture(t, v1.Probe{InitialDelaySeconds: 5, PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3})
	f.running(t0, true)
	w := f.worker(readiness)
	f.clock.SetTime(t0.Add(4999 * time.Millisecond))
	w.doProbe(context.Background())
	assert.Equal(t, 0, f.prober.calls, "4.999 s after the start: not yet")
	assert.Equal(t, results.Failure, get(t, w), "readiness is false until the first success")
	f.clock.SetTime(t0.Add(5 * time.Second))
	w.doProbe(context.Background())
	assert.Equal(t, 1, f.prober.calls, "5 s after the start: probed")
	assert.Equal(t, results.Success, get(t, w))
}

func TestSuccessThreshold(t *testing.T) {
	f := newFixture(t, v1.Probe{PeriodSeconds: 1, SuccessThreshold: 3, FailureThreshold: 1})
	f.running(t0, true)
	w := f.worker(readiness)
	for i := 1; i <= 2; i++ {
		w.doProbe(context.Background())
		assert.Equal(t, results.Failure, get(t, w), "after %d successes of 3", i)
	}
	w.doProbe(context.Background())
	assert.Equal(t, results.Success, get(t, w), "after 3 successes in a row")
	f.prober.answer(results.Failure)
	w.doProbe(context.Background())
	assert.Equal(t, results.Failure, get(t, w), "one failure is enough with failureThreshold 1")
	f.prober.answer(results.Success)
	w.doProbe(context.Background())
	w.doProbe(context.Background())
	f.prober.answer(results.Failure)
	w.doProbe(context.Background())
	f.prober.answer(results.Success)
	w.doProbe(context.Background())
	assert.Equal(t, results.Failure, get(t, w), "the run of successes starts again after a failure")
}

func TestFailureThresholdThenOnHoldUntilANewContainer(t *testing.T) {
	f := newFixture(t, v1.Probe{PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3})
	f.running(t0, true)
	w := f.worker(liveness)
	f.prober.answer(results.Failure)
	for i := 1; i <= 2; i++ {
		w.doProbe(context.Background())
		assert.Equal(t, results.Success, get(t, w), "after %d failures of 3 the container still lives", i)
	}
	w.doProbe(context.Background())
	assert.Equal(t, results.Failure, get(t, w), "3 failures in a row: liveness failed")
	calls := f.prober.calls
	w.doProbe(context.Background())
	assert.Equal(t, calls, f.prober.calls, "on hold: no probe until a new container")

	// The kubelet restarts it: a new container ID, back to Success, probed again.
	s, _ := f.status.GetPodStatus(f.pod.UID)
	s.ContainerStatuses[0].ContainerID = "mykubelet-fake://c2"
	f.status.set(f.pod.UID, s)
	f.prober.answer(results.Success)
	w.doProbe(context.Background())
	assert.Equal(t, calls+1, f.prober.calls)
	r, ok := w.resultsManager.Get(kubecontainer.ContainerID{Type: "mykubelet-fake", ID: "c2"})
	assert.True(t, ok)
	assert.Equal(t, results.Success, r)
	_, ok = w.resultsManager.Get(kubecontainer.ContainerID{Type: "mykubelet-fake", ID: "c1"})
	assert.False(t, ok, "the old container's result is gone")
}

func TestStartupProbeHoldsBackTheOthers(t *testing.T) {
	f := newFixture(t, v1.Probe{PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3})
	f.running(t0, false) // not started: the startup probe has not passed
	for _, pt := range []probeType{readiness, liveness} {
		w := f.worker(pt)
		w.doProbe(context.Background())
	}
	assert.Equal(t, 0, f.prober.calls, "readiness and liveness wait for the container to start")
	w := f.worker(startup)
	w.doProbe(context.Background())
	assert.Equal(t, 1, f.prober.calls, "the startup probe runs")
	assert.Equal(t, results.Success, get(t, w))

	f.running(t0, true) // UpdatePodStatus has marked it started
	w.doProbe(context.Background())
	assert.Equal(t, 1, f.prober.calls, "once started, the startup probe runs no more")
	r := f.worker(readiness)
	r.doProbe(context.Background())
	assert.Equal(t, 2, f.prober.calls, "readiness now runs")
}

func TestStartupFailureAtItsThreshold(t *testing.T) {
	f := newFixture(t, v1.Probe{PeriodSeconds: 10, FailureThreshold: 30})
	f.running(t0, false)
	f.prober.answer(results.Failure)
	w := f.worker(startup)
	for range 29 {
		w.doProbe(context.Background())
	}
	assert.Equal(t, results.Unknown, get(t, w), "29 failures of 30: still starting (5 minutes at period 10)")
	w.doProbe(context.Background())
	assert.Equal(t, results.Failure, get(t, w), "30: it failed to start")
	assert.True(t, w.onHold)
}

func TestNotRunningIsAFailureAndNeverStopsTheWorker(t *testing.T) {
	f := newFixture(t, v1.Probe{PeriodSeconds: 1})
	f.running(t0, true)
	w := f.worker(readiness)
	w.doProbe(context.Background())
	require.Equal(t, results.Success, get(t, w))
	s, _ := f.status.GetPodStatus(f.pod.UID)
	s.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}
	f.status.set(f.pod.UID, s)
	assert.True(t, w.doProbe(context.Background()), "restartPolicy Always: it will run again")
	assert.Equal(t, results.Failure, get(t, w))
	f.pod.Spec.RestartPolicy = v1.RestartPolicyNever
	assert.False(t, w.doProbe(context.Background()), "restartPolicy Never: the worker ends")
	s.Phase = v1.PodFailed
	f.status.set(f.pod.UID, s)
	assert.False(t, w.doProbe(context.Background()), "a terminated pod ends its workers")
}

func TestProbeErrorKeepsTheLastResult(t *testing.T) {
	f := newFixture(t, v1.Probe{PeriodSeconds: 1, FailureThreshold: 1})
	f.running(t0, true)
	w := f.worker(readiness)
	w.doProbe(context.Background())
	require.Equal(t, results.Success, get(t, w))
	f.prober.err = assert.AnError
	f.prober.next = results.Failure
	w.doProbe(context.Background())
	assert.Equal(t, results.Success, get(t, w), "a probe that could not run changes nothing")
}

// TestWorkerProbesEveryPeriodSeconds runs a real worker goroutine on the
// fake clock: a probe at once, then one per periodSeconds.
func TestWorkerProbesEveryPeriodSeconds(t *testing.T) {
	f := newFixture(t, v1.Probe{PeriodSeconds: 7, FailureThreshold: 1})
	f.pod.Spec.Containers[0].LivenessProbe, f.pod.Spec.Containers[0].StartupProbe = nil, nil
	f.running(t0, true)
	f.m.AddPod(f.pod)
	defer f.m.Close()
	calls := func() int { f.prober.mu.Lock(); defer f.prober.mu.Unlock(); return f.prober.calls }
	require.Eventually(t, func() bool { return calls() == 1 }, 10*time.Second, time.Millisecond, "the first probe at once")
	require.Eventually(t, f.clock.HasWaiters, 10*time.Second, time.Millisecond, "the worker waits for its ticker")
	f.clock.Step(6 * time.Second)
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, 1, calls(), "6 s: no probe yet")
	f.clock.Step(time.Second)
	require.Eventually(t, func() bool { return calls() == 2 }, 10*time.Second, time.Millisecond, "7 s: the second probe")
	// A readiness update arrived for the first success.
	u := <-f.m.readinessManager.Updates()
	assert.Equal(t, results.Failure, u.Result, "first the initial value")
	u = <-f.m.readinessManager.Updates()
	assert.Equal(t, results.Success, u.Result)
	assert.Equal(t, f.pod.UID, u.PodUID)

	f.m.RemovePod(f.pod)
	require.Eventually(t, func() bool { return f.m.workerCount() == 0 }, 10*time.Second, time.Millisecond, "RemovePod stops the worker")
	_, ok := f.m.readinessManager.Get(kubecontainer.ContainerID{Type: "mykubelet-fake", ID: "c1"})
	assert.False(t, ok, "and its result goes with it")
}

func TestUpdatePodStatus(t *testing.T) {
	f := newFixture(t, v1.Probe{PeriodSeconds: 1})
	id := kubecontainer.ContainerID{Type: "mykubelet-fake", ID: "c1"}
	f.pod.Spec.Containers = append(f.pod.Spec.Containers, v1.Container{Name: "plain"})
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}
	status := func() *v1.PodStatus {
		return &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{
			{Name: "c", ContainerID: testContainerID, State: running, Ready: true},
			{Name: "plain", ContainerID: "mykubelet-fake://p1", State: running},
			{Name: "waiting", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{}}},
		}}
	}
	// Workers exist (no goroutines needed: registered by hand).
	f.m.mu.Lock()
	for _, pt := range []probeType{readiness, startup} {
		f.m.workers[probeKey{f.pod.UID, "c", pt}] = f.worker(pt)
	}
	f.m.mu.Unlock()

	s := status()
	f.m.UpdatePodStatus(f.pod, s)
	assert.False(t, *s.ContainerStatuses[0].Started, "a startup probe that has not passed: not started")
	assert.False(t, s.ContainerStatuses[0].Ready, "not started: not ready")
	assert.True(t, *s.ContainerStatuses[1].Started, "no probes: started once running")
	assert.True(t, s.ContainerStatuses[1].Ready, "no readiness probe: ready once started")
	assert.False(t, *s.ContainerStatuses[2].Started)
	assert.False(t, s.ContainerStatuses[2].Ready)

	f.m.startupManager.Set(id, results.Success, f.pod)
	s = status()
	f.m.UpdatePodStatus(f.pod, s)
	assert.True(t, *s.ContainerStatuses[0].Started)
	assert.False(t, s.ContainerStatuses[0].Ready, "started, readiness not passed yet")
	select {
	case <-f.m.workers[probeKey{f.pod.UID, "c", readiness}].manualTriggerCh:
	default:
		t.Error("no readiness result yet: the readiness worker is asked to probe now")
	}
	f.m.readinessManager.Set(id, results.Success, f.pod)
	s = status()
	f.m.UpdatePodStatus(f.pod, s)
	assert.True(t, s.ContainerStatuses[0].Ready, "readiness passed")
	f.m.readinessManager.Set(id, results.Failure, f.pod)
	s = status()
	f.m.UpdatePodStatus(f.pod, s)
	assert.False(t, s.ContainerStatuses[0].Ready, "readiness failed")
}
