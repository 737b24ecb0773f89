package nodestatus

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"mykubelet/mylib/cadvisor"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func conditionSetters(now func() time.Time, memoryPressure func() bool) []Setter {
	return []Setter{
		MemoryPressureCondition(now, memoryPressure),
		DiskPressureCondition(now, NoPressure),
		PIDPressureCondition(now, NoPressure),
		ReadyCondition(now, nil, nil),
	}
}

func apply(t *testing.T, node *v1.Node, setters []Setter) {
	t.Helper()
	for _, set := range setters {
		require.NoError(t, set(context.Background(), node))
	}
}

func TestConditionsOnANewNode(t *testing.T) {
	fc := testingclock.NewFakeClock(t0)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	apply(t, node, conditionSetters(fc.Now, NoPressure))

	want := []struct {
		typ     v1.NodeConditionType
		status  v1.ConditionStatus
		reason  string
		message string
	}{
		{v1.NodeMemoryPressure, v1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"},
		{v1.NodeDiskPressure, v1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
		{v1.NodePIDPressure, v1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"},
		{v1.NodeReady, v1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"},
	}
	require.Len(t, node.Status.Conditions, len(want))
	for i, w := range want {
		c := node.Status.Conditions[i] // new conditions are appended in order, Ready last
		assert.Equal(t, w.typ, c.Type)
		assert.Equal(t, w.status, c.Status, w.typ)
		assert.Equal(t, w.reason, c.Reason, w.typ)
		assert.Equal(t, w.message, c.Message, w.typ)
		assert.True(t, c.LastHeartbeatTime.Time.Equal(t0), w.typ)
		assert.True(t, c.LastTransitionTime.Time.Equal(t0), w.typ)
	}
}

func TestConditionsAreFoundByTypeNotIndex(t *testing.T) {
	// Another component's condition first, and the kubelet's in another
	// order: each setter must change its own condition only.
	fc := testingclock.NewFakeClock(t0)
	other := v1.NodeCondition{Type: "NetworkUnavailable", Status: v1.ConditionFalse, Reason: "RouteCreated"}
	node := &v1.Node{Status: v1.NodeStatus{Conditions: []v1.NodeCondition{
		other,
		{Type: v1.NodeReady, Status: v1.ConditionUnknown, Reason: "NodeStatusUnknown"},
		{Type: v1.NodePIDPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientPID"},
	}}}
	apply(t, node, conditionSetters(fc.Now, NoPressure))

	require.Len(t, node.Status.Conditions, 5)
	assert.Equal(t, other, node.Status.Conditions[0])
	_, ready := GetNodeCondition(&node.Status, v1.NodeReady)
	assert.Equal(t, v1.ConditionTrue, ready.Status)
	assert.Equal(t, v1.NodeReady, node.Status.Conditions[1].Type, "Ready stays where it was")
	i, mem := GetNodeCondition(&node.Status, v1.NodeMemoryPressure)
	assert.Equal(t, 3, i, "a missing condition is appended")
	assert.Equal(t, v1.ConditionFalse, mem.Status)
	i, _ = GetNodeCondition(&node.Status, "NoSuchCondition")
	assert.Equal(t, -1, i)
}

func TestHeartbeatAndTransitionTimes(t *testing.T) {
	fc := testingclock.NewFakeClock(t0)
	pressure := false
	setters := conditionSetters(fc.Now, func() bool { return pressure })
	node := &v1.Node{}
	apply(t, node, setters)

	// Same status later: only the heartbeat moves.
	fc.Step(time.Minute)
	apply(t, node, setters)
	_, mem := GetNodeCondition(&node.Status, v1.NodeMemoryPressure)
	assert.True(t, mem.LastHeartbeatTime.Time.Equal(t0.Add(time.Minute)))
	assert.True(t, mem.LastTransitionTime.Time.Equal(t0))

	// Status changes: the transition time moves too.
	fc.Step(time.Minute)
	pressure = true
	apply(t, node, setters)
	_, mem = GetNodeCondition(&node.Status, v1.NodeMemoryPressure)
	assert.Equal(t, v1.ConditionTrue, mem.Status)
	assert.Equal(t, "KubeletHasInsufficientMemory", mem.Reason)
	assert.True(t, mem.LastTransitionTime.Time.Equal(t0.Add(2*time.Minute)))

	// The node lifecycle controller set Ready to Unknown; posting True
	// again is a transition.
	_, ready := GetNodeCondition(&node.Status, v1.NodeReady)
	ready.Status = v1.ConditionUnknown
	fc.Step(time.Minute)
	apply(t, node, setters)
	_, ready = GetNodeCondition(&node.Status, v1.NodeReady)
	assert.Equal(t, v1.ConditionTrue, ready.Status)
	assert.True(t, ready.LastTransitionTime.Time.Equal(t0.Add(3*time.Minute)))
}

func TestReadyConditionNotReady(t *testing.T) {
	fc := testingclock.NewFakeClock(t0)
	node := &v1.Node{}
	require.NoError(t, ReadyCondition(fc.Now, func() error { return errors.New("container runtime is down") }, RequiredCapacities)(context.Background(), node))
	_, ready := GetNodeCondition(&node.Status, v1.NodeReady)
	assert.Equal(t, v1.ConditionFalse, ready.Status)
	assert.Equal(t, "KubeletNotReady", ready.Reason)
	assert.Equal(t, "container runtime is down; missing node capacity for resources: cpu, memory, pods, ephemeral-storage", ready.Message)

	// With capacity and no runtime error: Ready.
	node.Status.Capacity = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi"),
		v1.ResourcePods: resource.MustParse("110"), v1.ResourceEphemeralStorage: resource.MustParse("1Gi")}
	require.NoError(t, ReadyCondition(fc.Now, func() error { return nil }, RequiredCapacities)(context.Background(), node))
	_, ready = GetNodeCondition(&node.Status, v1.NodeReady)
	assert.Equal(t, v1.ConditionTrue, ready.Status)
	assert.Equal(t, "KubeletReady", ready.Reason)
}

var machine = &cadvisor.MachineInfo{MachineID: "m", SystemUUID: "u", BootID: "b", KernelVersion: "6.1.0", OSImage: "Debian GNU/Linux 12 (bookworm)",
	NumCores: 4, MemoryCapacity: 8 << 30, EphemeralStorageCapacity: 100 << 30}

func machineInfo() (*cadvisor.MachineInfo, error) { return machine, nil }

func TestMachineInfoCapacityAndAllocatable(t *testing.T) {
	node := &v1.Node{Status: v1.NodeStatus{
		Capacity:    v1.ResourceList{"example.com/gpu": resource.MustParse("2")},
		Allocatable: v1.ResourceList{"example.com/gpu": resource.MustParse("2")},
	}}
	reserved := NodeAllocatableReservation(v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")}, v1.ResourceList{v1.ResourceMemory: resource.MustParse("156Mi")})
	set := MachineInfo(DefaultMaxPods, machineInfo, v1.ResourceList{v1.ResourcePods: resource.MustParse("20")}, reserved)
	require.NoError(t, set(context.Background(), node))

	q := func(l v1.ResourceList, n v1.ResourceName) string { v := l[n]; return v.String() }
	assert.Equal(t, "4", q(node.Status.Capacity, v1.ResourceCPU))
	assert.Equal(t, "8Gi", q(node.Status.Capacity, v1.ResourceMemory))
	assert.Equal(t, "100Gi", q(node.Status.Capacity, v1.ResourceEphemeralStorage))
	assert.Equal(t, "20", q(node.Status.Capacity, v1.ResourcePods), "the override wins")
	assert.Equal(t, "2", q(node.Status.Capacity, "example.com/gpu"), "others' resources are kept")

	assert.Equal(t, "3500m", q(node.Status.Allocatable, v1.ResourceCPU))
	assert.Equal(t, "7936Mi", q(node.Status.Allocatable, v1.ResourceMemory), "8Gi - 156Mi kube-reserved - 100Mi eviction")
	assert.Equal(t, "90Gi", q(node.Status.Allocatable, v1.ResourceEphemeralStorage), "10% kept for eviction")
	assert.Equal(t, "20", q(node.Status.Allocatable, v1.ResourcePods))
	assert.Equal(t, "m", node.Status.NodeInfo.MachineID)
	assert.Equal(t, "u", node.Status.NodeInfo.SystemUUID)
	assert.Equal(t, "b", node.Status.NodeInfo.BootID)

	// A reservation larger than capacity gives 0, never negative.
	huge := NodeAllocatableReservation(v1.ResourceList{v1.ResourceCPU: resource.MustParse("64")}, nil)
	require.NoError(t, MachineInfo(DefaultMaxPods, machineInfo, nil, huge)(context.Background(), node))
	assert.Equal(t, "0", q(node.Status.Allocatable, v1.ResourceCPU))
	assert.Equal(t, "110", q(node.Status.Capacity, v1.ResourcePods))
}

func TestVersionInfoGoRuntimeDaemonEndpoints(t *testing.T) {
	node := &v1.Node{Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{KubeProxyVersion: "v1.22.0"}}}
	runtimeVersion := func(context.Context) (string, error) { return "mock://0.1.0", nil }
	apply(t, node, []Setter{VersionInfo(machineInfo, runtimeVersion, "v1.37.1-mykubelet"), GoRuntime(), DaemonEndpoints(DefaultKubeletPort)})
	info := node.Status.NodeInfo
	assert.Equal(t, "6.1.0", info.KernelVersion)
	assert.Equal(t, "Debian GNU/Linux 12 (bookworm)", info.OSImage)
	assert.Equal(t, "mock://0.1.0", info.ContainerRuntimeVersion)
	assert.Equal(t, "v1.37.1-mykubelet", info.KubeletVersion)
	assert.Empty(t, info.KubeProxyVersion, "deprecated field cleared")
	assert.Equal(t, runtime.GOOS, info.OperatingSystem)
	assert.Equal(t, runtime.GOARCH, info.Architecture)
	assert.Equal(t, int32(10250), node.Status.DaemonEndpoints.KubeletEndpoint.Port)

	broken := func(context.Context) (string, error) { return "", errors.New("no runtime") }
	apply(t, node, []Setter{VersionInfo(machineInfo, broken, "v")})
	assert.Equal(t, "Unknown", node.Status.NodeInfo.ContainerRuntimeVersion)
}

func TestNodeAddress(t *testing.T) {
	resolve := func(net.IP) (net.IP, error) { return net.ParseIP("192.0.2.7"), nil }
	cases := map[string]struct {
		nodeIP   net.IP
		hostname string
		want     string
	}{
		"--node-ip wins":                {net.ParseIP("10.0.0.5"), "n1", "10.0.0.5"},
		"hostname that is an IP":        {nil, "10.1.2.3", "10.1.2.3"},
		"default route interface":       {nil, "n1", "192.0.2.7"},
		"unspecified --node-ip=0.0.0.0": {net.IPv4zero, "n1", "192.0.2.7"},
	}
	for name, c := range cases {
		node := &v1.Node{}
		require.NoError(t, NodeAddress(c.nodeIP, c.hostname, resolve)(context.Background(), node), name)
		assert.Equal(t, []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: c.want}, {Type: v1.NodeHostName, Address: c.hostname}}, node.Status.Addresses, name)
	}
	fail := func(net.IP) (net.IP, error) { return nil, errors.New("no default route") }
	err := NodeAddress(nil, "n1", fail)(context.Background(), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	assert.ErrorContains(t, err, "node n1: cannot find an IP address (set --node-ip): no default route")
}

func TestPatchNodeStatusSendsOnlyTheChange(t *testing.T) {
	fc := testingclock.NewFakeClock(t0)
	old := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: v1.NodeSpec{PodCIDR: "10.0.0.0/24"}}
	apply(t, old, conditionSetters(fc.Now, NoPressure))
	old.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}, {Type: v1.NodeHostName, Address: "n1"}}
	cs := fake.NewClientset(old)

	fc.Step(time.Minute)
	updated := old.DeepCopy()
	updated.Spec.PodCIDR = "changed" // the spec is never sent
	apply(t, updated, conditionSetters(fc.Now, func() bool { return true }))
	stored, patch, err := PatchNodeStatus(context.Background(), cs.CoreV1(), old, updated)
	require.NoError(t, err)

	var p struct {
		Spec   map[string]any `json:"spec"`
		Status struct {
			Conditions []map[string]any `json:"conditions"`
			Addresses  []any            `json:"addresses"`
		} `json:"status"`
	}
	require.NoError(t, json.Unmarshal(patch, &p), string(patch))
	assert.Nil(t, p.Spec, "no spec in a status patch")
	assert.Nil(t, p.Status.Addresses, "unchanged addresses are not sent")
	assert.Len(t, p.Status.Conditions, 4, "every heartbeat moved: %s", patch)
	assert.Equal(t, "10.0.0.0/24", stored.Spec.PodCIDR)
	_, mem := GetNodeCondition(&stored.Status, v1.NodeMemoryPressure)
	assert.Equal(t, v1.ConditionTrue, mem.Status)

	// Changed addresses replace the stored list.
	next := stored.DeepCopy()
	next.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.2"}, {Type: v1.NodeHostName, Address: "n1"}}
	patch, err = PreparePatchBytesForNodeStatus(stored, next)
	require.NoError(t, err)
	assert.JSONEq(t, `{"status":{"addresses":[{"type":"InternalIP","address":"10.0.0.2"},{"type":"Hostname","address":"n1"},{"$patch":"replace"}]}}`, string(patch))
	stored, _, err = PatchNodeStatus(context.Background(), cs.CoreV1(), stored, next)
	require.NoError(t, err)
	assert.Equal(t, next.Status.Addresses, stored.Status.Addresses)
}

func TestResourceListFlag(t *testing.T) {
	var f ResourceListFlag
	require.NoError(t, f.Set("cpu=500m, memory=1Gi"))
	assert.Equal(t, "cpu=500m,memory=1Gi", f.String())
	require.NoError(t, f.Set(""))
	assert.Empty(t, f)
	for _, bad := range []string{"cpu", "cpu=lots", "memory=-1Gi"} {
		assert.Error(t, f.Set(bad), bad)
	}
}

func TestSummaryIsOneLine(t *testing.T) {
	n := &v1.Node{Status: v1.NodeStatus{
		Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi"), v1.ResourcePods: resource.MustParse("110")},
		Conditions: []v1.NodeCondition{
			{Type: v1.NodeReady, Status: v1.ConditionTrue},
			{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse},
		},
	}}
	assert.Equal(t, "MemoryPressure=False Ready=True; capacity cpu=2 memory=4Gi pods=110", Summary(n))
}
