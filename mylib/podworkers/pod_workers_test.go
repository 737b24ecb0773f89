package podworkers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/kubetypes"
)

// call is one PodSyncer call, as the fake records it.
type call struct {
	Kind        string // "sync", "terminating", "terminated"
	UID         types.UID
	Version     string // the pod's "v" label
	UpdateType  kubetypes.SyncPodType
	GracePeriod int64
	Status      *kubecontainer.PodStatus
	// Applied is what the PodStatusFunc did to an empty status (terminating calls).
	Applied v1.PodStatus
}

type fakeSyncer struct {
	mu       sync.Mutex
	calls    []call
	inFlight map[types.UID]int
	maxSame  int // the most syncs of one pod at once: must stay 1
	// hook, if set, runs inside every call (to block, fail, …).
	hook func(ctx context.Context, c call) (bool, error)
}

func newFakeSyncer() *fakeSyncer { return &fakeSyncer{inFlight: map[types.UID]int{}} }

func (f *fakeSyncer) record(ctx context.Context, c call) (bool, error) {
	f.mu.Lock()
	f.inFlight[c.UID]++
	f.maxSame = max(f.maxSame, f.inFlight[c.UID])
	hook := f.hook
	f.mu.Unlock()
	var terminal bool
	var err error
	if hook != nil {
		terminal, err = hook(ctx, c)
	}
	f.mu.Lock()
	f.inFlight[c.UID]--
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	return terminal, err
}

func (f *fakeSyncer) SyncPod(ctx context.Context, t kubetypes.SyncPodType, pod, _ *v1.Pod, s *kubecontainer.PodStatus) (bool, error) {
	return f.record(ctx, call{Kind: "sync", UID: pod.UID, Version: pod.Labels["v"], UpdateType: t, Status: s})
}

func (f *fakeSyncer) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, s *kubecontainer.PodStatus, gp *int64, fn PodStatusFunc) error {
	var applied v1.PodStatus
	if fn != nil {
		fn(&applied)
	}
	_, err := f.record(ctx, call{Kind: "terminating", UID: pod.UID, Version: pod.Labels["v"], GracePeriod: *gp, Status: s, Applied: applied})
	return err
}

func (f *fakeSyncer) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, s *kubecontainer.PodStatus) error {
	_, err := f.record(ctx, call{Kind: "terminated", UID: pod.UID, Version: pod.Labels["v"], Status: s})
	return err
}

// callsOf returns "kind:version" for one pod's calls, in order.
func (f *fakeSyncer) callsOf(uid types.UID) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if c.UID == uid {
			out = append(out, c.Kind+":"+c.Version)
		}
	}
	return out
}

func (f *fakeSyncer) last(uid types.UID) call {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.calls) - 1; i >= 0; i-- {
		if f.calls[i].UID == uid {
			return f.calls[i]
		}
	}
	return call{}
}

// alwaysFresh is a pod cache that never makes a worker wait.
type alwaysFresh struct{}

func (alwaysFresh) GetNewerThanContext(_ context.Context, uid types.UID, _ time.Time) (*kubecontainer.PodStatus, error) {
	return &kubecontainer.PodStatus{ID: uid}, nil
}

func newPod(uid, version string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-" + uid, Namespace: "default", UID: types.UID(uid),
		Labels: map[string]string{"v": version}}}
}

func deleted(p *v1.Pod, grace int64) *v1.Pod {
	p = p.DeepCopy()
	now := metav1.Now()
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
	return p
}

type env struct {
	pw     *podWorkers
	syncer *fakeSyncer
	queue  WorkQueue
	clock  *clocktesting.FakeClock
}

func newEnv(cache PodCache) *env {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newFakeSyncer()
	q := NewBasicWorkQueue(clk)
	return &env{pw: New(s, q, cache, clk).(*podWorkers), syncer: s, queue: q, clock: clk}
}

func (e *env) update(p *v1.Pod, t kubetypes.SyncPodType) {
	e.pw.UpdatePod(context.Background(), UpdatePodOptions{UpdateType: t, Pod: p})
}

func eventually(t *testing.T, cond func() bool, msg string, args ...any) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, time.Millisecond, append([]any{msg}, args...)...)
}

func TestSerialPerPodInOrder(t *testing.T) {
	e := newEnv(alwaysFresh{})
	e.syncer.hook = func(context.Context, call) (bool, error) { time.Sleep(time.Millisecond); return false, nil }
	for i := range 20 {
		e.update(newPod("a", fmt.Sprint(i)), kubetypes.SyncPodUpdate)
		time.Sleep(200 * time.Microsecond)
	}
	eventually(t, func() bool { return e.syncer.last("a").Version == "19" }, "the last update is synced")
	calls := e.syncer.callsOf("a")
	prev := -1
	for _, c := range calls {
		var v int
		fmt.Sscanf(c, "sync:%d", &v)
		assert.Greater(t, v, prev, "updates are synced in order: %v", calls)
		prev = v
	}
	e.syncer.mu.Lock()
	assert.Equal(t, 1, e.syncer.maxSame, "never two syncs of one pod at once")
	e.syncer.mu.Unlock()
}

func TestParallelAcrossPods(t *testing.T) {
	e := newEnv(alwaysFresh{})
	const n = 10
	var inside sync.WaitGroup
	inside.Add(n)
	release := make(chan struct{})
	e.syncer.hook = func(context.Context, call) (bool, error) {
		inside.Done()
		<-release
		return false, nil
	}
	for i := range n {
		e.update(newPod(fmt.Sprint(i), "1"), kubetypes.SyncPodCreate)
	}
	done := make(chan struct{})
	go func() { inside.Wait(); close(done) }()
	select {
	case <-done: // all n syncs are running at the same time
	case <-time.After(5 * time.Second):
		t.Fatal("the pods did not sync in parallel")
	}
	close(release)
}

func TestPendingUpdatesCoalesce(t *testing.T) {
	e := newEnv(alwaysFresh{})
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	e.syncer.hook = func(_ context.Context, c call) (bool, error) {
		if c.Version == "1" {
			started <- struct{}{}
			<-release
		}
		return false, nil
	}
	e.update(newPod("a", "1"), kubetypes.SyncPodCreate)
	<-started
	for v := 2; v <= 5; v++ {
		e.update(newPod("a", fmt.Sprint(v)), kubetypes.SyncPodUpdate)
	}
	close(release)
	eventually(t, func() bool { return len(e.syncer.callsOf("a")) == 2 }, "two syncs")
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, []string{"sync:1", "sync:5"}, e.syncer.callsOf("a"), "2, 3 and 4 were replaced by 5")
}

func TestWaitsForNewerStatusInCache(t *testing.T) {
	cache := kubecontainer.NewCache()
	e := newEnv(cache)
	t0 := e.clock.Now()

	e.update(newPod("a", "1"), kubetypes.SyncPodCreate)
	time.Sleep(100 * time.Millisecond)
	assert.Empty(t, e.syncer.callsOf("a"), "no status in the cache yet: the worker waits")

	cache.Set("a", &kubecontainer.PodStatus{ID: "a", Name: "first"}, nil, t0)
	eventually(t, func() bool { return len(e.syncer.callsOf("a")) == 1 }, "a status unblocks the worker")
	assert.Equal(t, "first", e.syncer.last("a").Status.Name, "syncPod gets the cached status")

	// The sync happened at t0 (fake clock): the next one needs a status newer than t0.
	e.update(newPod("a", "2"), kubetypes.SyncPodUpdate)
	cache.Set("a", &kubecontainer.PodStatus{ID: "a", Name: "same time"}, nil, t0)
	time.Sleep(100 * time.Millisecond)
	assert.Len(t, e.syncer.callsOf("a"), 1, "a status from the last sync's time is not newer")

	cache.Set("a", &kubecontainer.PodStatus{ID: "a", Name: "second"}, nil, t0.Add(time.Second))
	eventually(t, func() bool { return len(e.syncer.callsOf("a")) == 2 }, "a newer status unblocks it")
	assert.Equal(t, "second", e.syncer.last("a").Status.Name)

	// A relist of everything (UpdateTime) unblocks as well. Move the clock
	// so that the next sync's time is after every cached status, once the
	// worker is done with the sync (it notes the sync's time after
	// SyncPod returns: a step before would make that time t0+1m).
	eventually(t, func() bool {
		e.pw.podLock.Lock()
		defer e.pw.podLock.Unlock()
		return !e.pw.podSyncStatuses["a"].working
	}, "the worker is idle")
	e.clock.Step(time.Minute)
	e.update(newPod("a", "3"), kubetypes.SyncPodUpdate)
	eventually(t, func() bool { return len(e.syncer.callsOf("a")) == 3 }, "the status at t0+1s is newer than the last sync (t0)")
	e.update(newPod("a", "4"), kubetypes.SyncPodUpdate)
	time.Sleep(100 * time.Millisecond)
	assert.Len(t, e.syncer.callsOf("a"), 3, "nothing newer than t0+1m yet")
	cache.UpdateTime(e.clock.Now().Add(time.Second))
	eventually(t, func() bool { return len(e.syncer.callsOf("a")) == 4 }, "UpdateTime unblocks it")
}

func TestDeletionRunsTerminationPath(t *testing.T) {
	e := newEnv(alwaysFresh{})
	p := newPod("a", "1")
	e.update(p, kubetypes.SyncPodCreate)
	eventually(t, func() bool { return len(e.syncer.callsOf("a")) == 1 }, "synced")

	e.update(deleted(newPod("a", "2"), 20), kubetypes.SyncPodUpdate)
	eventually(t, func() bool { return e.pw.IsPodKnownTerminated("a") && len(e.syncer.callsOf("a")) == 3 }, "terminated")
	assert.Equal(t, []string{"sync:1", "terminating:2", "terminated:2"}, e.syncer.callsOf("a"))
	assert.True(t, e.pw.IsPodTerminationRequested("a"))
	eventually(t, func() bool {
		e.pw.podLock.Lock()
		defer e.pw.podLock.Unlock()
		_, running := e.pw.podUpdates["a"]
		return !running && e.pw.podSyncStatuses["a"].finished
	}, "the worker has exited")

	e.update(newPod("a", "3"), kubetypes.SyncPodUpdate)
	time.Sleep(50 * time.Millisecond)
	assert.Len(t, e.syncer.callsOf("a"), 3, "a finished pod does not start again")
}

func TestGracePeriod(t *testing.T) {
	e := newEnv(alwaysFresh{})
	release, started := make(chan struct{}), make(chan struct{})
	e.syncer.hook = func(_ context.Context, c call) (bool, error) {
		if c.Kind == "sync" {
			close(started)
			<-release
		}
		return false, nil
	}
	e.update(newPod("a", "1"), kubetypes.SyncPodCreate)
	<-started
	e.update(deleted(newPod("a", "2"), 20), kubetypes.SyncPodUpdate)
	e.update(deleted(newPod("a", "3"), 45), kubetypes.SyncPodUpdate) // a longer one does not count
	close(release)
	eventually(t, func() bool { return len(e.syncer.callsOf("a")) == 3 }, "terminated")
	assert.Equal(t, []string{"sync:1", "terminating:3", "terminated:3"}, e.syncer.callsOf("a"))
	for _, c := range e.syncer.calls {
		if c.Kind == "terminating" {
			assert.Equal(t, int64(20), c.GracePeriod, "the grace period only shrinks")
		}
	}

	e2 := newEnv(alwaysFresh{})
	e2.update(newPod("b", "1"), kubetypes.SyncPodKill)
	eventually(t, func() bool { return len(e2.syncer.callsOf("b")) == 2 }, "killed")
	assert.Equal(t, []string{"terminating:1", "terminated:1"}, e2.syncer.callsOf("b"), "a kill before any sync goes straight to termination")
	assert.Equal(t, int64(defaultGracePeriod), e2.syncer.calls[0].GracePeriod)
}

func TestDeletionCancelsRunningSync(t *testing.T) {
	e := newEnv(alwaysFresh{})
	e.syncer.hook = func(ctx context.Context, c call) (bool, error) {
		if c.Kind == "sync" {
			<-ctx.Done() // a long sync, e.g. pulling an image
			return false, ctx.Err()
		}
		return false, nil
	}
	e.update(newPod("a", "1"), kubetypes.SyncPodCreate)
	time.Sleep(20 * time.Millisecond)
	e.update(deleted(newPod("a", "2"), 1), kubetypes.SyncPodUpdate)
	eventually(t, func() bool { return len(e.syncer.callsOf("a")) == 3 }, "the cancelled sync gives way to termination")
	assert.Equal(t, []string{"sync:1", "terminating:2", "terminated:2"}, e.syncer.callsOf("a"))
}

func TestTerminalPodTerminates(t *testing.T) {
	e := newEnv(alwaysFresh{})
	e.syncer.hook = func(_ context.Context, c call) (bool, error) { return c.Kind == "sync", nil }
	e.update(newPod("a", "1"), kubetypes.SyncPodCreate)
	eventually(t, func() bool { return len(e.syncer.callsOf("a")) == 3 }, "terminated")
	assert.Equal(t, []string{"sync:1", "terminating:1", "terminated:1"}, e.syncer.callsOf("a"))
}

func TestResyncAndBackoff(t *testing.T) {
	e := newEnv(alwaysFresh{})
	fail := true
	e.syncer.hook = func(context.Context, call) (bool, error) {
		if fail {
			return false, errors.New("image pull failed")
		}
		return false, nil
	}
	e.update(newPod("a", "1"), kubetypes.SyncPodCreate)
	eventually(t, func() bool { return len(e.syncer.callsOf("a")) == 1 }, "synced")
	eventually(t, func() bool {
		e.pw.podLock.Lock()
		defer e.pw.podLock.Unlock()
		return !e.pw.podSyncStatuses["a"].working
	}, "work completed")

	// After an error: due after 10 s to 15 s (backoff with jitter).
	e.clock.Step(10*time.Second - time.Millisecond)
	assert.Empty(t, e.queue.GetWork(), "not before 10 s")
	e.clock.Step(5*time.Second + time.Millisecond)
	assert.Equal(t, []types.UID{"a"}, e.queue.GetWork(), "by 15 s")

	// After success: due after the resync interval, 1 min to 1.5 min.
	fail = false
	e.update(newPod("a", "2"), kubetypes.SyncPodSync)
	eventually(t, func() bool { return len(e.syncer.callsOf("a")) == 2 }, "synced")
	eventually(t, func() bool {
		e.pw.podLock.Lock()
		defer e.pw.podLock.Unlock()
		return !e.pw.podSyncStatuses["a"].working
	}, "work completed")
	e.clock.Step(time.Minute - time.Millisecond)
	assert.Empty(t, e.queue.GetWork())
	e.clock.Step(30*time.Second + time.Millisecond)
	assert.Equal(t, []types.UID{"a"}, e.queue.GetWork())
}

// requeueAfterError runs one failing sync of a fresh pod with err and
// returns its environment, the work completed.
func requeueAfterError(t *testing.T, err func(now time.Time) error) *env {
	t.Helper()
	e := newEnv(alwaysFresh{})
	e.syncer.hook = func(context.Context, call) (bool, error) { return false, err(e.clock.Now()) }
	e.update(newPod("a", "1"), kubetypes.SyncPodCreate)
	eventually(t, func() bool { return len(e.syncer.callsOf("a")) == 1 }, "synced")
	eventually(t, func() bool {
		e.pw.podLock.Lock()
		defer e.pw.podLock.Unlock()
		return !e.pw.podSyncStatuses["a"].working
	}, "work completed")
	return e
}

func TestACrashLoopBackOffIsRetriedWhenItEnds(t *testing.T) {
	// The sync's error is joined with another and says the back-off ends
	// 40 s from now: due after 40 s to 60 s, not after backOffPeriod.
	e := requeueAfterError(t, func(now time.Time) error {
		return kubecontainer.PodSyncResult{SyncResults: []*kubecontainer.SyncResult{
			{Action: kubecontainer.StartContainer, Target: "app", Error: kubecontainer.NewBackoffError(kubecontainer.ErrCrashLoopBackOff, now.Add(40*time.Second))},
			{Action: kubecontainer.StartContainer, Target: "side", Error: kubecontainer.NewBackoffError(kubecontainer.ErrCrashLoopBackOff, now.Add(80*time.Second))},
		}}.Error()
	})
	e.clock.Step(40*time.Second - time.Millisecond)
	assert.Empty(t, e.queue.GetWork(), "not before the earliest back-off ends")
	e.clock.Step(20*time.Second + time.Millisecond)
	assert.Equal(t, []types.UID{"a"}, e.queue.GetWork(), "by its end plus half of it (jitter)")
}

func TestABackOffLongerThanTheResyncIntervalWaitsTheInterval(t *testing.T) {
	e := requeueAfterError(t, func(now time.Time) error {
		return kubecontainer.NewBackoffError(kubecontainer.ErrCrashLoopBackOff, now.Add(5*time.Minute))
	})
	e.clock.Step(90*time.Second + time.Millisecond)
	assert.Equal(t, []types.UID{"a"}, e.queue.GetWork(), "by the resync interval plus jitter")
}

func TestNetworkNotReadyIsRetriedAfterASecond(t *testing.T) {
	e := requeueAfterError(t, func(time.Time) error { return errors.New("network is not ready: NetworkReady=false") })
	e.clock.Step(time.Second - time.Millisecond)
	assert.Empty(t, e.queue.GetWork())
	e.clock.Step(500*time.Millisecond + time.Millisecond)
	assert.Equal(t, []types.UID{"a"}, e.queue.GetWork(), "by 1.5 s")
}

func TestSyncKnownPodsCleansUp(t *testing.T) {
	e := newEnv(alwaysFresh{})
	a, b := newPod("a", "1"), newPod("b", "1")
	e.update(a, kubetypes.SyncPodCreate)
	e.update(b, kubetypes.SyncPodCreate)
	eventually(t, func() bool { return len(e.syncer.callsOf("a")) == 1 && len(e.syncer.callsOf("b")) == 1 }, "synced")

	workers := e.pw.SyncKnownPods([]*v1.Pod{a})
	assert.Equal(t, PodWorkerSync{State: SyncPod}, workers["a"])
	assert.Equal(t, PodWorkerSync{State: TerminatingPod, Orphan: true}, workers["b"], "b is gone: terminate it")
	eventually(t, func() bool { return len(e.syncer.callsOf("b")) == 3 }, "b terminated")
	assert.Equal(t, []string{"sync:1", "terminating:1", "terminated:1"}, e.syncer.callsOf("b"))
	for _, c := range e.syncer.calls {
		if c.UID == "b" && c.Kind == "terminating" {
			assert.Equal(t, defaultGracePeriod, c.GracePeriod, "an orphan gets the pod's grace period")
		}
	}

	eventually(t, func() bool {
		e.pw.podLock.Lock()
		defer e.pw.podLock.Unlock()
		return e.pw.podSyncStatuses["b"].finished
	}, "b finished")
	workers = e.pw.SyncKnownPods([]*v1.Pod{a})
	assert.NotContains(t, workers, types.UID("b"), "a finished orphan is forgotten")
	e.pw.podLock.Lock()
	assert.Len(t, e.pw.podSyncStatuses, 1)
	assert.Len(t, e.pw.podUpdates, 1)
	e.pw.podLock.Unlock()
}

func TestNewWithIntervalsRefusesIntervalsThatAreNotPositive(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	for _, iv := range [][2]time.Duration{{0, time.Second}, {time.Minute, -time.Second}} {
		assert.Panics(t, func() {
			NewWithIntervals(newFakeSyncer(), NewBasicWorkQueue(clk), alwaysFresh{}, clk, iv[0], iv[1])
		}, "%v", iv)
	}
	assert.NotPanics(t, func() { New(newFakeSyncer(), NewBasicWorkQueue(clk), alwaysFresh{}, clk) })
}

func TestAGracePeriodThatShrinksWhileTerminatingCancelsAndRestartsTheTermination(t *testing.T) {
	e := newEnv(alwaysFresh{})
	stopped := make(chan struct{})
	defer close(stopped)
	var canceled []int64
	var mu sync.Mutex
	e.syncer.hook = func(ctx context.Context, c call) (bool, error) {
		if c.Kind != "terminating" || c.GracePeriod != 30 {
			return false, nil
		}
		select { // StopContainer of a container that ignores SIGTERM, for 30 s
		case <-ctx.Done():
			mu.Lock()
			canceled = append(canceled, c.GracePeriod)
			mu.Unlock()
			return false, ctx.Err()
		case <-stopped:
			return false, nil
		}
	}
	e.update(deleted(newPod("a", "1"), 30), kubetypes.SyncPodUpdate)
	eventually(t, func() bool {
		e.syncer.mu.Lock()
		defer e.syncer.mu.Unlock()
		return e.syncer.inFlight["a"] == 1
	}, "terminating with 30 s")

	// kubectl delete --grace-period=5 while the first termination runs.
	e.update(deleted(newPod("a", "2"), 5), kubetypes.SyncPodUpdate)
	eventually(t, func() bool { return len(e.syncer.callsOf("a")) == 3 }, "terminated")
	mu.Lock()
	assert.Equal(t, []int64{30}, canceled, "the 30 s termination was cancelled")
	mu.Unlock()
	var graces []int64
	for _, c := range e.syncer.calls {
		if c.Kind == "terminating" {
			graces = append(graces, c.GracePeriod)
		}
	}
	assert.Equal(t, []int64{30, 5}, graces, "terminated again with the shorter grace period")
	assert.Equal(t, []string{"terminating:1", "terminating:2", "terminated:2"}, e.syncer.callsOf("a"))
}

// neverFresh is a pod cache whose status never gets newer (a PLEG that
// has stopped): a worker waits in it until its ctx ends.
type neverFresh struct{ waiting chan struct{} }

func (n neverFresh) GetNewerThanContext(ctx context.Context, _ types.UID, _ time.Time) (*kubecontainer.PodStatus, error) {
	n.waiting <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestWaitReturnsOnceTheSyncsUnderWayHaveEnded: when the kubelet's ctx
// ends, a sync under way finishes (here: it sees its ctx end and returns)
// before Wait returns, and a worker waiting for a fresh status gives up
// instead of waiting forever.
func TestWaitReturnsOnceTheSyncsUnderWayHaveEnded(t *testing.T) {
	e := newEnv(alwaysFresh{})
	inSync := make(chan struct{})
	var ended sync.WaitGroup
	ended.Add(1)
	e.syncer.hook = func(ctx context.Context, c call) (bool, error) {
		close(inSync)
		<-ctx.Done()
		ended.Done()
		return false, ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.pw.UpdatePod(ctx, UpdatePodOptions{UpdateType: kubetypes.SyncPodCreate, Pod: newPod("a", "1")})
	<-inSync

	stuck := newEnv(neverFresh{waiting: make(chan struct{}, 1)})
	stuck.pw.UpdatePod(ctx, UpdatePodOptions{UpdateType: kubetypes.SyncPodCreate, Pod: newPod("b", "1")})
	<-stuck.pw.podCache.(neverFresh).waiting

	cancel()
	e.pw.Wait()
	stuck.pw.Wait()
	ended.Wait() // would not return if Wait had returned before the sync ended
	assert.Equal(t, []string{"sync:1"}, e.syncer.callsOf("a"), "the sync ran once and ended")
	assert.Empty(t, stuck.syncer.callsOf("b"), "no sync without a fresh status")

	// A later update with a live ctx starts the pod's worker again.
	e.syncer.hook = nil
	e.pw.UpdatePod(context.Background(), UpdatePodOptions{UpdateType: kubetypes.SyncPodUpdate, Pod: newPod("a", "2")})
	eventually(t, func() bool { return len(e.syncer.callsOf("a")) == 2 }, "a new worker syncs the pod")
	assert.Equal(t, []string{"sync:1", "sync:2"}, e.syncer.callsOf("a"))
}
