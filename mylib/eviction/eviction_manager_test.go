package eviction

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	testingclock "k8s.io/utils/clock/testing"

	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/lifecycle"
)

const mi = 1024 * 1024

// fakeSummary is a node whose figures a test sets; each Get stamps them
// with the clock's now, as a fresh reading.
type fakeSummary struct {
	mu    sync.Mutex
	clock *testingclock.FakeClock
	gets  int
	onGet chan int // optional: each Get sends its count (never blocks)

	memCapacity, memAvailable         uint64
	nodeFsCapacity, nodeFsAvailable   uint64
	imageFsCapacity, imageFsAvailable uint64
	maxPID, processes                 int64
	pods                              []statsapi.PodStats
}

func (f *fakeSummary) Get(context.Context, bool) (*statsapi.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if f.onGet != nil {
		select {
		case f.onGet <- f.gets:
		default:
		}
	}
	now := metav1.NewTime(f.clock.Now())
	p := func(v uint64) *uint64 { return &v }
	s := &statsapi.Summary{Node: statsapi.NodeStats{
		Memory: &statsapi.MemoryStats{Time: now, AvailableBytes: p(f.memAvailable), WorkingSetBytes: p(f.memCapacity - f.memAvailable)},
		Fs: &statsapi.FsStats{Time: now, CapacityBytes: p(f.nodeFsCapacity), AvailableBytes: p(f.nodeFsAvailable),
			Inodes: p(1000), InodesFree: p(900)},
		Runtime: &statsapi.RuntimeStats{ImageFs: &statsapi.FsStats{Time: now,
			CapacityBytes: p(f.imageFsCapacity), AvailableBytes: p(f.imageFsAvailable)}},
		Rlimit: &statsapi.RlimitStats{Time: now, MaxPID: &f.maxPID, NumOfRunningProcesses: &f.processes},
	}}
	s.Pods = append(s.Pods, f.pods...)
	return s, nil
}

func (f *fakeSummary) set(fn func(f *fakeSummary)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// killed is one call of the kill func: the pod, its grace period, and the
// status the eviction's status func wrote.
type killed struct {
	pod    *v1.Pod
	grace  int64
	status v1.PodStatus
}

type fakeKiller struct {
	mu     sync.Mutex
	killed []killed
	ch     chan killed // optional: each kill is also sent here
}

func (k *fakeKiller) kill(pod *v1.Pod, isEvicted bool, grace *int64, statusFn func(*v1.PodStatus)) error {
	if !isEvicted {
		return errors.New("kill without isEvicted")
	}
	st := pod.Status.DeepCopy()
	statusFn(st)
	k.mu.Lock()
	rec := killed{pod: pod, grace: *grace, status: *st}
	k.killed = append(k.killed, rec)
	k.mu.Unlock()
	if k.ch != nil {
		k.ch <- rec
	}
	return nil
}

func (k *fakeKiller) names() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, r := range k.killed {
		out = append(out, r.pod.Name)
	}
	return out
}

// fakeGC records the reclaim calls in order and runs a hook (freeing space).
type fakeGC struct {
	calls *[]string
	name  string
	hook  func()
}

func (g fakeGC) DeleteUnusedImages(context.Context) error        { return g.run() }
func (g fakeGC) DeleteAllUnusedContainers(context.Context) error { return g.run() }
func (g fakeGC) run() error {
	*g.calls = append(*g.calls, g.name)
	if g.hook != nil {
		g.hook()
	}
	return nil
}

type fixture struct {
	clock    *testingclock.FakeClock
	summary  *fakeSummary
	killer   *fakeKiller
	recorder *record.FakeRecorder
	gcCalls  []string
	imageGC  fakeGC
	contGC   fakeGC
	manager  *managerImpl
	pods     []*v1.Pod
}

// newFixture: a 1000Mi node with 800Mi free, 1000Mi filesystems half full,
// no pods; config's thresholds as given.
func newFixture(t *testing.T, config Config) *fixture {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := &fixture{
		clock: clk,
		summary: &fakeSummary{clock: clk, memCapacity: 1000 * mi, memAvailable: 800 * mi,
			nodeFsCapacity: 1000 * mi, nodeFsAvailable: 500 * mi, imageFsCapacity: 1000 * mi, imageFsAvailable: 500 * mi,
			maxPID: 1000, processes: 100},
		killer:   &fakeKiller{},
		recorder: record.NewFakeRecorder(100),
	}
	f.imageGC = fakeGC{calls: &f.gcCalls, name: "images"}
	f.contGC = fakeGC{calls: &f.gcCalls, name: "containers"}
	nodeRef := &v1.ObjectReference{Kind: "Node", Name: "node-1", UID: "node-1"}
	m, admit, err := NewManager(f.summary, config, f.killer.kill, &f.imageGC, &f.contGC, f.recorder, nodeRef, clk)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	if any(m) != any(admit) {
		t.Fatalf("the admit handler is not the manager")
	}
	f.manager = m.(*managerImpl)
	return f
}

// sync runs one pass after dt on the clock.
func (f *fixture) sync(t *testing.T, dt time.Duration) []*v1.Pod {
	t.Helper()
	f.clock.Step(dt)
	evicted, err := f.manager.synchronize(context.Background(), func() []*v1.Pod { return f.pods })
	if err != nil {
		t.Fatalf("synchronize: %v", err)
	}
	return evicted
}

// addPod adds a pod with one container "c" requesting memReq (bytes; 0:
// none) and using memUsed, its disk use and process count.
func (f *fixture) addPod(name string, prio int32, memReq, memUsed, diskUsed uint64, procs uint64) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid"), Generation: 3,
			Annotations: map[string]string{kubetypes.ConfigSourceAnnotationKey: kubetypes.ApiserverSource}},
		Spec: v1.PodSpec{Priority: &prio, Containers: []v1.Container{{Name: "c"}}},
	}
	if memReq > 0 {
		pod.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: *resource.NewQuantity(int64(memReq), resource.BinarySI)}
	}
	zero := uint64(0)
	f.pods = append(f.pods, pod)
	f.summary.set(func(s *fakeSummary) {
		s.pods = append(s.pods, statsapi.PodStats{
			PodRef: statsapi.PodReference{Name: name, Namespace: "default", UID: string(pod.UID)},
			Memory: &statsapi.MemoryStats{WorkingSetBytes: &memUsed},
			Containers: []statsapi.ContainerStats{{Name: "c",
				Memory: &statsapi.MemoryStats{WorkingSetBytes: &memUsed},
				Rootfs: &statsapi.FsStats{UsedBytes: &diskUsed}, Logs: &statsapi.FsStats{UsedBytes: &zero}}},
			ProcessStats: &statsapi.ProcessStats{ProcessCount: &procs},
		})
	})
	return pod
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

func quantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

func hardMemory(value string) Threshold {
	return Threshold{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: quantity(value)}}
}

func TestParseThresholdConfig(t *testing.T) {
	got, err := ParseThresholdConfig(
		map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "imagefs.inodesFree": "0%"},
		map[string]string{"memory.available": "300Mi"},
		map[string]string{"memory.available": "30s"},
		map[string]string{"memory.available": "0.5Gi", "nodefs.available": "5%"})
	if err != nil {
		t.Fatalf("ParseThresholdConfig: %v", err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d thresholds (%v), want 3: imagefs.inodesFree<0%% is ignored", len(got), got)
	}
	mem, nodefs, soft := got[0], got[1], got[2]
	if mem.Signal != SignalMemoryAvailable || mem.Value.Quantity.Cmp(resource.MustParse("100Mi")) != 0 || mem.GracePeriod != 0 || mem.Operator != OpLessThan {
		t.Errorf("hard memory = %s", formatThreshold(mem))
	}
	if mem.MinReclaim == nil || mem.MinReclaim.Quantity.Cmp(resource.MustParse("512Mi")) != 0 {
		t.Errorf("memory min reclaim = %+v, want 512Mi", mem.MinReclaim)
	}
	if nodefs.Signal != SignalNodeFsAvailable || nodefs.Value.Quantity != nil || nodefs.Value.Percentage != 0.1 {
		t.Errorf("nodefs = %s, want 10%%", formatThreshold(nodefs))
	}
	if nodefs.MinReclaim == nil || nodefs.MinReclaim.Percentage != 0.05 {
		t.Errorf("nodefs min reclaim = %+v, want 5%%", nodefs.MinReclaim)
	}
	if soft.Signal != SignalMemoryAvailable || soft.GracePeriod != 30*time.Second || soft.Value.Quantity.Cmp(resource.MustParse("300Mi")) != 0 {
		t.Errorf("soft memory = %s", formatThreshold(soft))
	}
}

func TestParseThresholdConfigRefuses(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		hard, soft, grace, mini map[string]string
		want                    string
	}{
		{name: "unknown signal", hard: map[string]string{"memory.free": "1Gi"}, want: "unsupported eviction signal memory.free"},
		{name: "allocatable signal", hard: map[string]string{"allocatableMemory.available": "1Gi"}, want: "unsupported eviction signal"},
		{name: "soft without grace", soft: map[string]string{"nodefs.available": "15%"}, want: "grace period must be specified for the soft eviction threshold nodefs.available"},
		{name: "over 100%", hard: map[string]string{"nodefs.available": "150%"}, want: "must be <= 100%"},
		{name: "negative %", hard: map[string]string{"nodefs.available": "-5%"}, want: "must be >= 0%"},
		{name: "zero quantity", hard: map[string]string{"memory.available": "0"}, want: "must be positive"},
		{name: "not a quantity", hard: map[string]string{"memory.available": "lots"}, want: "eviction threshold memory.available"},
		{name: "bad grace", soft: map[string]string{"memory.available": "1Gi"}, grace: map[string]string{"memory.available": "soon"}, want: "eviction grace period memory.available"},
		{name: "negative grace", soft: map[string]string{"memory.available": "1Gi"}, grace: map[string]string{"memory.available": "-1s"}, want: "must be a positive value"},
		{name: "negative min reclaim", mini: map[string]string{"memory.available": "-1Mi"}, want: "negative eviction minimum reclaim"},
		{name: "zero % min reclaim", mini: map[string]string{"memory.available": "0%"}, want: "must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseThresholdConfig(tc.hard, tc.soft, tc.grace, tc.mini)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestNewManagerChecksItsArguments(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	kill := func(*v1.Pod, bool, *int64, func(*v1.PodStatus)) error { return nil }
	ref := &v1.ObjectReference{Kind: "Node", Name: "n"}
	rec := record.NewFakeRecorder(1)
	sum := &fakeSummary{clock: clk}
	if _, _, err := NewManager(nil, Config{}, kill, nil, nil, rec, ref, clk); err == nil {
		t.Error("no summary provider: want an error")
	}
	if _, _, err := NewManager(sum, Config{}, nil, nil, nil, rec, ref, clk); err == nil {
		t.Error("no kill func: want an error")
	}
	bad := Config{Thresholds: []Threshold{{Signal: "swap.available", Operator: OpLessThan}}}
	if _, _, err := NewManager(sum, bad, kill, nil, nil, rec, ref, clk); err == nil || !strings.Contains(err.Error(), "unsupported eviction signal swap.available") {
		t.Errorf("unknown signal: err = %v", err)
	}
}

func TestNoPressureNoConditionNoEviction(t *testing.T) {
	f := newFixture(t, Config{Thresholds: []Threshold{hardMemory("100Mi")}, PressureTransitionPeriod: 5 * time.Minute})
	f.addPod("best-effort", 0, 0, 300*mi, 0, 1)
	if got := f.sync(t, time.Second); got != nil {
		t.Fatalf("evicted %v with 800Mi free", got)
	}
	if f.manager.IsUnderMemoryPressure() || f.manager.IsUnderDiskPressure() || f.manager.IsUnderPIDPressure() {
		t.Error("a pressure condition without a threshold met")
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events %v, want none", ev)
	}
}

func TestHardMemoryThresholdEvictsOnePodAsUpstreamSays(t *testing.T) {
	f := newFixture(t, Config{Thresholds: []Threshold{hardMemory("100Mi")}, PressureTransitionPeriod: 5 * time.Minute, MaxPodGracePeriodSeconds: 30})
	f.addPod("guaranteed", 0, 200*mi, 150*mi, 0, 1)
	f.addPod("burstable", 0, 100*mi, 120*mi, 0, 1)
	f.addPod("best-effort", 0, 0, 300*mi, 0, 1)
	f.summary.set(func(s *fakeSummary) { s.memAvailable = 50 * mi })

	evicted := f.sync(t, time.Second)
	if len(evicted) != 1 || evicted[0].Name != "best-effort" {
		t.Fatalf("evicted %v, want [best-effort]", evicted)
	}
	if got := f.killer.names(); len(got) != 1 {
		t.Fatalf("killed %v, want one pod per pass", got)
	}
	if !f.manager.IsUnderMemoryPressure() || f.manager.IsUnderDiskPressure() {
		t.Error("want MemoryPressure only")
	}
	k := f.killer.killed[0]
	if k.grace != 1 {
		t.Errorf("grace period override %d, want 1 (immediateEvictionGracePeriodSeconds) on a hard threshold", k.grace)
	}
	wantMsg := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. " +
		"Container c was using 300Mi, request is 0, has larger consumption of memory. "
	if k.status.Phase != v1.PodFailed || k.status.Reason != "Evicted" || k.status.Message != wantMsg {
		t.Errorf("status %s/%s %q, want Failed/Evicted %q", k.status.Phase, k.status.Reason, k.status.Message, wantMsg)
	}
	if len(k.status.Conditions) != 1 {
		t.Fatalf("conditions %+v, want DisruptionTarget", k.status.Conditions)
	}
	c := k.status.Conditions[0]
	if c.ObservedGeneration != k.pod.Generation {
		t.Errorf("condition observedGeneration %d, want the pod's %d", c.ObservedGeneration, k.pod.Generation)
	}
	if c.Type != v1.DisruptionTarget || c.Status != v1.ConditionTrue || c.Reason != "TerminationByKubelet" || c.Message != wantMsg || c.LastTransitionTime.IsZero() {
		t.Errorf("condition %+v", c)
	}
	ev := f.events()
	if len(ev) != 2 || ev[0] != "Warning EvictionThresholdMet Attempting to reclaim memory" ||
		!strings.HasPrefix(ev[1], "Warning Evicted "+wantMsg) || !strings.Contains(ev[1], "offending_containers:c") || !strings.Contains(ev[1], "starved_resource:memory") {
		t.Errorf("events %q", ev)
	}
	if len(f.gcCalls) != 0 {
		t.Errorf("memory pressure ran %v, want no image or container GC", f.gcCalls)
	}
}

func TestMemoryRankingPriorityBeforeUsageAndCriticalPodsSpared(t *testing.T) {
	f := newFixture(t, Config{Thresholds: []Threshold{hardMemory("100Mi")}})
	f.addPod("low-priority-small", 0, 0, 50*mi, 0, 1)
	f.addPod("high-priority-big", 1000, 0, 400*mi, 0, 1)
	f.addPod("under-request-huge", -10, 900*mi, 500*mi, 0, 1)
	critical := f.addPod("system-critical", 2000000000, 0, 900*mi, 0, 1)
	static := f.addPod("static", -100, 0, 900*mi, 0, 1)
	static.Annotations[kubetypes.ConfigSourceAnnotationKey] = "file"

	pods := append([]*v1.Pod{}, f.pods...)
	_, stats := makeSignalObservations(mustSummary(t, f.summary))
	rankMemoryPressure(pods, stats)
	var order []string
	for _, p := range pods {
		order = append(order, p.Name)
	}
	want := "static low-priority-small high-priority-big system-critical under-request-huge"
	if strings.Join(order, " ") != want {
		t.Errorf("ranked %v, want %s: above request first, then lower priority, then usage above request", order, want)
	}
	if !kubetypes.IsCriticalPod(critical) || !kubetypes.IsCriticalPod(static) {
		t.Fatal("priority 2000000000 and static pods are critical")
	}

	f.summary.set(func(s *fakeSummary) { s.memAvailable = 10 * mi })
	if got := f.sync(t, time.Second); len(got) != 1 || got[0].Name != "low-priority-small" {
		t.Errorf("evicted %v, want the static pod skipped and low-priority-small evicted", got)
	}
}

// A pod with pod-level resources requests what spec.resources says: its
// containers, which ask nothing, do not make it a pod above its request.
func TestMemoryRankingReadsPodLevelRequests(t *testing.T) {
	f := newFixture(t, Config{Thresholds: []Threshold{hardMemory("100Mi")}})
	podLevel := f.addPod("pod-level-under-request", 0, 0, 500*mi, 0, 1)
	podLevel.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: *resource.NewQuantity(900*mi, resource.BinarySI)}}
	f.addPod("no-request-small", 0, 0, 50*mi, 0, 1)
	pods := append([]*v1.Pod{}, f.pods...)
	_, stats := makeSignalObservations(mustSummary(t, f.summary))
	rankMemoryPressure(pods, stats)
	if pods[0].Name != "no-request-small" {
		t.Errorf("ranked %s first, want no-request-small: the other is under its pod-level request", pods[0].Name)
	}
}

// An evicted pod with a pod-level memory request is named, with its
// usage, before its containers (upstream's podMessageFmt).
func TestEvictionMessageNamesAPodLevelRequest(t *testing.T) {
	f := newFixture(t, Config{Thresholds: []Threshold{hardMemory("100Mi")}})
	pod := f.addPod("web", 0, 0, 300*mi, 0, 1)
	pod.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("100Mi")}}
	_, stats := makeSignalObservations(mustSummary(t, f.summary))
	msg, annotations := evictionMessage(v1.ResourceMemory, pod, stats, nil, nil)
	want := "The node was low on resource: memory. Pod web was using 300Mi, request is 100Mi, has larger consumption of memory. " +
		"Container c was using 300Mi, request is 0, has larger consumption of memory. "
	if msg != want {
		t.Errorf("message %q, want %q", msg, want)
	}
	if annotations[OffendingPodKey] != "web" || annotations[OffendingPodUsageKey] != "300Mi" {
		t.Errorf("annotations %v, want the pod and its usage", annotations)
	}
}

func mustSummary(t *testing.T, s SummaryProvider) *statsapi.Summary {
	t.Helper()
	sum, err := s.Get(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func TestSoftThresholdWaitsForItsGracePeriod(t *testing.T) {
	soft := hardMemory("300Mi")
	soft.GracePeriod = 30 * time.Second
	f := newFixture(t, Config{Thresholds: []Threshold{soft}, PressureTransitionPeriod: time.Minute, MaxPodGracePeriodSeconds: 20})
	f.addPod("best-effort", 0, 0, 500*mi, 0, 1)
	f.summary.set(func(s *fakeSummary) { s.memAvailable = 200 * mi })

	if got := f.sync(t, time.Second); got != nil {
		t.Fatalf("evicted %v at once on a soft threshold", got)
	}
	if !f.manager.IsUnderMemoryPressure() {
		t.Error("the condition is set when the threshold is met, grace period or not")
	}
	if got := f.sync(t, 29*time.Second); got != nil {
		t.Fatalf("evicted %v after 29s of a 30s grace period", got)
	}
	got := f.sync(t, time.Second)
	if len(got) != 1 {
		t.Fatalf("evicted %v after 30s, want best-effort", got)
	}
	if g := f.killer.killed[0].grace; g != 20 {
		t.Errorf("grace period override %d, want evictionMaxPodGracePeriod 20", g)
	}

	// A pod asking for less keeps its own.
	five := int64(5)
	f.addPod("quick", 0, 0, 600*mi, 0, 1).Spec.TerminationGracePeriodSeconds = &five
	f.sync(t, 10*time.Second)
	if k := f.killer.killed; len(k) != 2 || k[1].pod.Name != "quick" || k[1].grace != 5 {
		t.Errorf("killed %v, want quick with its own 5s grace period (below the 20s maximum)", f.killer.names())
	}
}

func TestSoftThresholdClearedWithinGracePeriodStartsOver(t *testing.T) {
	soft := hardMemory("300Mi")
	soft.GracePeriod = 30 * time.Second
	f := newFixture(t, Config{Thresholds: []Threshold{soft}})
	f.addPod("best-effort", 0, 0, 500*mi, 0, 1)
	f.summary.set(func(s *fakeSummary) { s.memAvailable = 200 * mi })
	f.sync(t, time.Second)
	f.summary.set(func(s *fakeSummary) { s.memAvailable = 400 * mi })
	f.sync(t, 20*time.Second)
	f.summary.set(func(s *fakeSummary) { s.memAvailable = 200 * mi })
	if got := f.sync(t, 20*time.Second); got != nil {
		t.Fatalf("evicted %v: the grace period should count from the threshold's return", got)
	}
	if got := f.sync(t, 30*time.Second); len(got) != 1 {
		t.Fatalf("evicted %v, want one pod 30s after the threshold's return", got)
	}
}

func TestPressureTransitionPeriodKeepsTheCondition(t *testing.T) {
	f := newFixture(t, Config{Thresholds: []Threshold{hardMemory("100Mi")}, PressureTransitionPeriod: 5 * time.Minute})
	f.summary.set(func(s *fakeSummary) { s.memAvailable = 50 * mi })
	f.sync(t, time.Second)
	if !f.manager.IsUnderMemoryPressure() {
		t.Fatal("want MemoryPressure")
	}
	f.summary.set(func(s *fakeSummary) { s.memAvailable = 800 * mi })
	f.sync(t, 10*time.Second)
	if !f.manager.IsUnderMemoryPressure() {
		t.Fatal("MemoryPressure cleared at once; it should stay for the transition period")
	}
	f.sync(t, 5*time.Minute-10*time.Second-time.Nanosecond)
	if !f.manager.IsUnderMemoryPressure() {
		t.Fatal("MemoryPressure cleared before 5m")
	}
	f.sync(t, time.Nanosecond)
	if f.manager.IsUnderMemoryPressure() {
		t.Fatal("MemoryPressure still set 5m after the threshold was last met")
	}
}

func TestMinimumReclaimKeepsEvicting(t *testing.T) {
	th := hardMemory("100Mi")
	th.MinReclaim = &ThresholdValue{Quantity: quantity("200Mi")}
	f := newFixture(t, Config{Thresholds: []Threshold{th}})
	f.addPod("a", 0, 0, 300*mi, 0, 1)
	f.addPod("b", 0, 0, 200*mi, 0, 1)
	f.addPod("c", 0, 0, 100*mi, 0, 1)
	f.summary.set(func(s *fakeSummary) { s.memAvailable = 50 * mi })
	if got := f.sync(t, time.Second); len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("pass 1 evicted %v, want [a]", got)
	}
	f.pods = f.pods[1:]
	// Above the threshold (100Mi) but not past it by the minimum reclaim.
	f.summary.set(func(s *fakeSummary) { s.memAvailable = 150 * mi })
	if got := f.sync(t, 10*time.Second); len(got) != 1 || got[0].Name != "b" {
		t.Fatalf("pass 2 evicted %v, want [b]: 150Mi < 100Mi + 200Mi minimum reclaim", got)
	}
	f.pods = f.pods[1:]
	f.summary.set(func(s *fakeSummary) { s.memAvailable = 350 * mi })
	if got := f.sync(t, 10*time.Second); got != nil {
		t.Fatalf("pass 3 evicted %v with 350Mi free", got)
	}
}

func TestStaleStatsEvictOnce(t *testing.T) {
	f := newFixture(t, Config{Thresholds: []Threshold{hardMemory("100Mi")}})
	f.addPod("a", 0, 0, 300*mi, 0, 1)
	f.addPod("b", 0, 0, 200*mi, 0, 1)
	f.summary.set(func(s *fakeSummary) { s.memAvailable = 50 * mi })
	f.sync(t, time.Second)
	f.sync(t, 0) // same clock: the stats are the same reading
	if got := f.killer.names(); len(got) != 1 {
		t.Fatalf("killed %v, want one: the second pass saw no new stats", got)
	}
}

func TestDiskPressureReclaimsBeforeEvicting(t *testing.T) {
	imagefs := Threshold{Signal: SignalImageFsAvailable, Operator: OpLessThan, Value: ThresholdValue{Percentage: 0.15}}
	f := newFixture(t, Config{Thresholds: []Threshold{imagefs}, PressureTransitionPeriod: time.Minute})
	f.addPod("a", 0, 0, 10*mi, 100*mi, 1)
	f.summary.set(func(s *fakeSummary) { s.imageFsAvailable = 100 * mi }) // 10% free
	f.imageGC.hook = func() { f.summary.set(func(s *fakeSummary) { s.imageFsAvailable = 400 * mi }) }

	if got := f.sync(t, time.Second); got != nil {
		t.Fatalf("evicted %v though image GC freed enough", got)
	}
	if strings.Join(f.gcCalls, ",") != "containers,images" {
		t.Errorf("reclaim calls %v, want containers then images", f.gcCalls)
	}
	if !f.manager.IsUnderDiskPressure() || f.manager.IsUnderMemoryPressure() {
		t.Error("want DiskPressure (the threshold was met this pass)")
	}
	if ev := f.events(); len(ev) != 1 || ev[0] != "Warning EvictionThresholdMet Attempting to reclaim ephemeral-storage" {
		t.Errorf("events %q", ev)
	}
}

func TestDiskPressureEvictsWhenReclaimIsNotEnough(t *testing.T) {
	nodefs := Threshold{Signal: SignalNodeFsAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: quantity("100Mi")}}
	f := newFixture(t, Config{Thresholds: []Threshold{nodefs}})
	f.addPod("small-writer", 0, 0, 10*mi, 50*mi, 1)
	f.addPod("big-writer", 0, 0, 10*mi, 600*mi, 1)
	f.addPod("important-big-writer", 100, 0, 10*mi, 700*mi, 1)
	f.summary.set(func(s *fakeSummary) { s.nodeFsAvailable = 20 * mi })
	f.contGC.hook = func() { f.summary.set(func(s *fakeSummary) { s.nodeFsAvailable = 60 * mi }) }

	got := f.sync(t, time.Second)
	if len(got) != 1 || got[0].Name != "big-writer" {
		t.Fatalf("evicted %v, want [big-writer]: lowest priority, then most disk", got)
	}
	if len(f.gcCalls) != 2 {
		t.Errorf("reclaim calls %v, want both before evicting", f.gcCalls)
	}
	wantMsg := "The node was low on resource: ephemeral-storage. Threshold quantity: 100Mi, available: 20Mi. " +
		"Container c was using 600Mi, request is 0, has larger consumption of ephemeral-storage. "
	if m := f.killer.killed[0].status.Message; m != wantMsg {
		t.Errorf("message %q, want %q", m, wantMsg)
	}
}

func TestPIDPressureRanksByPriorityThenProcesses(t *testing.T) {
	pid := Threshold{Signal: SignalPIDAvailable, Operator: OpLessThan, Value: ThresholdValue{Percentage: 0.1}}
	f := newFixture(t, Config{Thresholds: []Threshold{pid}})
	f.addPod("few", 0, 0, 0, 0, 5)
	f.addPod("many", 0, 0, 0, 0, 500)
	f.addPod("important-many", 10, 0, 0, 0, 900)
	f.manager.config.PressureTransitionPeriod = time.Minute
	f.summary.set(func(s *fakeSummary) { s.processes = 950 }) // 50 of 1000 left
	got := f.sync(t, time.Second)
	if len(got) != 1 || got[0].Name != "many" {
		t.Fatalf("evicted %v, want [many]", got)
	}
	if !f.manager.IsUnderPIDPressure() {
		t.Error("want PIDPressure")
	}
}

func TestAdmit(t *testing.T) {
	f := newFixture(t, Config{Thresholds: []Threshold{hardMemory("100Mi"),
		{Signal: SignalNodeFsAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: quantity("100Mi")}}},
		PressureTransitionPeriod: time.Minute})
	bestEffort := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "be"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	tolerating := bestEffort.DeepCopy()
	tolerating.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	burstable := bestEffort.DeepCopy()
	burstable.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("10Mi")}
	prio := int32(2000001000)
	critical := bestEffort.DeepCopy()
	critical.Spec.Priority = &prio
	podLevel := bestEffort.DeepCopy() // containers without resources, a pod-level request: Burstable
	podLevel.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("10Mi")}}
	admit := func(p *v1.Pod) lifecycle.PodAdmitResult {
		return f.manager.Admit(context.Background(), &lifecycle.PodAdmitAttributes{Pod: p})
	}

	if r := admit(bestEffort); !r.Admit {
		t.Fatalf("no pressure: refused %+v", r)
	}

	f.summary.set(func(s *fakeSummary) { s.memAvailable = 50 * mi })
	f.sync(t, time.Second)
	r := admit(bestEffort)
	if r.Admit || r.Reason != "Evicted" || r.Message != "The node had condition: [MemoryPressure]. " {
		t.Errorf("memory pressure, BestEffort: %+v", r)
	}
	for _, p := range []*v1.Pod{tolerating, burstable, critical, podLevel} {
		if r := admit(p); !r.Admit {
			t.Errorf("memory pressure: refused %v: %+v", p.Spec, r)
		}
	}

	f.summary.set(func(s *fakeSummary) { s.memAvailable = 800 * mi; s.nodeFsAvailable = 50 * mi })
	f.sync(t, 10*time.Minute) // past the 1m transition period: memory clears
	r = admit(burstable)
	if r.Admit || r.Reason != "Evicted" || r.Message != "The node had condition: [DiskPressure]. " {
		t.Errorf("disk pressure, Burstable: %+v", r)
	}
	if r := admit(critical); !r.Admit {
		t.Errorf("disk pressure: refused a critical pod: %+v", r)
	}
}

func TestRunEvictsThenWaitsForCleanupAndStops(t *testing.T) {
	f := newFixture(t, Config{Thresholds: []Threshold{hardMemory("100Mi")}})
	f.killer.ch = make(chan killed, 1)
	f.addPod("a", 0, 0, 300*mi, 0, 1)
	f.summary.set(func(s *fakeSummary) { s.memAvailable = 50 * mi })
	var mu sync.Mutex
	var active []*v1.Pod = f.pods
	cleanedUp := make(chan string, 1)
	f.summary.onGet = make(chan int, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.manager.Run(ctx,
			func() []*v1.Pod { mu.Lock(); defer mu.Unlock(); return active },
			func(p *v1.Pod) bool { cleanedUp <- p.Name; return true },
			time.Minute)
	}()
	k := <-f.killer.ch
	if k.pod.Name != "a" {
		t.Fatalf("killed %s", k.pod.Name)
	}
	mu.Lock()
	active = nil
	mu.Unlock()
	// The manager now polls podCleanedUpFunc every second on its clock.
	for !f.clock.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	f.clock.Step(time.Second)
	if name := <-cleanedUp; name != "a" {
		t.Fatalf("cleanup asked about %s", name)
	}
	// A second pass follows the cleanup at once, without the interval.
	for n := <-f.summary.onGet; n < 2; n = <-f.summary.onGet {
	}
	cancel()
	<-done
}
