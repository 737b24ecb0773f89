package volumemanager

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	kubepod "mykubelet/mylib/pod"
	"mykubelet/mylib/volume"
)

// fakePlugin serves emptyDir ("kubernetes.io/empty-dir") or configMap
// ("kubernetes.io/configmap", which RequiresRemount) volumes and records
// each SetUp and TearDown; failures makes the first SetUps fail.
type fakePlugin struct {
	name     string
	remount  bool
	supports func(*v1.Volume) bool

	mu       sync.Mutex
	failures int            // SetUps still to fail
	setUps   []string       // volume name of each SetUp
	labels   []string       // the pod's "v" label at each SetUp
	tearDown map[string]int // volume name -> TearDowns
}

func (p *fakePlugin) Init(volume.VolumeHost) error { return nil }
func (p *fakePlugin) GetPluginName() string        { return p.name }
func (p *fakePlugin) CanSupport(s *volume.Spec) bool {
	return p.supports(s.Volume)
}
func (p *fakePlugin) RequiresRemount(*volume.Spec) bool { return p.remount }
func (p *fakePlugin) NewMounter(s *volume.Spec, pod *v1.Pod) (volume.Mounter, error) {
	return &fakeMounter{p: p, name: s.Name(), label: pod.Labels["v"]}, nil
}
func (p *fakePlugin) NewUnmounter(name string, _ types.UID) (volume.Unmounter, error) {
	return &fakeMounter{p: p, name: name}, nil
}

func (p *fakePlugin) counts() (setUps int, tearDowns map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	td := map[string]int{}
	for k, v := range p.tearDown {
		td[k] = v
	}
	return len(p.setUps), td
}

type fakeMounter struct {
	p           *fakePlugin
	name, label string
}

func (m *fakeMounter) GetPath() string { return "/r/pods/x/volumes/" + m.name }
func (m *fakeMounter) GetAttributes() volume.Attributes {
	return volume.Attributes{Managed: m.p.remount}
}
func (m *fakeMounter) SetUp(volume.MounterArgs) error {
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	m.p.setUps = append(m.p.setUps, m.name)
	m.p.labels = append(m.p.labels, m.label)
	if m.p.failures > 0 {
		m.p.failures--
		return errors.New("configmap \"cfg\" not found")
	}
	return nil
}
func (m *fakeMounter) TearDown() error {
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	if m.p.tearDown == nil {
		m.p.tearDown = map[string]int{}
	}
	m.p.tearDown[m.name]++
	return nil
}

// podStates is a PodStateProvider: terminating and removed pods by UID.
type podStates struct {
	mu                    sync.Mutex
	terminating, finished map[types.UID]bool
}

func (s *podStates) ShouldPodContainersBeTerminating(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.terminating[uid] || s.finished[uid]
}
func (s *podStates) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finished[uid]
}
func (s *podStates) finish(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finished[uid] = true
}

type fixture struct {
	vm       *VolumeManager
	pods     kubepod.Manager
	states   *podStates
	emptyDir *fakePlugin
	cm       *fakePlugin
	recorder *record.FakeRecorder
	clock    *testingclock.FakeClock
}

func newFixture(t *testing.T, client kubernetes.Interface) *fixture {
	t.Helper()
	if client == nil {
		client = fake.NewClientset()
	}
	f := &fixture{pods: kubepod.NewBasicPodManager(), states: &podStates{terminating: map[types.UID]bool{}, finished: map[types.UID]bool{}},
		emptyDir: &fakePlugin{name: "kubernetes.io/empty-dir", supports: func(v *v1.Volume) bool { return v.EmptyDir != nil }},
		cm:       &fakePlugin{name: "kubernetes.io/configmap", remount: true, supports: func(v *v1.Volume) bool { return v.ConfigMap != nil }},
		recorder: record.NewFakeRecorder(100), clock: testingclock.NewFakeClock(time.Unix(1000, 0))}
	pm := &volume.VolumePluginMgr{}
	require.NoError(t, pm.InitPlugins([]volume.VolumePlugin{f.emptyDir, f.cm}, fakeHost{}))
	vm, err := NewVolumeManager(Config{KubeClient: client, PodManager: f.pods, PodStateProvider: f.states, PluginMgr: pm, Recorder: f.recorder, Clock: f.clock})
	require.NoError(t, err)
	f.vm = vm
	return f
}

// pass is one populator pass and one reconciler pass, its operations done.
func (f *fixture) pass() {
	f.vm.populator.loop(context.Background())
	f.vm.reconciler.reconcile()
	f.vm.reconciler.wait()
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// fakeHost is a VolumeHost the fake plugins never ask.
type fakeHost struct{}

func (fakeHost) GetPodVolumeDir(types.UID, string, string) string { return "" }
func (fakeHost) GetPodDir(types.UID) string                       { return "" }
func (fakeHost) GetKubeClient() kubernetes.Interface              { return nil }
func (fakeHost) GetConfigMapFunc() func(string, string) (*v1.ConfigMap, error) {
	return nil
}
func (fakeHost) GetSecretFunc() func(string, string) (*v1.Secret, error) { return nil }
func (fakeHost) GetServiceAccountTokenFunc() func(string, string, *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return nil
}
func (fakeHost) GetNodeName() types.NodeName                  { return "n" }
func (fakeHost) GetNodeAllocatable() (v1.ResourceList, error) { return nil, nil }
func (fakeHost) GetHostPathRoot() string                      { return "" }
func (fakeHost) GetTrustAnchorsByName(string, bool) ([]byte, error) {
	return nil, nil
}
func (fakeHost) GetTrustAnchorsBySigner(string, *metav1.LabelSelector, bool) ([]byte, error) {
	return nil, nil
}
func (fakeHost) GetPodCertificateCredentialBundle(context.Context, *v1.Pod, string, int) ([]byte, []byte, error) {
	return nil, nil, nil
}

// testPod mounts an emptyDir "scratch" and a configMap "cfg"; "unused" is
// mounted by no container.
func testPod(uid, label string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: types.UID(uid), Labels: map[string]string{"v": label}},
		Spec: v1.PodSpec{
			Volumes: []v1.Volume{
				{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
				{Name: "unused", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			},
			Containers: []v1.Container{{Name: "c", VolumeMounts: []v1.VolumeMount{{Name: "scratch", MountPath: "/s"}, {Name: "cfg", MountPath: "/etc/config"}}}},
		}}
}

func TestMountOnAddRemountOnUpdateUnmountOnTermination(t *testing.T) {
	f := newFixture(t, nil)
	pod := testPod("u1", "a")
	f.pods.AddPod(pod)

	f.pass()
	mounted := f.vm.GetMountedVolumesForPod("u1")
	assert.ElementsMatch(t, []string{"scratch", "cfg"}, sortedKeys(mounted), "the used volumes, not \"unused\"")
	assert.Equal(t, "kubernetes.io/configmap", mounted["cfg"].PluginName)
	assert.Equal(t, "/r/pods/x/volumes/cfg", mounted["cfg"].Mounter.GetPath())
	n, _ := f.emptyDir.counts()
	assert.Equal(t, 1, n, "scratch set up once")

	// Processed pods are not processed again: nothing remounts by itself.
	f.pass()
	n, _ = f.cm.counts()
	assert.Equal(t, 1, n)

	// The pod changes (a label a downward API volume would show) and is
	// synced: WaitForAttachAndMount has it reprocessed, the configMap
	// volume is set up again with the new pod; the emptyDir is not.
	updated := testPod("u1", "b")
	f.pods.UpdatePod(updated)
	require.NoError(t, f.vm.WaitForAttachAndMount(context.Background(), updated), "all mounted: returns at once")
	f.pass()
	f.cm.mu.Lock()
	assert.Equal(t, []string{"a", "b"}, f.cm.labels, "remounted with the pod as it is now")
	f.cm.mu.Unlock()
	n, _ = f.emptyDir.counts()
	assert.Equal(t, 1, n, "an emptyDir is never set up again")
	_, remount := f.vm.asw.podExistsInVolume("u1", "cfg")
	assert.False(t, remount, "the remount is done")

	// Terminating: the volumes stay while containers may run.
	f.states.terminating["u1"] = true
	f.pass()
	assert.Len(t, f.vm.GetMountedVolumesForPod("u1"), 2)

	// Terminated: torn down.
	f.states.finish("u1")
	f.pass()
	_, td := f.emptyDir.counts()
	assert.Equal(t, map[string]int{"scratch": 1}, td)
	_, td = f.cm.counts()
	assert.Equal(t, map[string]int{"cfg": 1}, td)
	assert.Empty(t, f.vm.GetPossiblyMountedVolumesForPod("u1"))
	assert.False(t, f.vm.HasPossiblyMountedVolumesForPod("u1"))
	require.NoError(t, f.vm.WaitForUnmount(context.Background(), pod))
	assert.Empty(t, f.events(), "no event when all goes well")
}

func TestFailedMountRetriesWithBackOffThenSucceeds(t *testing.T) {
	f := newFixture(t, nil)
	f.cm.failures = 2
	f.pods.AddPod(testPod("u1", "a"))

	f.pass()
	assert.Equal(t, []string{`Warning FailedMount MountVolume.SetUp failed for volume "cfg" : configmap "cfg" not found`}, f.events())
	assert.NotContains(t, f.vm.GetMountedVolumesForPod("u1"), "cfg")
	assert.Contains(t, f.vm.GetMountedVolumesForPod("u1"), "scratch", "the other volume is mounted anyway")

	tries := func() int { n, _ := f.cm.counts(); return n }
	f.pass()
	assert.Equal(t, 1, tries(), "within the back-off: no new try")
	f.clock.Step(499 * time.Millisecond)
	f.pass()
	assert.Equal(t, 1, tries(), "499 ms: still within 500 ms")
	f.clock.Step(time.Millisecond)
	f.pass()
	assert.Equal(t, 2, tries(), "500 ms: tried again, and failed")
	assert.Len(t, f.events(), 1, "one event per try")

	f.clock.Step(999 * time.Millisecond)
	f.pass()
	assert.Equal(t, 2, tries(), "the back-off doubled to 1 s")
	f.clock.Step(time.Millisecond)
	f.pass()
	assert.Equal(t, 3, tries())
	assert.Contains(t, f.vm.GetMountedVolumesForPod("u1"), "cfg", "the third try succeeds")
	assert.Empty(t, f.events())

	// A success forgets the back-off.
	f.vm.reconciler.mu.Lock()
	assert.Empty(t, f.vm.reconciler.backoff)
	f.vm.reconciler.mu.Unlock()
}

func TestBackOffCapsAtTwoMinutesTwoSeconds(t *testing.T) {
	f := newFixture(t, nil)
	f.cm.failures = 1000
	f.pods.AddPod(testPod("u1", "a"))
	f.pass()
	for range 20 {
		f.clock.Step(maxDurationBeforeRetry)
		f.pass()
	}
	f.vm.reconciler.mu.Lock()
	assert.Equal(t, 2*time.Minute+2*time.Second, f.vm.reconciler.backoff[opKey{"u1", "cfg"}].duration)
	f.vm.reconciler.mu.Unlock()

	// The pod goes while its mount fails: its back-off goes with it.
	f.states.finish("u1")
	f.pass() // scratch torn down
	f.pass()
	f.vm.reconciler.mu.Lock()
	defer f.vm.reconciler.mu.Unlock()
	assert.Empty(t, f.vm.reconciler.backoff)
}

// waitStepping runs wait in a goroutine and steps the fake clock (while
// something waits on it) until wait returns.
func waitStepping(t *testing.T, clk *testingclock.FakeClock, step time.Duration, wait func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- wait() }()
	for {
		select {
		case err := <-done:
			return err
		default:
		}
		if clk.HasWaiters() {
			clk.Step(step)
		} else {
			time.Sleep(time.Millisecond)
		}
	}
}

func TestWaitForAttachAndMountTimesOutWithUpstreamsError(t *testing.T) {
	f := newFixture(t, nil)
	f.cm.failures = 1000
	pod := testPod("u1", "a")
	f.pods.AddPod(pod)
	f.pass()
	start := f.clock.Now()
	err := waitStepping(t, f.clock, PodAttachAndMountRetryInterval, func() error { return f.vm.WaitForAttachAndMount(context.Background(), pod) })
	assert.EqualError(t, err, "unmounted volumes=[cfg], unattached volumes=[], failed to process volumes=[]: context deadline exceeded")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	elapsed := f.clock.Since(start)
	assert.True(t, elapsed >= 2*time.Minute+3*time.Second && elapsed < 2*time.Minute+3*time.Second+PodAttachAndMountRetryInterval,
		"gave up after podAttachAndMountTimeout on the clock, not %v", elapsed)
}

func TestWaitForAttachAndMountReportsWhatCannotBeProcessed(t *testing.T) {
	ctx := context.Background()
	claim := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "bound", Namespace: "default", UID: "claim-uid"},
		Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: v1.PersistentVolumeSpec{
		ClaimRef: &v1.ObjectReference{UID: "claim-uid"}, PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "d"}}}}
	f := newFixture(t, fake.NewClientset(claim, pv))
	for _, tc := range []struct {
		uid    string
		source v1.VolumeSource
		want   string
	}{
		{"nfs", v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}},
			`failed to get Plugin from volumeSpec for volume "data" err=no volume plugin matched: volume "data" is of a kind this node cannot mount (nfs)`},
		{"missing", v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "nope"}},
			`error processing PVC default/nope: failed to fetch PVC from API server: persistentvolumeclaims "nope" not found`},
		{"bound", v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "bound"}},
			`failed to get Plugin from volumeSpec for volume "pv-1" err=no volume plugin matched: persistent volume "pv-1" is of a kind this node cannot mount (csi)`},
	} {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tc.uid, Namespace: "default", UID: types.UID(tc.uid)}, Spec: v1.PodSpec{
			Volumes:    []v1.Volume{{Name: "data", VolumeSource: tc.source}},
			Containers: []v1.Container{{Name: "c", VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/d"}}}}}}
		f.pods.AddPod(pod)
		f.pass()
		err := f.vm.WaitForAttachAndMount(ctx, pod)
		assert.EqualError(t, err, "unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: "+tc.want, tc.uid)
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "at once, not a timeout")
	}
}

func TestRunMountsAndWaitForUnmountOnTheClock(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.vm.Run(ctx, nil) }()
	defer func() { cancel(); <-done }()

	pod := testPod("u1", "a")
	f.pods.AddPod(pod)
	require.NoError(t, waitStepping(t, f.clock, 100*time.Millisecond, func() error { return f.vm.WaitForAttachAndMount(ctx, pod) }))
	assert.Len(t, f.vm.GetMountedVolumesForPod("u1"), 2)

	f.states.finish("u1")
	f.pods.RemovePod(pod)
	require.NoError(t, waitStepping(t, f.clock, 100*time.Millisecond, func() error { return f.vm.WaitForUnmount(ctx, pod) }))
	assert.Empty(t, f.vm.GetPossiblyMountedVolumesForPod("u1"))
	_, td := f.cm.counts()
	assert.Equal(t, 1, td["cfg"])
}

func TestWaitForUnmountTimesOut(t *testing.T) {
	f := newFixture(t, nil)
	pod := testPod("u1", "a")
	f.pods.AddPod(pod)
	f.pass()
	// Still running: its volumes stay mounted, and WaitForUnmount gives up.
	err := waitStepping(t, f.clock, PodAttachAndMountRetryInterval, func() error { return f.vm.WaitForUnmount(context.Background(), pod) })
	assert.EqualError(t, err, "mounted volumes=[cfg scratch]: context deadline exceeded")
}

// A tear-down marks its volume unmounted a moment before it ends:
// WaitForUnmount waits for the end, and the end wakes it (the fake clock
// never moves here).
func TestWaitForUnmountWaitsForTheOperationsUnderWay(t *testing.T) {
	f := newFixture(t, nil)
	pod := testPod("u1", "a")
	f.pods.AddPod(pod)
	f.pass()
	f.states.finish("u1")
	f.pods.RemovePod(pod)
	f.pass()
	require.Empty(t, f.vm.asw.getMountedVolumesForPod("u1"), "torn down")
	release := make(chan struct{})
	f.vm.reconciler.start(opKey{uid: "u1", name: "cfg"}, func() error { <-release; return nil })

	done := make(chan error, 1)
	go func() { done <- f.vm.WaitForUnmount(context.Background(), pod) }()
	// It returns, or it looked once and waits for its poll.
	require.Eventually(t, func() bool { return len(done) > 0 || f.clock.HasWaiters() }, 5*time.Second, time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("returned while an operation on the pod's volume was under way: %v", err)
	default:
	}
	assert.Equal(t, []string{"cfg"}, f.vm.GetPossiblyMountedVolumesForPod("u1"))
	close(release)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the operation's end did not wake WaitForUnmount")
	}
	assert.Empty(t, f.vm.GetPossiblyMountedVolumesForPod("u1"))
}

// WaitForAttachAndMount returns as soon as the pod's last volume is set
// up, without waiting for its next poll (the fake clock never moves here).
func TestWaitForAttachAndMountWakesOnAMount(t *testing.T) {
	f := newFixture(t, nil)
	pod := testPod("u1", "a")
	f.pods.AddPod(pod)
	f.vm.populator.loop(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.vm.WaitForAttachAndMount(context.Background(), pod) }()
	// It looked once, found nothing mounted, and waits for its poll.
	require.Eventually(t, f.clock.HasWaiters, 5*time.Second, time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("returned before anything was mounted: %v", err)
	default:
	}
	f.vm.reconciler.reconcile()
	f.vm.reconciler.wait()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting for a poll on a clock that does not move")
	}
	assert.Len(t, f.vm.GetMountedVolumesForPod("u1"), 2)
}

// TestANewPodWakesThePopulatorAndTheReconciler: with Run going and a clock
// that never moves (neither loop's 100 ms passes), a pod that waits for its
// volumes has them added and set up: its wait wakes the populator, whose
// pass wakes the reconciler.
func TestANewPodWakesThePopulatorAndTheReconciler(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { f.vm.Run(ctx, nil); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	require.Eventually(t, f.clock.HasWaiters, 5*time.Second, time.Millisecond) // both loops did their first pass
	pod := testPod("u1", "a")
	f.pods.AddPod(pod)
	done := make(chan error, 1)
	go func() { done <- f.vm.WaitForAttachAndMount(ctx, pod) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the volumes wait for the loops' period on a clock that does not move")
	}
	assert.Len(t, f.vm.GetMountedVolumesForPod("u1"), 2)
}
