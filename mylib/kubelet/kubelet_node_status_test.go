package kubelet

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"mykubelet/mylib/cadvisor"
	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/nodestatus"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fixture is a Kubelet on a fake clientset and a fake clock, with a memory
// pressure switch to make the status change.
type fixture struct {
	cs       *fake.Clientset
	clock    *testingclock.FakeClock
	kl       *Kubelet
	mu       sync.Mutex
	pressure bool
	counts   map[string]int // node actions by verb
	reasons  []string       // OnStatusPatched reasons
}

func newFixture(t *testing.T, objects ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{cs: fake.NewClientset(objects...), clock: testingclock.NewFakeClock(t0), counts: map[string]int{}}
	f.cs.PrependReactor("*", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.mu.Lock()
		f.counts[a.GetVerb()]++
		f.mu.Unlock()
		return false, nil, nil
	})
	pressure := func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.pressure }
	now := f.clock.Now
	kl, err := New(Config{Client: f.cs, NodeName: "n1", Clock: f.clock, Node: &NodeConfig{
		Labels: map[string]string{"example.com/team": "a"},
		Setters: []nodestatus.Setter{
			nodestatus.MachineInfo(nodestatus.DefaultMaxPods, func() (*cadvisor.MachineInfo, error) {
				return &cadvisor.MachineInfo{NumCores: 2, MemoryCapacity: 4 << 30, EphemeralStorageCapacity: 10 << 30}, nil
			}, nil, nodestatus.NodeAllocatableReservation(nil, nil)),
			nodestatus.MemoryPressureCondition(now, pressure),
			nodestatus.DiskPressureCondition(now, nodestatus.NoPressure),
			nodestatus.PIDPressureCondition(now, nodestatus.NoPressure),
			nodestatus.ReadyCondition(now, nil, nodestatus.RequiredCapacities),
		},
		OnStatusPatched: func(_ *v1.Node, _ []byte, reason string) {
			f.mu.Lock()
			f.reasons = append(f.reasons, reason)
			f.mu.Unlock()
		},
	}})
	require.NoError(t, err)
	f.kl = kl
	return f
}

func (f *fixture) count(verb string) int { f.mu.Lock(); defer f.mu.Unlock(); return f.counts[verb] }

func (f *fixture) setPressure(p bool) { f.mu.Lock(); f.pressure = p; f.mu.Unlock() }

func (f *fixture) node(t *testing.T) *v1.Node {
	t.Helper()
	obj, err := f.cs.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", "n1")
	require.NoError(t, err)
	return obj.(*v1.Node)
}

func TestRegisterCreatesTheNode(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.kl.RegisterWithAPIServer(context.Background()))
	n := f.node(t)
	assert.Equal(t, "n1", n.Labels[v1.LabelHostname])
	assert.NotEmpty(t, n.Labels[v1.LabelOSStable])
	assert.NotEmpty(t, n.Labels[v1.LabelArchStable])
	assert.Equal(t, "a", n.Labels["example.com/team"])
	assert.Equal(t, "true", n.Annotations[ControllerManagedAttachAnnotation])
	_, ready := nodestatus.GetNodeCondition(&n.Status, v1.NodeReady)
	require.NotNil(t, ready, "the node is created with its status")
	assert.Equal(t, v1.ConditionTrue, ready.Status)

	// Registering again does nothing.
	require.NoError(t, f.kl.RegisterWithAPIServer(context.Background()))
	assert.Equal(t, 1, f.count("create"))
}

func TestRegisterAdoptsAndReconcilesAnExistingNode(t *testing.T) {
	existing := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"mine": "kept", v1.LabelHostname: "old"}}}
	f := newFixture(t, existing)
	require.NoError(t, f.kl.RegisterWithAPIServer(context.Background()))
	n := f.node(t)
	assert.Equal(t, "kept", n.Labels["mine"], "others' labels stay")
	assert.Equal(t, "n1", n.Labels[v1.LabelHostname], "default labels are corrected")
	assert.Equal(t, "true", n.Annotations[ControllerManagedAttachAnnotation])
	assert.Contains(t, n.Status.Capacity, v1.ResourceCPU, "missing capacity is filled in")
	assert.Equal(t, 1, f.count("patch"))

	// A node that already matches is adopted without a write.
	g := newFixture(t, n)
	require.NoError(t, g.kl.RegisterWithAPIServer(context.Background()))
	assert.Equal(t, 0, g.count("patch"))
}

func TestRegisterGivesUpOnForbidden(t *testing.T) {
	f := newFixture(t)
	f.cs.PrependReactor("*", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n1", nil)
	})
	err := f.kl.RegisterWithAPIServer(context.Background())
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), err)
}

func TestStatusWrittenOnlyOnChangeOrEveryFiveMinutes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.kl.SyncNodeStatus(ctx) // registers and writes the first report
	require.Equal(t, 1, f.count("create"))
	require.Equal(t, 1, f.count("patch"))

	// Every 10 s for just under 5 min nothing changes: no write.
	for range 29 {
		f.clock.Step(10 * time.Second)
		f.kl.SyncNodeStatus(ctx)
	}
	assert.Equal(t, 1, f.count("patch"), "nothing changed, no write before 5 min")

	// At 5 min: written though nothing changed, and the heartbeat moves.
	f.clock.Step(10 * time.Second)
	f.kl.SyncNodeStatus(ctx)
	assert.Equal(t, 2, f.count("patch"))
	_, ready := nodestatus.GetNodeCondition(&f.node(t).Status, v1.NodeReady)
	assert.True(t, ready.LastHeartbeatTime.Time.Equal(t0.Add(5*time.Minute)), "heartbeat %v", ready.LastHeartbeatTime)

	// A change is written at the next sync, whatever the period.
	f.clock.Step(10 * time.Second)
	f.setPressure(true)
	f.kl.SyncNodeStatus(ctx)
	assert.Equal(t, 3, f.count("patch"))
	_, mem := nodestatus.GetNodeCondition(&f.node(t).Status, v1.NodeMemoryPressure)
	assert.Equal(t, v1.ConditionTrue, mem.Status)
	assert.True(t, mem.LastTransitionTime.Time.Equal(t0.Add(5*time.Minute+10*time.Second)))

	// And the 5 min count starts again from that write.
	for range 29 {
		f.clock.Step(10 * time.Second)
		f.kl.SyncNodeStatus(ctx)
	}
	assert.Equal(t, 3, f.count("patch"))
	f.clock.Step(10 * time.Second)
	f.kl.SyncNodeStatus(ctx)
	assert.Equal(t, 4, f.count("patch"))
	assert.Equal(t, []string{"first report", "report period expired", "status changed", "report period expired"}, f.reasons)
}

func TestStatusRewrittenWhenSomeoneElseChangedIt(t *testing.T) {
	// The node lifecycle controller sets Ready=Unknown while the kubelet
	// was away; the next sync sees the difference and writes Ready=True.
	f := newFixture(t)
	ctx := context.Background()
	f.kl.SyncNodeStatus(ctx)
	n := f.node(t).DeepCopy()
	_, ready := nodestatus.GetNodeCondition(&n.Status, v1.NodeReady)
	ready.Status, ready.Reason = v1.ConditionUnknown, "NodeStatusUnknown"
	require.NoError(t, f.cs.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, n, ""))

	f.clock.Step(10 * time.Second)
	f.kl.SyncNodeStatus(ctx)
	assert.Equal(t, 2, f.count("patch"))
	_, ready = nodestatus.GetNodeCondition(&f.node(t).Status, v1.NodeReady)
	assert.Equal(t, v1.ConditionTrue, ready.Status)
	assert.True(t, ready.LastTransitionTime.Time.Equal(t0.Add(10*time.Second)))
}

// timerClock records the waits asked of a fake clock.
type timerClock struct {
	*testingclock.FakeClock
	mu    sync.Mutex
	waits []time.Duration
}

func (c *timerClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	return c.FakeClock.NewTimer(d)
}

func TestRunSyncsEveryTenSeconds(t *testing.T) {
	f := newFixture(t)
	tc := &timerClock{FakeClock: f.clock}
	f.kl.clock = tc
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.kl.syncNodeStatusLoop(ctx); close(done) }()
	for i := 1; i <= 3; i++ {
		require.Eventually(t, func() bool { return f.count("get") == i && f.clock.HasWaiters() }, 5*time.Second, time.Millisecond)
		f.clock.Step(10 * time.Second)
	}
	cancel()
	<-done
	tc.mu.Lock()
	defer tc.mu.Unlock()
	assert.Equal(t, []time.Duration{10 * time.Second, 10 * time.Second, 10 * time.Second}, tc.waits[:3])
}

// A read right after our own write may come from the API server's watch
// cache, from before the write. The fixture's fake API serves that stale
// copy to every get after the first write.
func TestRunAfterAFirstReportWaitsBeforeItSyncsAgain(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.kl.SyncNodeStatus(ctx) // the caller's own first report
	require.Equal(t, 1, f.count("patch"))
	stale := f.node(t).DeepCopy()
	stale.Status = v1.NodeStatus{}
	f.cs.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, stale.DeepCopy(), nil
	})
	tc := &timerClock{FakeClock: f.clock}
	f.kl.clock = tc
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { f.kl.syncNodeStatusLoop(ctx); close(done) }()
	require.Eventually(t, f.clock.HasWaiters, 5*time.Second, time.Millisecond)
	assert.Equal(t, 1, f.count("get"), "no read before the first period")
	assert.Equal(t, 1, f.count("patch"), "no second write at once")
	cancel()
	<-done
	tc.mu.Lock()
	defer tc.mu.Unlock()
	assert.Equal(t, []time.Duration{10 * time.Second}, tc.waits)
}

func TestNodeStatusHasChanged(t *testing.T) {
	a := &v1.NodeStatus{
		Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
		Conditions: []v1.NodeCondition{
			{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(t0)},
			{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, LastHeartbeatTime: metav1.NewTime(t0)},
		},
	}
	b := a.DeepCopy()
	b.Conditions[0], b.Conditions[1] = b.Conditions[1], b.Conditions[0]
	b.Conditions[0].LastHeartbeatTime = metav1.NewTime(t0.Add(time.Hour))
	assert.False(t, NodeStatusHasChanged(a, b), "order and heartbeat do not count")

	c := b.DeepCopy()
	c.Conditions[1].Status = v1.ConditionUnknown
	assert.True(t, NodeStatusHasChanged(a, c))

	d := a.DeepCopy()
	d.Capacity[v1.ResourceCPU] = resource.MustParse("2")
	assert.True(t, NodeStatusHasChanged(a, d))
}

func TestNewRejectsBadConfig(t *testing.T) {
	cs := fake.NewClientset()
	set := []nodestatus.Setter{nodestatus.GoRuntime()}
	for name, cfg := range map[string]Config{
		"no client":            {NodeName: "n1", Node: &NodeConfig{Setters: set}},
		"no node name":         {Client: cs, Node: &NodeConfig{Setters: set}},
		"no half":              {Client: cs, NodeName: "n1"},
		"no setters":           {Client: cs, NodeName: "n1", Node: &NodeConfig{}},
		"report before update": {Client: cs, NodeName: "n1", Node: &NodeConfig{Setters: set, NodeStatusUpdateFrequency: time.Minute, NodeStatusReportFrequency: time.Second}},
		"negative update":      {Client: cs, NodeName: "n1", Node: &NodeConfig{Setters: set, NodeStatusUpdateFrequency: -time.Second}},
		"pods without runtime": {Client: cs, NodeName: "n1", Pods: &PodsConfig{Updates: make(chan kubetypes.PodUpdate)}},
		"pods without updates": {Client: cs, NodeName: "n1", Pods: &PodsConfig{Runtime: emptyRuntime{}}},
		"negative housekeeping": {Client: cs, NodeName: "n1", Pods: &PodsConfig{Updates: make(chan kubetypes.PodUpdate), Runtime: emptyRuntime{},
			HousekeepingPeriod: -time.Second}},
	} {
		_, err := New(cfg)
		assert.Error(t, err, name)
	}
	kl, err := New(Config{Client: cs, NodeName: "n1", Node: &NodeConfig{Setters: set}})
	require.NoError(t, err)
	assert.Equal(t, 10*time.Second, kl.node.nodeStatusUpdateFrequency)
	assert.Equal(t, 5*time.Minute, kl.node.nodeStatusReportFrequency)
	assert.Equal(t, 10*time.Second, kl.LeaseRenewInterval())
	assert.ErrorContains(t, kl.RunPods(context.Background()), "RunPods needs Config.Pods")
}

func TestAnnotationsOnANewNodeAndOverwrittenOnAnExistingOne(t *testing.T) {
	const key = "example.com/program"
	// A new node is created with them.
	f := newFixture(t)
	f.kl.node.annotations = map[string]string{key: "second"}
	require.NoError(t, f.kl.RegisterWithAPIServer(context.Background()))
	assert.Equal(t, "second", f.node(t).Annotations[key])
	assert.Equal(t, "true", f.node(t).Annotations[ControllerManagedAttachAnnotation])
	assert.Equal(t, 0, f.count("patch"))

	// An existing node that an earlier program annotated: the value is
	// replaced at registration, other annotations stay.
	existing := f.node(t).DeepCopy()
	existing.Annotations[key] = "first"
	existing.Annotations["someone.else/note"] = "kept"
	g := newFixture(t, existing)
	g.kl.node.annotations = map[string]string{key: "second"}
	require.NoError(t, g.kl.RegisterWithAPIServer(context.Background()))
	assert.Equal(t, "second", g.node(t).Annotations[key])
	assert.Equal(t, "kept", g.node(t).Annotations["someone.else/note"])
	assert.Equal(t, 1, g.count("patch"))

	// Registering again with the same value: adopted without a write.
	h := newFixture(t, g.node(t))
	h.kl.node.annotations = map[string]string{key: "second"}
	require.NoError(t, h.kl.RegisterWithAPIServer(context.Background()))
	assert.Equal(t, 0, h.count("patch"))
}

func TestNodeConfigAnnotationsReachTheNodeHalf(t *testing.T) {
	kl, err := New(Config{Client: fake.NewClientset(), NodeName: "n1", Node: &NodeConfig{
		Annotations: map[string]string{"example.com/program": "p"},
		Setters:     []nodestatus.Setter{nodestatus.ReadyCondition(time.Now, nil, nil)},
	}})
	require.NoError(t, err)
	n, err := kl.InitialNode(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "p", n.Annotations["example.com/program"])
}
