package kubelet

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/flowcontrol"
	testingclock "k8s.io/utils/clock/testing"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/nodestatus"
	"mykubelet/mylib/pleg"
	"mykubelet/mylib/podworkers"
)

// emptyRuntime is a container runtime with nothing in it.
type emptyRuntime struct{}

func (emptyRuntime) Type() string { return "fake" }
func (emptyRuntime) GetPods(context.Context, bool) ([]*kubecontainer.Pod, error) {
	return nil, nil
}
func (emptyRuntime) GetPodStatus(_ context.Context, p *kubecontainer.Pod) (*kubecontainer.PodStatus, error) {
	return &kubecontainer.PodStatus{ID: p.ID}, nil
}
func (emptyRuntime) GetPod(_ context.Context, uid types.UID) (*kubecontainer.Pod, error) {
	return &kubecontainer.Pod{ID: uid}, nil
}
func (emptyRuntime) SyncPod(context.Context, *v1.Pod, *kubecontainer.PodStatus, []v1.Secret, *flowcontrol.Backoff) kubecontainer.PodSyncResult {
	return kubecontainer.PodSyncResult{}
}
func (emptyRuntime) KillPod(context.Context, *v1.Pod, kubecontainer.Pod, *int64) error { return nil }

// fakePodWorkers records what the sync loop hands to the workers, and
// answers SyncKnownPods with the workers in alive.
type fakePodWorkers struct {
	mu      sync.Mutex
	updates []podworkers.UpdatePodOptions
	synced  int // SyncKnownPods calls
	alive   map[types.UID]podworkers.PodWorkerSync
	// terminating are the pods whose termination was requested.
	terminating map[types.UID]bool
}

func (f *fakePodWorkers) UpdatePod(_ context.Context, o podworkers.UpdatePodOptions) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updates = append(f.updates, o)
}

func (f *fakePodWorkers) Wait() {}

func (f *fakePodWorkers) SyncKnownPods([]*v1.Pod) map[types.UID]podworkers.PodWorkerSync {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced++
	return f.alive
}
func (f *fakePodWorkers) IsPodTerminationRequested(uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.terminating[uid]
}
func (f *fakePodWorkers) IsPodKnownTerminated(types.UID) bool { return false }

// dispatched is "<type> <name>" for each update handed to the workers.
func (f *fakePodWorkers) dispatched() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, u := range f.updates {
		out = append(out, u.UpdateType.String()+" "+u.Pod.Name)
	}
	return out
}

type podFixture struct {
	cs      *fake.Clientset
	clock   *testingclock.FakeClock
	kl      *Kubelet
	workers *fakePodWorkers
	out     *bytes.Buffer
	ready   bool
}

func newPodFixture(t *testing.T, objects ...runtime.Object) *podFixture {
	t.Helper()
	f := &podFixture{cs: fake.NewClientset(objects...), clock: testingclock.NewFakeClock(t0),
		workers: &fakePodWorkers{}, out: &bytes.Buffer{}, ready: true}
	// The fake tracker ignores preconditions; the API server answers a
	// delete whose UID precondition does not match with 409 Conflict.
	f.cs.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteActionImpl)
		if d.DeleteOptions.Preconditions == nil || d.DeleteOptions.Preconditions.UID == nil {
			return false, nil, nil
		}
		obj, err := f.cs.Tracker().Get(v1.SchemeGroupVersion.WithResource("pods"), d.Namespace, d.Name)
		if err != nil {
			return false, nil, nil
		}
		if uid := obj.(*v1.Pod).UID; uid != *d.DeleteOptions.Preconditions.UID {
			return true, nil, apierrors.NewConflict(v1.Resource("pods"), d.Name, fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *d.DeleteOptions.Preconditions.UID, uid))
		}
		return false, nil, nil
	})
	kl, err := New(Config{Client: f.cs, NodeName: "n1", Clock: f.clock, Pods: &PodsConfig{
		Updates:      make(chan kubetypes.PodUpdate),
		SourcesReady: func() bool { return f.ready },
		Runtime:      emptyRuntime{},
		Out:          f.out,
	}})
	require.NoError(t, err)
	kl.podWorkers = f.workers
	f.kl = kl
	return f
}

func apiPod(name, uid string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(uid),
		Annotations: map[string]string{kubetypes.ConfigSourceAnnotationKey: kubetypes.ApiserverSource}},
		Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c"}}}}
}

func staticPod(name, uid string) *v1.Pod {
	p := apiPod(name, uid)
	p.Annotations = map[string]string{kubetypes.ConfigSourceAnnotationKey: kubetypes.FileSource, kubetypes.ConfigHashAnnotationKey: uid}
	return p
}

func mirrorPodOf(static *v1.Pod, uid string) *v1.Pod {
	p := apiPod(static.Name, uid)
	p.Annotations[kubetypes.ConfigMirrorAnnotationKey] = static.Annotations[kubetypes.ConfigHashAnnotationKey]
	return p
}

// iterate runs one syncLoopIteration with exactly one of its inputs ready.
func (f *podFixture) iterate(ctx context.Context, u *kubetypes.PodUpdate, e *pleg.PodLifecycleEvent, syncTick, housekeeping bool) bool {
	configCh := make(chan kubetypes.PodUpdate, 1)
	plegCh := make(chan *pleg.PodLifecycleEvent, 1)
	syncCh, hkCh := make(chan time.Time, 1), make(chan time.Time, 1)
	switch {
	case u != nil:
		configCh <- *u
	case e != nil:
		plegCh <- e
	case syncTick:
		syncCh <- t0
	case housekeeping:
		hkCh <- t0
	}
	return f.kl.syncLoopIteration(ctx, configCh, plegCh, syncCh, hkCh)
}

func TestSyncLoopIterationStopsWhenContextEnds(t *testing.T) {
	f := newPodFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.False(t, f.iterate(ctx, nil, nil, false, false))
	assert.Empty(t, f.workers.dispatched())
}

func TestSyncLoopIterationConfigBranch(t *testing.T) {
	f := newPodFixture(t)
	ctx := context.Background()
	a, s := apiPod("a", "uid-a"), staticPod("s", "uid-s")
	m := mirrorPodOf(s, "uid-m")

	require.True(t, f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{a}}, nil, false, false))
	got, ok := f.kl.podManager.GetPodByUID("uid-a")
	require.True(t, ok, "ADD puts the pod in the pod manager")
	assert.Same(t, a, got)
	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.FileSource, Pods: []*v1.Pod{s}}, nil, false, false)
	// A mirror pod is not given a worker of its own: its static pod is synced.
	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{m}}, nil, false, false)
	// RECONCILE is a status-only change: stored, nothing to run.
	a2 := a.DeepCopy()
	a2.Status.Phase = v1.PodRunning
	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.RECONCILE, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{a2}}, nil, false, false)
	got, _ = f.kl.podManager.GetPodByUID("uid-a")
	assert.Equal(t, v1.PodRunning, got.Status.Phase)
	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.UPDATE, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{a2}}, nil, false, false)
	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.REMOVE, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{a2}}, nil, false, false)
	_, ok = f.kl.podManager.GetPodByUID("uid-a")
	assert.False(t, ok, "REMOVE takes the pod out of the pod manager")

	assert.Equal(t, []string{"create a", "create s", "update s", "update a", "kill a"}, f.workers.dispatched())
	// The mirror pod went to its static pod's worker along with the mirror.
	assert.Same(t, m, f.workers.updates[2].MirrorPod)
	assert.Contains(t, f.out.String(), "SyncLoop ADD source=api pods=[default/a]\n")
}

func TestSyncLoopIterationPLEGBranch(t *testing.T) {
	f := newPodFixture(t)
	ctx := context.Background()
	f.kl.podManager.AddPod(apiPod("a", "uid-a"))
	f.iterate(ctx, nil, &pleg.PodLifecycleEvent{ID: "uid-a", Type: pleg.ContainerDied}, false, false)
	f.iterate(ctx, nil, &pleg.PodLifecycleEvent{ID: "uid-unknown", Type: pleg.ContainerStarted}, false, false)
	assert.Equal(t, []string{"sync a"}, f.workers.dispatched(), "an event for a pod the kubelet does not know is dropped")
}

func TestSyncLoopIterationSyncBranchTakesDueWork(t *testing.T) {
	f := newPodFixture(t)
	ctx := context.Background()
	f.kl.podManager.AddPod(apiPod("a", "uid-a"))
	f.kl.podManager.AddPod(apiPod("b", "uid-b"))
	f.kl.workQueue.Enqueue("uid-a", time.Second)
	f.kl.workQueue.Enqueue("uid-b", time.Minute)
	f.kl.workQueue.Enqueue("uid-gone", 0)
	f.clock.Step(time.Second)
	f.iterate(ctx, nil, nil, true, false)
	assert.Equal(t, []string{"sync a"}, f.workers.dispatched(), "only due work, and only for known pods")
}

func TestSyncLoopIterationHousekeepingWaitsForSources(t *testing.T) {
	f := newPodFixture(t)
	ctx := context.Background()
	f.ready = false
	f.iterate(ctx, nil, nil, false, true)
	assert.Equal(t, 0, f.workers.synced, "no cleanup before every source has sent its pods")
	f.ready = true
	f.iterate(ctx, nil, nil, false, true)
	assert.Equal(t, 1, f.workers.synced)
}

func TestHandlePodCleanupsReportsWorkersThatWent(t *testing.T) {
	f := newPodFixture(t)
	ctx := context.Background()
	a := apiPod("a", "uid-a")
	f.kl.podManager.AddPod(a)
	f.workers.alive = map[types.UID]podworkers.PodWorkerSync{"uid-a": {State: podworkers.SyncPod}}
	f.kl.HandlePodCleanups(ctx)
	assert.NotContains(t, f.out.String(), "cleaned up")
	f.kl.podManager.RemovePod(a)
	f.workers.alive = map[types.UID]podworkers.PodWorkerSync{}
	f.kl.HandlePodCleanups(ctx)
	f.kl.HandlePodCleanups(ctx)
	assert.Equal(t, 1, strings.Count(f.out.String(), "pod worker default/a (uid uid-a) cleaned up\n"), "reported once")
}

func TestHandlePodCleanupsDeletesOrphanedMirrorPods(t *testing.T) {
	kept, gone := staticPod("kept", "uid-kept"), staticPod("gone", "uid-gone")
	keptMirror, orphan := mirrorPodOf(kept, "uid-km"), mirrorPodOf(gone, "uid-orphan")
	f := newPodFixture(t, keptMirror, orphan)
	f.kl.podManager.AddPod(kept)
	f.kl.podManager.AddPod(keptMirror)
	f.kl.podManager.AddPod(orphan)
	f.kl.HandlePodCleanups(context.Background())

	var deleted []string
	for _, a := range f.cs.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok {
			deleted = append(deleted, d.GetName())
			assert.Equal(t, int64(0), *d.GetDeleteOptions().GracePeriodSeconds)
		}
	}
	assert.Equal(t, []string{"gone"}, deleted, "only the mirror pod without a static pod")
	assert.Contains(t, f.out.String(), "mirror pod default/gone deleted (its manifest is gone)\n")
}

// deletes returns the pod deletes the fake clientset saw.
func deletes(cs *fake.Clientset) []k8stesting.DeleteActionImpl {
	var out []k8stesting.DeleteActionImpl
	for _, a := range cs.Actions() {
		if d, ok := a.(k8stesting.DeleteActionImpl); ok && a.GetResource().Resource == "pods" {
			out = append(out, d)
		}
	}
	return out
}

func TestSyncTerminatedPodFinishesTheDeletionOfThisUIDOnly(t *testing.T) {
	pod := apiPod("a", "uid-a")
	now := metav1.NewTime(t0)
	pod.DeletionTimestamp = &now
	f := newPodFixture(t, pod.DeepCopy())
	require.NoError(t, f.kl.SyncTerminatedPod(context.Background(), pod, nil))
	d := deletes(f.cs)
	require.Len(t, d, 1)
	assert.Equal(t, "a", d[0].Name)
	assert.Equal(t, int64(0), *d[0].DeleteOptions.GracePeriodSeconds)
	require.NotNil(t, d[0].DeleteOptions.Preconditions)
	assert.Equal(t, types.UID("uid-a"), *d[0].DeleteOptions.Preconditions.UID)
}

func TestSyncTerminatedPodLeavesAReplacementAlone(t *testing.T) {
	pod := apiPod("a", "uid-old")
	now := metav1.NewTime(t0)
	pod.DeletionTimestamp = &now
	f := newPodFixture(t, apiPod("a", "uid-new")) // recreated under the same name
	require.NoError(t, f.kl.SyncTerminatedPod(context.Background(), pod, nil), "a conflict means done")
	_, err := f.cs.CoreV1().Pods("default").Get(context.Background(), "a", metav1.GetOptions{})
	assert.NoError(t, err, "the new pod is still there")
}

func TestSyncTerminatedPodDeletesNothingElse(t *testing.T) {
	now := metav1.NewTime(t0)
	static := staticPod("s", "uid-s")
	static.DeletionTimestamp = &now
	for name, pod := range map[string]*v1.Pod{"not being deleted": apiPod("a", "uid-a"), "static": static} {
		f := newPodFixture(t, pod.DeepCopy())
		require.NoError(t, f.kl.SyncTerminatedPod(context.Background(), pod, nil))
		assert.Empty(t, deletes(f.cs), name)
	}
}

func TestRunPodsRunsUntilCancelled(t *testing.T) {
	f := newPodFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.kl.Run(ctx) }()
	require.Eventually(t, f.clock.HasWaiters, 5*time.Second, time.Millisecond)
	cancel()
	assert.NoError(t, <-done)
}

func TestWithoutWorkersHousekeepingKeepsTheMirrorPods(t *testing.T) {
	web, gone := staticPod("web", "uid-web"), staticPod("gone", "uid-gone")
	orphan := mirrorPodOf(gone, "uid-orphan")
	cs := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}}, orphan)
	out := &bytes.Buffer{}
	updates := make(chan kubetypes.PodUpdate, 1)
	kl, err := New(Config{Client: cs, NodeName: "n1", Clock: testingclock.NewFakeClock(t0), Pods: &PodsConfig{
		Updates: updates, WithoutWorkers: true, Out: out}})
	require.NoError(t, err)
	assert.Nil(t, kl.PLEG(), "no PLEG without workers")
	ctx := context.Background()
	updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.FileSource, Pods: []*v1.Pod{web}}
	require.True(t, kl.syncLoopIteration(ctx, updates, nil, nil, nil))
	updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{orphan}}
	require.True(t, kl.syncLoopIteration(ctx, updates, nil, nil, nil))
	kl.HandlePodCleanups(ctx)

	_, err = cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	assert.NoError(t, err, "the static pod got its mirror pod")
	_, err = cs.CoreV1().Pods("default").Get(ctx, "gone", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the orphan is deleted: %v", err)
	assert.Equal(t, "SyncLoop ADD source=file pods=[default/web]\nSyncLoop ADD source=api pods=[default/gone]\n"+
		"mirror pod default/web created\nmirror pod default/gone deleted (its manifest is gone)\n", out.String())
}

func TestNewWithoutWorkersTakesNoRuntime(t *testing.T) {
	_, err := New(Config{Client: fake.NewClientset(), NodeName: "n1", Pods: &PodsConfig{
		Updates: make(chan kubetypes.PodUpdate), WithoutWorkers: true, Runtime: emptyRuntime{}}})
	assert.ErrorContains(t, err, "not used WithoutWorkers")
}

func TestRunStopsThePodHalfWhenTheNodeCannotRegister(t *testing.T) {
	cs := fake.NewClientset()
	forbidden := apierrors.NewForbidden(v1.Resource("nodes"), "n1", fmt.Errorf("not this node"))
	cs.PrependReactor("*", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, forbidden })
	kl, err := New(Config{Client: cs, NodeName: "n1", Clock: testingclock.NewFakeClock(t0),
		Node: &NodeConfig{Setters: []nodestatus.Setter{nodestatus.GoRuntime()}},
		Pods: &PodsConfig{Updates: make(chan kubetypes.PodUpdate), Runtime: emptyRuntime{}}})
	require.NoError(t, err)
	done := make(chan error)
	go func() { done <- kl.Run(context.Background()) }()
	select {
	case err := <-done:
		assert.True(t, apierrors.IsForbidden(err), "the registration error is returned: %v", err)
	case <-time.After(time.Minute): // a guard against a hang, not a timing goal
		t.Fatal("Run did not return after the node half failed")
	}
}
