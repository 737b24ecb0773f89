package status

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"mykubelet/mylib/kubetypes"
	kubepod "mykubelet/mylib/pod"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	m      *manager
	client *fake.Clientset
	pm     kubepod.Manager
	clk    *clocktesting.FakeClock
}

func newFixture(t *testing.T, pods ...*v1.Pod) *fixture {
	t.Helper()
	objs := make([]runtime.Object, 0, len(pods))
	for _, p := range pods {
		objs = append(objs, p.DeepCopy())
	}
	f := &fixture{client: fake.NewClientset(objs...), pm: kubepod.NewBasicPodManager(), clk: clocktesting.NewFakeClock(t0)}
	f.client.PrependReactor("patch", "pods", refuseAnotherUID(f.client))
	for _, p := range pods {
		f.pm.AddPod(p)
	}
	m, err := newManager(Config{Client: f.client, PodManager: f.pm, Clock: f.clk})
	require.NoError(t, err)
	f.m = m
	return f
}

// refuseAnotherUID makes the fake refuse a patch whose metadata.uid is not
// the stored pod's, as the API server does (422: the UID is immutable); the
// fake clientset would otherwise write the old UID over the new pod.
func refuseAnotherUID(c *fake.Clientset) core.ReactionFunc {
	return func(a core.Action) (bool, runtime.Object, error) {
		pa := a.(core.PatchAction)
		var patch struct {
			Metadata struct {
				UID types.UID `json:"uid"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(pa.GetPatch(), &patch); err != nil || patch.Metadata.UID == "" {
			return false, nil, nil
		}
		obj, err := c.Tracker().Get(v1.SchemeGroupVersion.WithResource("pods"), pa.GetNamespace(), pa.GetName())
		if err != nil {
			return false, nil, nil // the default reactor answers 404
		}
		if stored := obj.(*v1.Pod).UID; stored != patch.Metadata.UID {
			return true, nil, apierrors.NewInvalid(v1.SchemeGroupVersion.WithKind("Pod").GroupKind(), pa.GetName(),
				field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), patch.Metadata.UID, "field is immutable")})
		}
		return false, nil, nil
	}
}

// reads are the get actions sent so far.
func (f *fixture) reads() int {
	n := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "get" {
			n++
		}
	}
	return n
}

// writes are the create/update/patch/delete actions sent so far; reads are not counted.
func (f *fixture) writes() []core.Action {
	var out []core.Action
	for _, a := range f.client.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
		default:
			out = append(out, a)
		}
	}
	return out
}

func (f *fixture) apiPod(t *testing.T, namespace, name string) *v1.Pod {
	t.Helper()
	p, err := f.client.Tracker().Get(v1.SchemeGroupVersion.WithResource("pods"), namespace, name)
	require.NoError(t, err)
	return p.(*v1.Pod)
}

func newPod(name string, uid types.UID) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: uid},
		Spec:       v1.PodSpec{NodeName: "node-a", RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
		Status:     v1.PodStatus{Phase: v1.PodPending},
	}
}

func runningStatus(ready bool) v1.PodStatus {
	cond := v1.ConditionFalse
	if ready {
		cond = v1.ConditionTrue
	}
	return v1.PodStatus{
		Phase:      v1.PodRunning,
		Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: cond}, {Type: v1.ContainersReady, Status: cond}},
		PodIP:      "10.88.0.2",
		ContainerStatuses: []v1.ContainerStatus{{Name: "c", Ready: ready, Image: "busybox:latest",
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}}},
	}
}

func TestSetPodStatusVersionsOnlyChanges(t *testing.T) {
	pod := newPod("p", "uid-1")
	f := newFixture(t, pod)
	f.m.SetPodStatus(pod, runningStatus(false))
	assert.EqualValues(t, 1, f.m.podStatuses["uid-1"].version)
	f.clk.Step(time.Second)
	f.m.SetPodStatus(pod, runningStatus(false))
	assert.EqualValues(t, 1, f.m.podStatuses["uid-1"].version, "same status: same version")
	f.m.SetPodStatus(pod, runningStatus(true))
	assert.EqualValues(t, 2, f.m.podStatuses["uid-1"].version)

	st, ok := f.m.GetPodStatus("uid-1")
	require.True(t, ok)
	assert.Equal(t, metav1.NewTime(t0), *st.StartTime, "the start time is the first status's")
	for _, c := range st.Conditions {
		assert.Equal(t, metav1.NewTime(t0.Add(time.Second)), c.LastTransitionTime, "%s changed at t0+1s", c.Type)
	}
	f.clk.Step(time.Second)
	f.m.SetPodStatus(pod, func() v1.PodStatus { s := runningStatus(true); s.PodIP = "10.88.0.3"; return s }())
	st, _ = f.m.GetPodStatus("uid-1")
	for _, c := range st.Conditions {
		assert.Equal(t, metav1.NewTime(t0.Add(time.Second)), c.LastTransitionTime, "%s did not change: time kept", c.Type)
	}
}

// TestANewStatusSharesNothingWithTheCachedOne: the start time is carried
// over from the cached status, but as a new pointer; normalizing the new
// status wrote through the shared one while a status writer was encoding
// the cached status (a data race the race detector found in CI).
func TestANewStatusSharesNothingWithTheCachedOne(t *testing.T) {
	pod := newPod("p", "uid-1")
	f := newFixture(t, pod)
	f.m.SetPodStatus(pod, runningStatus(false))
	first, _ := f.m.GetPodStatus("uid-1")
	f.clk.Step(time.Second)
	f.m.SetPodStatus(pod, runningStatus(true))
	second, _ := f.m.GetPodStatus("uid-1")
	require.NotNil(t, first.StartTime)
	require.NotNil(t, second.StartTime)
	assert.Equal(t, *first.StartTime, *second.StartTime, "the start time never changes")
	assert.NotSame(t, first.StartTime, second.StartTime, "but it is a copy")
}

func TestSyncWritesOncePerChangeAndNothingWhenUnchanged(t *testing.T) {
	ctx := context.Background()
	pod := newPod("p", "uid-1")
	f := newFixture(t, pod)

	f.m.SetPodStatus(pod, runningStatus(false))
	assert.Equal(t, 1, f.m.syncBatch(ctx, false))
	require.Len(t, f.writes(), 1)
	patch := f.writes()[0].(core.PatchAction)
	assert.Equal(t, "status", patch.GetSubresource())
	assert.Equal(t, types.StrategicMergePatchType, patch.GetPatchType())
	assert.Equal(t, v1.PodRunning, f.apiPod(t, "default", "p").Status.Phase)

	// Nothing new: no write, not even on the full sync.
	f.m.SetPodStatus(pod, runningStatus(false))
	assert.Equal(t, 0, f.m.syncBatch(ctx, false))
	f.pm.UpdatePod(f.apiPod(t, "default", "p")) // the watch brings the written status back
	assert.Equal(t, 0, f.m.syncBatch(ctx, true))
	assert.Len(t, f.writes(), 1)

	// One change, one write.
	f.m.SetPodStatus(pod, runningStatus(true))
	f.m.syncBatch(ctx, false)
	assert.Len(t, f.writes(), 2)
	assert.True(t, f.apiPod(t, "default", "p").Status.ContainerStatuses[0].Ready)
}

func TestSyncBatchSendsEveryChangedPodAndReconcilesOnTheFullSync(t *testing.T) {
	ctx := context.Background()
	a, b, c := newPod("a", "uid-a"), newPod("b", "uid-b"), newPod("c", "uid-c")
	f := newFixture(t, a, b, c)
	for _, p := range []*v1.Pod{a, b, c} {
		f.m.SetPodStatus(p, runningStatus(true))
	}
	assert.Equal(t, 3, f.m.syncBatch(ctx, false), "three changes, one batch")
	assert.Len(t, f.writes(), 3)

	// Someone else overwrites b's status in the API: the periodic full sync
	// (and only it) puts it back.
	apiB := f.apiPod(t, "default", "b")
	apiB.Status.Phase = v1.PodPending
	require.NoError(t, f.client.Tracker().Update(v1.SchemeGroupVersion.WithResource("pods"), apiB, "default"))
	f.pm.UpdatePod(apiB)
	f.pm.UpdatePod(f.apiPod(t, "default", "a"))
	f.pm.UpdatePod(f.apiPod(t, "default", "c"))
	assert.Equal(t, 0, f.m.syncBatch(ctx, false))
	assert.Equal(t, 1, f.m.syncBatch(ctx, true))
	assert.Len(t, f.writes(), 4)
	assert.Equal(t, v1.PodRunning, f.apiPod(t, "default", "b").Status.Phase)
}

func TestRunSendsAChangeAtOnceAndEverythingEverySyncPeriod(t *testing.T) {
	pod := newPod("p", "uid-1")
	f := newFixture(t, pod)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	f.m.SetPodStatus(pod, runningStatus(true))
	require.Eventually(t, func() bool { return len(f.writes()) == 1 }, 10*time.Second, time.Millisecond, "the poke sends it without the clock moving")

	// Someone else overwrites it: fixed on the next period, not before.
	apiPod := f.apiPod(t, "default", "p")
	apiPod.Status.Phase = v1.PodPending
	require.NoError(t, f.client.Tracker().Update(v1.SchemeGroupVersion.WithResource("pods"), apiPod, "default"))
	f.pm.UpdatePod(apiPod)
	require.Eventually(t, f.clk.HasWaiters, 10*time.Second, time.Millisecond)
	f.clk.Step(SyncPeriod - time.Second)
	assert.Len(t, f.writes(), 1, "no write before the period") // (tracker updates are not actions)
	f.clk.Step(time.Second)
	require.Eventually(t, func() bool { return len(f.writes()) == 2 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, v1.PodRunning, f.apiPod(t, "default", "p").Status.Phase)
}

func TestPatchCarriesThePodUIDAsPrecondition(t *testing.T) {
	pod := newPod("p", "uid-1")
	f := newFixture(t, pod)
	f.m.SetPodStatus(pod, runningStatus(true))
	f.m.syncBatch(context.Background(), false)
	require.Len(t, f.writes(), 1)
	var patch struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal(f.writes()[0].(core.PatchAction).GetPatch(), &patch))
	assert.Equal(t, "uid-1", patch.Metadata.UID)
}

func TestARecreatedPodIsNotOverwritten(t *testing.T) {
	old := newPod("p", "uid-old")
	f := newFixture(t, old)
	f.m.SetPodStatus(old, runningStatus(true))

	// The pod is deleted and created again under the same name before the
	// status is written.
	recreated := newPod("p", "uid-new")
	require.NoError(t, f.client.Tracker().Delete(v1.SchemeGroupVersion.WithResource("pods"), "default", "p"))
	require.NoError(t, f.client.Tracker().Add(recreated))
	f.client.ClearActions()

	f.m.syncBatch(context.Background(), false)
	// Our patch, made against the watched pod, carries the old UID: the
	// API server refuses it, and the pod is read.
	require.Len(t, f.writes(), 1, "one patch tried, and refused")
	assert.Contains(t, string(f.writes()[0].(core.PatchAction).GetPatch()), `"uid":"uid-old"`)
	assert.Equal(t, 1, f.reads())
	assert.Equal(t, v1.PodPending, f.apiPod(t, "default", "p").Status.Phase, "the new pod is untouched")
	_, ok := f.m.GetPodStatus("uid-old")
	assert.False(t, ok, "the old pod's status is dropped")
}

func TestPatchesReadNothing(t *testing.T) {
	ctx := context.Background()
	pod := newPod("p", "uid-1")
	f := newFixture(t, pod)
	f.m.SetPodStatus(pod, runningStatus(false))
	f.m.syncBatch(ctx, false)
	f.m.SetPodStatus(pod, runningStatus(true))
	f.m.syncBatch(ctx, false)
	assert.Len(t, f.writes(), 2, "two changes, two patches")
	assert.Equal(t, 0, f.reads(), "the first patch is made against the watched pod, the second against the first one's answer: no GET")
	cs := f.apiPod(t, "default", "p").Status.ContainerStatuses
	require.Len(t, cs, 1)
	assert.True(t, cs[0].Ready, "and it is right")
}

func TestARecreatedPodIsNotOverwrittenAfterAWrite(t *testing.T) {
	ctx := context.Background()
	old := newPod("p", "uid-old")
	f := newFixture(t, old)
	f.m.SetPodStatus(old, runningStatus(false))
	f.m.syncBatch(ctx, false)
	require.Len(t, f.writes(), 1)

	// Deleted and created again under the same name; our next patch,
	// made against our copy, carries the old UID.
	require.NoError(t, f.client.Tracker().Delete(v1.SchemeGroupVersion.WithResource("pods"), "default", "p"))
	require.NoError(t, f.client.Tracker().Add(newPod("p", "uid-new")))
	f.client.ClearActions()
	f.m.SetPodStatus(old, runningStatus(true))
	f.m.syncBatch(ctx, false)

	assert.Equal(t, v1.PodPending, f.apiPod(t, "default", "p").Status.Phase, "the new pod is untouched")
	assert.Equal(t, 1, f.reads(), "the refused patch sent us to read the API")
	_, ok := f.m.GetPodStatus("uid-old")
	assert.False(t, ok, "the old pod's status is dropped")
}

func deletingPod() *v1.Pod {
	pod := newPod("p", "uid-1")
	now := metav1.NewTime(t0)
	pod.DeletionTimestamp = &now
	pod.DeletionGracePeriodSeconds = new(int64)
	*pod.DeletionGracePeriodSeconds = 30
	return pod
}

func TestDeleteOnlyOnceTheTerminalPhaseIsInTheAPI(t *testing.T) {
	ctx := context.Background()
	pod := deletingPod()
	f := newFixture(t, pod)
	f.client.PrependReactor("delete", "pods", func(a core.Action) (bool, runtime.Object, error) {
		// The status was written before the delete.
		p := f.apiPod(t, "default", "p")
		assert.Equal(t, v1.PodFailed, p.Status.Phase, "terminal phase in the API before the delete")
		return false, nil, nil
	})

	f.m.SetPodStatus(pod, runningStatus(false))
	f.m.syncBatch(ctx, false)
	require.Len(t, f.writes(), 1)
	assert.Equal(t, "patch", f.writes()[0].GetVerb(), "still running: no delete")

	f.m.TerminatePod(pod)
	st, _ := f.m.GetPodStatus("uid-1")
	assert.Equal(t, v1.PodFailed, st.Phase)
	assert.Equal(t, "ContainerStatusUnknown", st.ContainerStatuses[0].State.Terminated.Reason)
	f.m.syncBatch(ctx, false)
	w := f.writes()
	require.Len(t, w, 3)
	assert.Equal(t, "patch", w[1].GetVerb())
	del := w[2].(core.DeleteAction)
	assert.Equal(t, "p", del.GetName())
	assert.EqualValues(t, 0, *del.GetDeleteOptions().GracePeriodSeconds)
	assert.EqualValues(t, "uid-1", *del.GetDeleteOptions().Preconditions.UID)
	_, ok := f.m.GetPodStatus("uid-1")
	assert.False(t, ok)
}

type couldRun bool

func (c couldRun) PodCouldHaveRunningContainers(*v1.Pod) bool { return bool(c) }

func TestCanBeDeleted(t *testing.T) {
	f := newFixture(t)
	terminal := func(p *v1.Pod) *v1.Pod { p.Status.Phase = v1.PodSucceeded; return p }
	mirror := terminal(deletingPod())
	mirror.Annotations = map[string]string{kubetypes.ConfigMirrorAnnotationKey: "h"}
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		finished bool
		want     bool
	}{
		{"not being deleted", terminal(newPod("p", "u")), true, false},
		{"running in the API", deletingPod(), true, false},
		{"terminal in the API but not finished", terminal(deletingPod()), false, false},
		{"terminal in the API and finished", terminal(deletingPod()), true, true},
		{"a mirror pod", mirror, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, f.m.canBeDeleted(tc.pod, tc.pod.Status, tc.finished))
		})
	}
}

func TestTerminalPhaseWaitsWhileContainersCouldRun(t *testing.T) {
	ctx := context.Background()
	pod := deletingPod()
	f := newFixture(t, pod)
	f.m.safety = couldRun(true)
	f.m.TerminatePod(pod)
	f.m.syncBatch(ctx, false)
	for _, w := range f.writes() {
		assert.NotEqual(t, "delete", w.GetVerb())
	}
	assert.Equal(t, v1.PodPending, f.apiPod(t, "default", "p").Status.Phase, "not terminal while containers could run")

	f.m.safety = couldRun(false)
	f.m.syncBatch(ctx, true) // the full sync sees it can now be written and deleted
	_, err := f.client.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
	assert.True(t, err != nil, "deleted")
}

func TestStaticPodStatusGoesToItsMirrorPod(t *testing.T) {
	ctx := context.Background()
	static := newPod("etcd-node-a", "static-uid")
	static.Annotations = map[string]string{kubetypes.ConfigSourceAnnotationKey: kubetypes.FileSource}
	mirror := newPod("etcd-node-a", "mirror-uid")
	mirror.Annotations = map[string]string{kubetypes.ConfigSourceAnnotationKey: kubetypes.ApiserverSource, kubetypes.ConfigMirrorAnnotationKey: "static-uid"}

	f := newFixture(t, static)
	require.NoError(t, f.client.Tracker().Delete(v1.SchemeGroupVersion.WithResource("pods"), "default", "etcd-node-a"))
	f.client.ClearActions()
	f.m.SetPodStatus(static, runningStatus(true))
	assert.Equal(t, 0, f.m.syncBatch(ctx, false), "no mirror pod yet: nothing to write")

	require.NoError(t, f.client.Tracker().Add(mirror))
	f.pm.AddPod(mirror)
	f.client.ClearActions()
	assert.Equal(t, 1, f.m.syncBatch(ctx, false))
	require.Len(t, f.writes(), 1)
	got := f.apiPod(t, "default", "etcd-node-a")
	assert.EqualValues(t, "mirror-uid", got.UID)
	assert.Equal(t, v1.PodRunning, got.Status.Phase)
	assert.EqualValues(t, 1, f.m.apiStatusVersions["mirror-uid"], "versions are kept by the mirror pod's UID")

	st, ok := f.m.GetPodStatus("mirror-uid")
	require.True(t, ok, "the mirror pod's UID reads the static pod's status")
	assert.Equal(t, v1.PodRunning, st.Phase)
}

func TestRemoveOrphanedStatuses(t *testing.T) {
	a, b := newPod("a", "uid-a"), newPod("b", "uid-b")
	f := newFixture(t, a, b)
	f.m.SetPodStatus(a, runningStatus(true))
	f.m.SetPodStatus(b, runningStatus(true))
	f.m.RemoveOrphanedStatuses(map[types.UID]bool{"uid-a": true})
	_, okA := f.m.GetPodStatus("uid-a")
	_, okB := f.m.GetPodStatus("uid-b")
	assert.True(t, okA)
	assert.False(t, okB)
}

func TestIllegalTransitionFromTerminatedIsRefused(t *testing.T) {
	pod := newPod("p", "uid-1")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	f := newFixture(t, pod)
	done := runningStatus(false)
	done.Phase = v1.PodSucceeded
	done.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}
	f.m.SetPodStatus(pod, done)
	f.m.SetPodStatus(pod, runningStatus(true))
	st, _ := f.m.GetPodStatus("uid-1")
	assert.Equal(t, v1.PodSucceeded, st.Phase)
}

func TestWritersWriteEachPodOnceABatch(t *testing.T) {
	ctx := context.Background()
	var pods []*v1.Pod
	for i := range 20 {
		pods = append(pods, newPod(fmt.Sprintf("p%02d", i), types.UID(fmt.Sprintf("uid-%02d", i))))
	}
	f := newFixture(t, pods...)
	f.m.writers = 4
	for _, p := range pods {
		f.m.SetPodStatus(p, runningStatus(false))
	}
	assert.Equal(t, 20, f.m.syncBatch(ctx, false))
	for _, p := range pods {
		f.m.SetPodStatus(p, runningStatus(true))
	}
	assert.Equal(t, 20, f.m.syncBatch(ctx, false))
	assert.Len(t, f.writes(), 40, "one patch per pod and change")
	assert.Equal(t, 0, f.reads(), "no reads: the watched pods, then the patches' answers")
	for _, p := range pods {
		cs := f.apiPod(t, "default", p.Name).Status.ContainerStatuses
		require.Len(t, cs, 1)
		assert.True(t, cs[0].Ready, p.Name)
	}
	assert.Equal(t, 0, f.m.syncBatch(ctx, false), "nothing left to write")
}

func TestNewManagerNeedsItsConfig(t *testing.T) {
	_, err := NewManager(Config{})
	assert.EqualError(t, err, "status manager: Config.Client is required")
	_, err = NewManager(Config{Client: fake.NewClientset(), PodManager: kubepod.NewBasicPodManager(), Clock: clocktesting.NewFakeClock(t0), Writers: -1})
	assert.EqualError(t, err, "status manager: Config.Writers is -1; it must be 0 or more")
}

func TestTerminatePodLeavesAStaticPodsPhase(t *testing.T) {
	static := newPod("etcd", "static-uid")
	static.Annotations = map[string]string{kubetypes.ConfigSourceAnnotationKey: kubetypes.FileSource}
	f := newFixture(t, static)
	f.m.SetPodStatus(static, runningStatus(true))
	f.m.TerminatePod(static)
	st, _ := f.m.GetPodStatus("static-uid")
	assert.Equal(t, v1.PodRunning, st.Phase)
	assert.NotNil(t, st.ContainerStatuses[0].State.Terminated)
}

func TestMergeKeepsWhatOthersOwn(t *testing.T) {
	old := v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{
		{Type: "example.com/gate", Status: v1.ConditionTrue}, {Type: v1.PodReady, Status: v1.ConditionFalse}}}
	merged := mergePodStatus(old, v1.PodStatus{Phase: v1.PodSucceeded, Conditions: []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionTrue}, {Type: "example.com/gate", Status: v1.ConditionFalse}}}, false)
	assert.Equal(t, v1.PodSucceeded, merged.Phase)
	assert.Equal(t, []v1.PodCondition{
		{Type: "example.com/gate", Status: v1.ConditionTrue},                 // kept from the API
		{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: PodCompleted}, // a finished pod is not ready
	}, merged.Conditions)
	held := mergePodStatus(old, v1.PodStatus{Phase: v1.PodFailed}, true)
	assert.Equal(t, v1.PodRunning, held.Phase, "no terminal phase while containers could run")
}

// An evicted pod's DisruptionTarget condition goes out with its terminal
// phase, replacing one written before, and never while a container could
// still run (the phase is held back then).
func TestMergeWritesDisruptionTargetWithTheTerminalPhase(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 26, 11, 0, 0, 0, time.UTC))
	evicted := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "TerminationByKubelet",
		Message: "The node was low on resource: memory.", LastTransitionTime: at}
	old := v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{
		{Type: v1.DisruptionTarget, Status: v1.ConditionFalse, Reason: "Other"}}}
	failed := v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted", Conditions: []v1.PodCondition{evicted}}

	merged := mergePodStatus(old, failed, false)
	assert.Equal(t, v1.PodFailed, merged.Phase)
	assert.Equal(t, []v1.PodCondition{evicted}, merged.Conditions)

	held := mergePodStatus(old, failed, true)
	assert.Equal(t, v1.PodRunning, held.Phase)
	assert.Equal(t, old.Conditions, held.Conditions, "no DisruptionTarget while a container could run")

	again := mergePodStatus(merged, failed, false)
	assert.Equal(t, []v1.PodCondition{evicted}, again.Conditions, "kept once written, not written twice")
}

// TestABatchWritesTheOldestStatusFirst: the statuses set first are written
// first (not in the map's random order), whatever the pods' names.
func TestABatchWritesTheOldestStatusFirst(t *testing.T) {
	names := []string{"m", "c", "x", "a", "q", "f", "z", "b"}
	var pods []*v1.Pod
	for _, n := range names {
		pods = append(pods, newPod(n, types.UID("uid-"+n)))
	}
	f := newFixture(t, pods...)
	for _, p := range pods {
		f.m.SetPodStatus(p, runningStatus(true))
		f.clk.Step(time.Millisecond)
	}
	require.Equal(t, len(names), f.m.syncBatch(context.Background(), false))
	var written []string
	for _, a := range f.writes() {
		written = append(written, a.(core.PatchAction).GetName())
	}
	assert.Equal(t, names, written)
}

// creatingStatus is a new pod's first status: Pending, its container
// waiting as ContainerCreating.
func creatingStatus() v1.PodStatus {
	return v1.PodStatus{Phase: v1.PodPending, ContainerStatuses: []v1.ContainerStatus{{Name: "c", Image: "busybox",
		State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}
}

func TestCreatingStatusDelayHoldsBackContainerCreatingOnly(t *testing.T) {
	ctx := context.Background()
	fast, slow, failing := newPod("fast", "uid-fast"), newPod("slow", "uid-slow"), newPod("failing", "uid-failing")
	f := newFixture(t, fast, slow, failing)
	f.m.creatingDelay = time.Second

	f.m.SetPodStatus(fast, creatingStatus())
	f.m.SetPodStatus(slow, creatingStatus())
	pulling := creatingStatus()
	pulling.ContainerStatuses[0].State.Waiting.Reason = "ErrImagePull"
	f.m.SetPodStatus(failing, pulling)
	assert.Equal(t, 1, f.m.syncBatch(ctx, false), "an error is written at once; ContainerCreating waits")
	assert.Equal(t, t0.Add(time.Second), f.m.nextDeferred, "the loop is woken when the first held-back status is due")
	f.pm.UpdatePod(f.apiPod(t, "default", "failing")) // the watch brings the written status back
	assert.Equal(t, 0, f.m.syncBatch(ctx, true), "the full sync holds it back too")

	// fast starts within the delay: one write, Running; nothing of its
	// ContainerCreating ever reaches the API.
	f.clk.Step(500 * time.Millisecond)
	f.m.SetPodStatus(fast, runningStatus(false))
	assert.Equal(t, 1, f.m.syncBatch(ctx, false))
	assert.Equal(t, v1.PodRunning, f.apiPod(t, "default", "fast").Status.Phase)

	// slow is still creating when the delay is over: written then, and
	// its later changes at once.
	f.clk.Step(500 * time.Millisecond)
	assert.Equal(t, 1, f.m.syncBatch(ctx, false))
	assert.True(t, f.m.nextDeferred.IsZero(), "nothing held back any more")
	api := f.apiPod(t, "default", "slow").Status
	require.Len(t, api.ContainerStatuses, 1)
	assert.Equal(t, "ContainerCreating", api.ContainerStatuses[0].State.Waiting.Reason)
	f.pm.UpdatePod(f.apiPod(t, "default", "slow"))
	changed := creatingStatus()
	changed.Conditions = []v1.PodCondition{{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue}}
	f.m.SetPodStatus(slow, changed)
	assert.Equal(t, 1, f.m.syncBatch(ctx, false), "once written, a pod's ContainerCreating changes go out at once")

	var patched []string
	for _, a := range f.writes() {
		patched = append(patched, a.(core.PatchAction).GetName())
	}
	assert.Equal(t, []string{"failing", "fast", "slow", "slow"}, patched)
}

func TestRunWakesForAHeldBackStatus(t *testing.T) {
	pod := newPod("p", "uid-1")
	f := newFixture(t, pod)
	f.m.creatingDelay = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.m.Run(ctx) }()
	defer func() { cancel(); <-done }()

	f.m.SetPodStatus(pod, creatingStatus())
	// Nothing is written before the delay is over; then the loop wakes by
	// itself (no poke, no full sync: SyncPeriod is 10 s away).
	f.clk.Step(900 * time.Millisecond)
	assert.Empty(t, f.writes())
	require.Eventually(t, func() bool {
		f.clk.Step(10 * time.Millisecond)
		return len(f.writes()) == 1
	}, 5*time.Second, time.Millisecond, "written when the delay is over")
	assert.Less(t, f.clk.Since(t0), SyncPeriod, "before the full sync")
}
