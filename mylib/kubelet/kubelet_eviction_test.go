package kubelet

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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/cadvisor"
	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/eviction"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/images"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/kubetypes"
	kubelifecycle "mykubelet/mylib/lifecycle"
	"mykubelet/mylib/podworkers"
)

// fakeEvictionManager stands for the eviction manager: the test sets its
// pressure, and calls the kill function the Kubelet gave it. Its admit
// handler refuses BestEffort pods under memory pressure, as upstream's.
type fakeEvictionManager struct {
	mu                            sync.Mutex
	memory, disk, pid             bool
	kill                          eviction.KillPodFunc
	config                        eviction.Config
	imageGC                       eviction.ImageGC
	containerGC                   eviction.ContainerGC
	nodeRef                       *v1.ObjectReference
	runs                          chan fakeEvictionRun
	activePods                    eviction.ActivePodsFunc
	podCleanedUp                  eviction.PodCleanedUpFunc
	monitoringIntervalOfFirstRun  time.Duration
	summaryProviderGivenToManager eviction.SummaryProvider
}

type fakeEvictionRun struct {
	podFunc  eviction.ActivePodsFunc
	cleaned  eviction.PodCleanedUpFunc
	interval time.Duration
}

func (m *fakeEvictionManager) Run(ctx context.Context, podFunc eviction.ActivePodsFunc, cleaned eviction.PodCleanedUpFunc, interval time.Duration) {
	m.runs <- fakeEvictionRun{podFunc, cleaned, interval}
	<-ctx.Done()
}

func (m *fakeEvictionManager) set(memory, disk, pid bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.memory, m.disk, m.pid = memory, disk, pid
}

func (m *fakeEvictionManager) IsUnderMemoryPressure() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.memory
}
func (m *fakeEvictionManager) IsUnderDiskPressure() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.disk
}
func (m *fakeEvictionManager) IsUnderPIDPressure() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pid
}

func (m *fakeEvictionManager) Admit(_ context.Context, attrs *kubelifecycle.PodAdmitAttributes) kubelifecycle.PodAdmitResult {
	if m.IsUnderMemoryPressure() && GetPodQOS(attrs.Pod) == v1.PodQOSBestEffort {
		return kubelifecycle.PodAdmitResult{Reason: "Evicted", Message: "The node had condition: [MemoryPressure]. "}
	}
	return kubelifecycle.PodAdmitResult{Admit: true}
}

// fakeImageGC stands for the image GC manager: GarbageCollect answers
// with errs in turn (then nil), and counts its calls.
type fakeImageGC struct {
	// The interface's other methods (GetImageList is answered in
	// node_status_funcs_test.go) panic.
	images.ImageGCManager

	mu      sync.Mutex
	errs    []error
	calls   int
	runs    int
	policy  images.ImageGCPolicy
	collect chan time.Time // each GarbageCollect's beganGC
}

func (g *fakeImageGC) GarbageCollect(_ context.Context, beganGC time.Time) error {
	g.mu.Lock()
	g.calls++
	var err error
	if len(g.errs) > 0 {
		err, g.errs = g.errs[0], g.errs[1:]
	}
	g.mu.Unlock()
	if g.collect != nil {
		g.collect <- beganGC
	}
	return err
}

func (g *fakeImageGC) DeleteUnusedImages(context.Context) error { return nil }

func (g *fakeImageGC) Run(ctx context.Context) {
	g.mu.Lock()
	g.runs++
	g.mu.Unlock()
	<-ctx.Done()
}

// fakeStats is a stats provider with nothing to say.
type fakeStats struct{}

func (fakeStats) Get(context.Context, bool) (*statsapi.Summary, error) {
	return &statsapi.Summary{}, nil
}
func (fakeStats) ImageFsStats(context.Context) (*statsapi.FsStats, *statsapi.FsStats, error) {
	return &statsapi.FsStats{}, &statsapi.FsStats{}, nil
}

// useFakeManagers puts the fakes in place of eviction.NewManager and
// images.NewImageGCManager for the test.
func useFakeManagers(t *testing.T) (*fakeEvictionManager, *fakeImageGC) {
	t.Helper()
	em := &fakeEvictionManager{runs: make(chan fakeEvictionRun, 1)}
	ig := &fakeImageGC{}
	oldE, oldI := newEvictionManager, newImageGCManager
	newEvictionManager = func(sp eviction.SummaryProvider, c eviction.Config, kill eviction.KillPodFunc, igc eviction.ImageGC, cgc eviction.ContainerGC,
		_ record.EventRecorder, nodeRef *v1.ObjectReference, _ clock.WithTicker) (eviction.Manager, kubelifecycle.PodAdmitHandler, error) {
		em.kill, em.config, em.imageGC, em.containerGC, em.nodeRef, em.summaryProviderGivenToManager = kill, c, igc, cgc, nodeRef, sp
		return em, em, nil
	}
	newImageGCManager = func(_ runtimeapi.ImageServiceClient, _ kubecontainer.Runtime, _ images.StatsProvider, _ record.EventRecorder,
		_ *v1.ObjectReference, policy images.ImageGCPolicy, _ clock.Clock) (images.ImageGCManager, error) {
		ig.policy = policy
		return ig, nil
	}
	t.Cleanup(func() { newEvictionManager, newImageGCManager = oldE, oldI })
	return em, ig
}

// evictedStatus is what the eviction manager's status function does to an
// evicted pod (upstream's evictPod).
func evictedStatus(s *v1.PodStatus) {
	s.Phase, s.Reason = v1.PodFailed, "Evicted"
	s.Message = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi. "
	s.Conditions = append(s.Conditions, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
		Reason: v1.PodReasonTerminationByKubelet, Message: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi. "})
}

func findPodCondition(conds []v1.PodCondition, t v1.PodConditionType) *v1.PodCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// TestAnEvictedPodEndsFailedEvictedWithDisruptionTargetAndIsNotRestarted
// runs the pod half with Eviction on the mock runtime (the eviction
// manager a fake that the test drives): a BestEffort pod runs; the kill
// function the Kubelet gave the manager terminates it with the eviction's
// status and returns once it has; the pod ends Failed, reason Evicted,
// with the DisruptionTarget condition, its container stopped and never
// started again; it no longer counts among the active pods; and, the node
// under memory pressure, a new BestEffort pod is refused by the eviction
// manager's admit handler.
func TestAnEvictedPodEndsFailedEvictedWithDisruptionTargetAndIsNotRestarted(t *testing.T) {
	em, ig := useFakeManagers(t)
	rt := fakeruntime.New(clock.RealClock{})
	crm, err := kuberuntime.Connect(context.Background(), "unix://"+fakeruntimetest.Serve(t, rt), clock.RealClock{})
	require.NoError(t, err)
	t.Cleanup(func() { crm.Close() })
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hog", Namespace: "default", UID: "uid-hog"},
		Spec: v1.PodSpec{NodeName: "n1", RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "c", Image: "busybox",
			Command: []string{"sh", "-c", "sleep 600"}}}},
		Status: v1.PodStatus{Phase: v1.PodPending}}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourcePods: *resource.NewQuantity(10, resource.DecimalSI)}}}
	client := fake.NewClientset(pod.DeepCopy(), node)
	rec := record.NewFakeRecorder(100)
	updates := make(chan kubetypes.PodUpdate, 1)
	kl, err := New(Config{Client: client, NodeName: "n1", Pods: &PodsConfig{
		Updates: updates, RemoteRuntimeService: crm.RuntimeService(), RemoteImageService: crm.ImageService(),
		RelistPeriod: 100 * time.Millisecond, RunContainers: true, Admit: true, Recorder: rec, PodLogsDirectory: t.TempDir(),
		Eviction: &EvictionConfig{Stats: fakeStats{}, MonitoringInterval: 3 * time.Second,
			ImageGCPolicy: images.ImageGCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80}}}})
	require.NoError(t, err)
	assert.Equal(t, &v1.ObjectReference{Kind: "Node", Name: "n1", UID: "n1"}, em.nodeRef, "events go to the node, as upstream's nodeRef")
	assert.Equal(t, images.ImageGCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80}, ig.policy)
	assert.Equal(t, fakeStats{}, em.summaryProviderGivenToManager)
	cgc, ok := em.containerGC.(*kuberuntime.ContainerGC)
	require.True(t, ok, "the eviction manager reclaims through the container collector")
	require.NotNil(t, cgc.AllSourcesReady)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = kl.RunPods(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	run := <-em.runs
	assert.Equal(t, 3*time.Second, run.interval)
	updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{pod}}
	require.Eventually(t, func() bool {
		api, err := client.CoreV1().Pods("default").Get(ctx, "hog", metav1.GetOptions{})
		require.NoError(t, err)
		return api.Status.Phase == v1.PodRunning
	}, 30*time.Second, 20*time.Millisecond, "the pod runs")
	require.Len(t, run.podFunc(), 1, "the running pod is active")
	assert.False(t, run.cleaned(pod))

	zero := int64(0)
	require.NoError(t, em.kill(pod, true, &zero, evictedStatus), "the kill returns once the pod has terminated")
	st, ok := kl.statusManager.GetPodStatus(pod.UID)
	require.True(t, ok)
	assert.Equal(t, v1.PodFailed, st.Phase)
	assert.Equal(t, "Evicted", st.Reason)
	assert.Equal(t, "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi. ", st.Message)
	c := findPodCondition(st.Conditions, v1.DisruptionTarget)
	require.NotNil(t, c, "the DisruptionTarget condition stays through the stopped pod's status")
	assert.Equal(t, v1.PodReasonTerminationByKubelet, c.Reason)
	require.Len(t, st.ContainerStatuses, 1)
	require.NotNil(t, st.ContainerStatuses[0].State.Terminated, "the container was stopped")

	require.Eventually(t, func() bool { return run.cleaned(pod) }, 30*time.Second, 20*time.Millisecond, "the worker finishes the pod")
	require.Eventually(t, func() bool {
		api, err := client.CoreV1().Pods("default").Get(ctx, "hog", metav1.GetOptions{})
		require.NoError(t, err)
		return api.Status.Phase == v1.PodFailed && api.Status.Reason == "Evicted"
	}, 30*time.Second, 20*time.Millisecond, "the API shows the pod Failed, reason Evicted (kubectl: STATUS Evicted)")
	assert.Empty(t, run.podFunc(), "an evicted pod is no longer active")

	// The API's copy comes back (a watch event): nothing restarts it.
	api, err := client.CoreV1().Pods("default").Get(ctx, "hog", metav1.GetOptions{})
	require.NoError(t, err)
	updates <- kubetypes.PodUpdate{Op: kubetypes.UPDATE, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{api}}
	time.Sleep(500 * time.Millisecond) // five relists: a restarted container would show
	assert.Empty(t, runningPods(t, crm), "the evicted pod is not restarted")

	em.set(true, false, false)
	late := pod.DeepCopy()
	late.Name, late.UID = "late", "uid-late"
	updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{late}}
	require.Eventually(t, func() bool {
		st, ok := kl.statusManager.GetPodStatus(late.UID)
		return ok && st.Phase == v1.PodFailed
	}, 30*time.Second, 20*time.Millisecond, "admission refuses the pod")
	st, _ = kl.statusManager.GetPodStatus(late.UID)
	assert.Equal(t, "Evicted", st.Reason)
	assert.Equal(t, "Pod was rejected: The node had condition: [MemoryPressure]. ", st.Message)
	assert.Empty(t, runningPods(t, crm), "the refused pod never ran")
}

// killWorkers are pod workers that take a kill and never finish it.
type killWorkers struct {
	fakePodWorkers
	kills chan podworkers.UpdatePodOptions
}

func (k *killWorkers) UpdatePod(ctx context.Context, o podworkers.UpdatePodOptions) {
	k.fakePodWorkers.UpdatePod(ctx, o)
	k.kills <- o
}

func TestKillPodNowWaitsOneAndAHalfGracePeriodsAtLeast10sThenGivesUpWithExceedMaxGracePeriod(t *testing.T) {
	for _, tt := range []struct {
		name     string
		override *int64
		spec     *int64
		timeout  time.Duration
	}{
		{"a hard eviction (override 0): 10 s", ptrTo(int64(0)), ptrTo(int64(30)), 10 * time.Second},
		{"a soft eviction (override 30): 45 s", ptrTo(int64(30)), nil, 45 * time.Second},
		{"no override: the pod's own 20 s, so 30 s", nil, ptrTo(int64(20)), 30 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newPodFixture(t)
			w := &killWorkers{kills: make(chan podworkers.UpdatePodOptions, 1)}
			f.kl.podWorkers = w
			rec := record.NewFakeRecorder(10)
			f.kl.recorder = rec
			pod := apiPod("hog", "u1")
			pod.Spec.TerminationGracePeriodSeconds = tt.spec
			errc := make(chan error, 1)
			statusFn := func(s *v1.PodStatus) { s.Reason = "Evicted" }
			go func() { errc <- f.kl.killPodNow(pod, true, tt.override, statusFn) }()
			o := <-w.kills
			assert.Equal(t, kubetypes.SyncPodKill, o.UpdateType)
			require.NotNil(t, o.KillPodOptions)
			assert.True(t, o.KillPodOptions.Evict)
			assert.Equal(t, tt.override, o.KillPodOptions.PodTerminationGracePeriodSecondsOverride)
			var s v1.PodStatus
			o.KillPodOptions.PodStatusFunc(&s)
			assert.Equal(t, "Evicted", s.Reason)
			require.Eventually(t, f.clock.HasWaiters, 5*time.Second, time.Millisecond)
			f.clock.Step(tt.timeout - time.Millisecond)
			select {
			case err := <-errc:
				t.Fatalf("gave up before %v: %v", tt.timeout, err)
			default:
			}
			f.clock.Step(time.Millisecond)
			assert.EqualError(t, <-errc, "timeout waiting to kill pod")
			assert.Equal(t, "Warning ExceedMaxGracePeriod Container runtime did not kill the pod within specified grace period.", <-rec.Events)
		})
	}

	t.Run("a pod that terminates in time: no error", func(t *testing.T) {
		f := newPodFixture(t)
		w := &killWorkers{kills: make(chan podworkers.UpdatePodOptions, 1)}
		f.kl.podWorkers = w
		errc := make(chan error, 1)
		go func() { errc <- f.kl.killPodNow(apiPod("hog", "u1"), true, nil, nil) }()
		close((<-w.kills).KillPodOptions.CompletedCh)
		assert.NoError(t, <-errc)
	})
}

func ptrTo[T any](v T) *T { return &v }

func TestPressureConditionsFollowTheEvictionManager(t *testing.T) {
	f := newPodFixture(t)
	setters := f.kl.defaultNodeStatusFuncs(NodeStatusOptions{RootDir: t.TempDir(), NodeIP: []byte{127, 0, 0, 1}})
	conditions := func() map[v1.NodeConditionType]v1.ConditionStatus {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
		for _, s := range setters {
			require.NoError(t, s(context.Background(), node))
		}
		out := map[v1.NodeConditionType]v1.ConditionStatus{}
		for _, c := range node.Status.Conditions {
			out[c.Type] = c.Status
		}
		return out
	}
	c := conditions()
	assert.Equal(t, v1.ConditionFalse, c[v1.NodeMemoryPressure], "no eviction manager: no pressure")
	assert.Equal(t, v1.ConditionFalse, c[v1.NodeDiskPressure])
	assert.Equal(t, v1.ConditionFalse, c[v1.NodePIDPressure])

	em := &fakeEvictionManager{}
	f.kl.nodePressure = &nodePressure{manager: em}
	em.set(true, false, true)
	c = conditions()
	assert.Equal(t, v1.ConditionTrue, c[v1.NodeMemoryPressure])
	assert.Equal(t, v1.ConditionFalse, c[v1.NodeDiskPressure])
	assert.Equal(t, v1.ConditionTrue, c[v1.NodePIDPressure])
	em.set(false, true, false)
	c = conditions()
	assert.Equal(t, v1.ConditionFalse, c[v1.NodeMemoryPressure])
	assert.Equal(t, v1.ConditionTrue, c[v1.NodeDiskPressure])
	assert.Equal(t, v1.ConditionFalse, c[v1.NodePIDPressure])
}

func TestTheMockMachineSetsTheNodesMemoryAndEphemeralStorageCapacity(t *testing.T) {
	f := newPodFixture(t)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	mock := cadvisor.MockMachine{MemoryCapacity: 1 << 30, NodeFsCapacity: 2 << 30}
	for _, s := range f.kl.defaultNodeStatusFuncs(NodeStatusOptions{RootDir: t.TempDir(), NodeIP: []byte{127, 0, 0, 1}, MockMachine: mock}) {
		require.NoError(t, s(context.Background(), node))
	}
	assert.Equal(t, "1Gi", node.Status.Capacity.Memory().String())
	assert.Equal(t, "2Gi", node.Status.Capacity.StorageEphemeral().String())

	host, err := cadvisor.ReadMachineInfo(t.TempDir())
	require.NoError(t, err)
	m, err := cadvisor.ReadMachineInfoOf(t.TempDir(), cadvisor.MockMachine{ImageFsCapacity: 1 << 30})
	require.NoError(t, err)
	assert.Equal(t, host.MemoryCapacity, m.MemoryCapacity, "an unset field is the host's")
}

func TestImageGCRunsAtOnceThenEveryPeriodAndAnEventOnlyForRepeatedFailures(t *testing.T) {
	f := newPodFixture(t)
	rec := record.NewFakeRecorder(10)
	f.kl.recorder = rec
	ig := &fakeImageGC{errs: []error{errors.New("no stats yet"), errors.New("disk on fire"), nil, errors.New("once")},
		collect: make(chan time.Time, 1)}
	f.kl.nodePressure = &nodePressure{imageGC: ig, imageGCPeriod: 30 * time.Second, nodeRef: &v1.ObjectReference{Kind: "Node", Name: "n1", UID: "n1"}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.kl.runImageGC(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	assert.Equal(t, t0, <-ig.collect, "a collection at once, beganGC the start")
	for i := 0; i < 3; i++ {
		require.Eventually(t, f.clock.HasWaiters, 5*time.Second, time.Millisecond)
		f.clock.Step(30*time.Second - time.Millisecond)
		select {
		case <-ig.collect:
			t.Fatal("collected before the period")
		case <-time.After(10 * time.Millisecond):
		}
		f.clock.Step(time.Millisecond)
		assert.Equal(t, t0, <-ig.collect, "beganGC stays the first collection's start")
	}
	require.Eventually(t, f.clock.HasWaiters, 5*time.Second, time.Millisecond)
	assert.Equal(t, []string{"Warning ImageGCFailed disk on fire"}, drain(rec.Events),
		"the first failure is forgiven (stats may not be ready); the second in a row makes an event; one after a success does not")
}

func drain(ch <-chan string) []string {
	var out []string
	for {
		select {
		case e := <-ch:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestEvictionNeedsRunContainersAdmitAndStats(t *testing.T) {
	useFakeManagers(t)
	cs := fake.NewClientset()
	_, err := New(Config{Client: cs, NodeName: "n1", Pods: &PodsConfig{Updates: make(chan kubetypes.PodUpdate), Runtime: emptyRuntime{},
		Eviction: &EvictionConfig{Stats: fakeStats{}}}})
	assert.EqualError(t, err, errEvictionNeeds.Error())

	rt := fakeruntime.New(clock.RealClock{})
	crm, err := kuberuntime.Connect(context.Background(), "unix://"+fakeruntimetest.Serve(t, rt), clock.RealClock{})
	require.NoError(t, err)
	t.Cleanup(func() { crm.Close() })
	pods := PodsConfig{Updates: make(chan kubetypes.PodUpdate), RemoteRuntimeService: crm.RuntimeService(), RemoteImageService: crm.ImageService(),
		RunContainers: true, PodLogsDirectory: t.TempDir(), Eviction: &EvictionConfig{Stats: fakeStats{}}}
	_, err = New(Config{Client: cs, NodeName: "n1", Pods: &pods})
	assert.EqualError(t, err, errEvictionNeeds.Error(), "without Admit")
	pods.Admit, pods.Eviction = true, &EvictionConfig{}
	_, err = New(Config{Client: cs, NodeName: "n1", Pods: &pods})
	assert.EqualError(t, err, "kubelet: Config.Pods.Eviction.Stats is required (the stats provider)")
}

func TestEvictionConfigFromTheKubeletConfiguration(t *testing.T) {
	var got [4]map[string]string
	old := parseThresholdConfig
	parseThresholdConfig = func(hard, soft, grace, reclaim map[string]string) ([]eviction.Threshold, error) {
		got = [4]map[string]string{hard, soft, grace, reclaim}
		if hard["memory.available"] == "bad" {
			return nil, fmt.Errorf("invalid")
		}
		return []eviction.Threshold{{Signal: eviction.SignalMemoryAvailable, Operator: eviction.OpLessThan}}, nil
	}
	t.Cleanup(func() { parseThresholdConfig = old })

	serialize, parallel, qps, high, low := false, int32(3), int32(7), int32(90), int32(70)
	cfg := &kubeletv1beta1.KubeletConfiguration{
		EvictionHard:                     map[string]string{"memory.available": "100Mi"},
		EvictionSoft:                     map[string]string{"memory.available": "200Mi"},
		EvictionSoftGracePeriod:          map[string]string{"memory.available": "30s"},
		EvictionMinimumReclaim:           map[string]string{"memory.available": "50Mi"},
		EvictionPressureTransitionPeriod: metav1.Duration{Duration: 30 * time.Second},
		EvictionMaxPodGracePeriod:        60,
		ImageGCHighThresholdPercent:      &high, ImageGCLowThresholdPercent: &low,
		ImageMinimumGCAge: metav1.Duration{Duration: time.Minute}, ImageMaximumGCAge: metav1.Duration{Duration: time.Hour},
		SerializeImagePulls: &serialize, MaxParallelImagePulls: &parallel, RegistryPullQPS: &qps, RegistryBurst: 20,
	}
	ec, err := evictionConfigFrom(cfg, fakeStats{}, 40*time.Second)
	require.NoError(t, err)
	assert.Equal(t, [4]map[string]string{cfg.EvictionHard, cfg.EvictionSoft, cfg.EvictionSoftGracePeriod, cfg.EvictionMinimumReclaim}, got)
	assert.Equal(t, eviction.Config{PressureTransitionPeriod: 30 * time.Second, MaxPodGracePeriodSeconds: 60,
		Thresholds: []eviction.Threshold{{Signal: eviction.SignalMemoryAvailable, Operator: eviction.OpLessThan}}}, ec.Config)
	assert.Equal(t, images.ImageGCPolicy{HighThresholdPercent: 90, LowThresholdPercent: 70, MinAge: time.Minute, MaxAge: time.Hour}, ec.ImageGCPolicy)
	assert.Equal(t, images.PullConfig{SerializeImagePulls: false, MaxParallelImagePulls: &parallel, RegistryPullQPS: 7, RegistryBurst: 20}, ec.ImagePulls)
	assert.Equal(t, 40*time.Second, ec.ImageGCPeriod)
	assert.Equal(t, fakeStats{}, ec.Stats)

	ec, err = evictionConfigFrom(&kubeletv1beta1.KubeletConfiguration{}, fakeStats{}, 0)
	require.NoError(t, err, "nil pointers are upstream's defaults, not a panic")
	assert.Equal(t, images.ImageGCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80}, ec.ImageGCPolicy)
	assert.Equal(t, images.DefaultPullConfig(), ec.ImagePulls)

	_, err = evictionConfigFrom(cfg, nil, 0)
	assert.EqualError(t, err, "kubelet: MainOptions.Eviction needs Dependencies.StatsProvider")
	cfg.EvictionHard = map[string]string{"memory.available": "bad"}
	_, err = evictionConfigFrom(cfg, fakeStats{}, 0)
	assert.EqualError(t, err, "kubelet: eviction thresholds: invalid")
}
