// Package nodestatus fills in a Node's status, one small function per part,
// as the kubelet's pkg/kubelet/nodestatus/setters.go does: addresses,
// capacity and allocatable, system info, daemon endpoints and the four
// conditions (MemoryPressure, DiskPressure, PIDPressure, Ready).
//
// A Setter changes the Node it is given and nothing else; the caller runs
// them in order on a copy of the Node and then decides whether to send the
// result (see PatchNodeStatus):
//
//	setters := []nodestatus.Setter{
//		nodestatus.MemoryPressureCondition(clk.Now, nodestatus.NoPressure),
//		nodestatus.DiskPressureCondition(clk.Now, nodestatus.NoPressure),
//		nodestatus.PIDPressureCondition(clk.Now, nodestatus.NoPressure),
//		nodestatus.ReadyCondition(clk.Now, nil, nil),
//	}
//	node := existing.DeepCopy()
//	for _, set := range setters { _ = set(ctx, node) }
//	_, _, err := nodestatus.PatchNodeStatus(ctx, cs.CoreV1(), existing, node)
//
// Conditions are always found by their type (GetNodeCondition), never by
// their position in the list: other components (the node lifecycle
// controller, for one) write to the same list.
//
// Where it departs from upstream, and why (one line each):
//   - the machine is read from /proc, /sys and /etc (ReadMachine), not from
//     cAdvisor: a few files give the IDs and the capacity;
//   - NodeAddress gives one InternalIP and the Hostname: no cloud provider,
//     no DNS lookup of the node name, no second address family;
//   - no Images, VolumesInUse, VolumeLimits, RuntimeHandlers or
//     NodeFeatures setters: this kubelet keeps no image list and has no
//     volume manager or RuntimeClass support;
//   - the pressure conditions read a function the caller gives
//     (NoPressure without an eviction manager, which this kubelet lacks).
package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"net"
	goruntime "runtime"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Setter updates part of a node's status in place.
type Setter func(ctx context.Context, node *v1.Node) error

// Upstream's defaults used by the setters.
const (
	// DefaultMaxPods is the kubelet's --max-pods.
	DefaultMaxPods = 110
	// DefaultKubeletPort is the kubelet's --port, reported in
	// status.daemonEndpoints.kubeletEndpoint.
	DefaultKubeletPort int32 = 10250
)

// NodeAddress sets status.addresses to the node's InternalIP and Hostname.
// The IP is nodeIP when given (the kubelet's --node-ip); else hostname when
// it is itself an IP; else resolveAddress(nil), which the kubelet does with
// k8s.io/apimachinery/pkg/util/net.ResolveBindAddress: the address of the
// interface that holds the default route. (Upstream also tries a DNS lookup
// of the node name before that last step.)
func NodeAddress(nodeIP net.IP, hostname string, resolveAddress func(net.IP) (net.IP, error)) Setter {
	return func(ctx context.Context, node *v1.Node) error {
		ip := nodeIP
		if ip == nil || ip.IsUnspecified() {
			ip = net.ParseIP(hostname)
		}
		if ip == nil {
			var err error
			if ip, err = resolveAddress(nil); err != nil {
				return fmt.Errorf("node %s: cannot find an IP address (set --node-ip): %w", node.Name, err)
			}
		}
		node.Status.Addresses = []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: ip.String()},
			{Type: v1.NodeHostName, Address: hostname},
		}
		return nil
	}
}

// MachineInfo sets the machine's IDs, status.capacity and status.allocatable.
// Capacity comes from machineInfoFunc (upstream: cAdvisor) plus pods=maxPods;
// a resource in capacityOverride replaces the measured one. Allocatable is
// capacity minus reservationFunc(capacity) (upstream:
// ContainerManager.GetNodeAllocatableReservation), never below zero.
func MachineInfo(maxPods int, machineInfoFunc func() (*Machine, error), capacityOverride v1.ResourceList, reservationFunc func(capacity v1.ResourceList) v1.ResourceList) Setter {
	return func(ctx context.Context, node *v1.Node) error {
		info, err := machineInfoFunc()
		if err != nil {
			return fmt.Errorf("node %s: machine info: %w", node.Name, err)
		}
		node.Status.NodeInfo.MachineID = info.MachineID
		node.Status.NodeInfo.SystemUUID = info.SystemUUID
		node.Status.NodeInfo.BootID = info.BootID

		capacity := v1.ResourceList{
			v1.ResourceCPU:              *resource.NewQuantity(int64(info.NumCores), resource.DecimalSI),
			v1.ResourceMemory:           *resource.NewQuantity(info.MemoryCapacity, resource.BinarySI),
			v1.ResourceEphemeralStorage: *resource.NewQuantity(info.EphemeralStorageCapacity, resource.BinarySI),
			v1.ResourcePods:             *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
		}
		for name, q := range capacityOverride {
			capacity[name] = q.DeepCopy()
		}
		// Keep resources that others advertise (extended resources): only
		// overwrite the ones this setter knows.
		if node.Status.Capacity == nil {
			node.Status.Capacity = v1.ResourceList{}
		}
		if node.Status.Allocatable == nil {
			node.Status.Allocatable = v1.ResourceList{}
		}
		var reserved v1.ResourceList
		if reservationFunc != nil {
			reserved = reservationFunc(capacity)
		}
		for name, q := range capacity {
			node.Status.Capacity[name] = q
			alloc := q.DeepCopy()
			if r, ok := reserved[name]; ok {
				alloc.Sub(r)
			}
			if alloc.Sign() < 0 {
				alloc.Set(0)
			}
			node.Status.Allocatable[name] = alloc
		}
		return nil
	}
}

// NodeAllocatableReservation returns what MachineInfo subtracts from capacity
// to get allocatable, as the kubelet computes it: --system-reserved plus
// --kube-reserved plus the hard eviction thresholds, whose v1.37 defaults
// are memory.available<100Mi and nodefs.available<10%.
func NodeAllocatableReservation(systemReserved, kubeReserved v1.ResourceList) func(capacity v1.ResourceList) v1.ResourceList {
	return func(capacity v1.ResourceList) v1.ResourceList {
		out := v1.ResourceList{}
		add := func(name v1.ResourceName, q resource.Quantity) {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
		for _, list := range []v1.ResourceList{systemReserved, kubeReserved} {
			for name, q := range list {
				add(name, q)
			}
		}
		add(v1.ResourceMemory, EvictionHardMemoryAvailable)
		if disk, ok := capacity[v1.ResourceEphemeralStorage]; ok {
			add(v1.ResourceEphemeralStorage, *resource.NewQuantity(int64(float64(disk.Value())*EvictionHardNodefsAvailable), resource.BinarySI))
		}
		return out
	}
}

// The kubelet's default --eviction-hard thresholds that count as reserved.
var (
	// EvictionHardMemoryAvailable is memory.available<100Mi.
	EvictionHardMemoryAvailable = resource.MustParse("100Mi")
	// EvictionHardNodefsAvailable is nodefs.available<10%.
	EvictionHardNodefsAvailable = 0.10
)

// VersionInfo sets the kernel and OS image (from machineInfoFunc), the
// container runtime version ("<type>://<version>", from runtimeVersionFunc;
// "Unknown" when it fails, as upstream) and the kubelet version.
func VersionInfo(machineInfoFunc func() (*Machine, error), runtimeVersionFunc func(ctx context.Context) (string, error), kubeletVersion string) Setter {
	return func(ctx context.Context, node *v1.Node) error {
		info, err := machineInfoFunc()
		if err != nil {
			return fmt.Errorf("node %s: version info: %w", node.Name, err)
		}
		node.Status.NodeInfo.KernelVersion = info.KernelVersion
		node.Status.NodeInfo.OSImage = info.OSImage
		node.Status.NodeInfo.ContainerRuntimeVersion = "Unknown"
		if v, err := runtimeVersionFunc(ctx); err == nil {
			node.Status.NodeInfo.ContainerRuntimeVersion = v
		}
		node.Status.NodeInfo.KubeletVersion = kubeletVersion
		// kubeProxyVersion is deprecated; v1.37 always clears it
		// (feature gate DisableNodeKubeProxyVersion, locked on).
		node.Status.NodeInfo.KubeProxyVersion = ""
		return nil
	}
}

// GoRuntime sets the operating system and architecture this program was
// built for.
func GoRuntime() Setter {
	return func(ctx context.Context, node *v1.Node) error {
		node.Status.NodeInfo.OperatingSystem = goruntime.GOOS
		node.Status.NodeInfo.Architecture = goruntime.GOARCH
		return nil
	}
}

// DaemonEndpoints sets the port the API server uses to reach the kubelet
// (for logs, exec, port-forward).
func DaemonEndpoints(kubeletPort int32) Setter {
	return func(ctx context.Context, node *v1.Node) error {
		node.Status.DaemonEndpoints = v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: kubeletPort}}
		return nil
	}
}

// NoPressure is a pressure function for a node without an eviction manager:
// it never reports pressure.
func NoPressure() bool { return false }

// MemoryPressureCondition sets the MemoryPressure condition from pressureFunc
// (upstream: the eviction manager's IsUnderMemoryPressure).
func MemoryPressureCondition(nowFunc func() time.Time, pressureFunc func() bool) Setter {
	return pressureCondition(v1.NodeMemoryPressure, nowFunc, pressureFunc,
		reasonMessage{"KubeletHasInsufficientMemory", "kubelet has insufficient memory available"},
		reasonMessage{"KubeletHasSufficientMemory", "kubelet has sufficient memory available"})
}

// DiskPressureCondition sets the DiskPressure condition from pressureFunc.
func DiskPressureCondition(nowFunc func() time.Time, pressureFunc func() bool) Setter {
	return pressureCondition(v1.NodeDiskPressure, nowFunc, pressureFunc,
		reasonMessage{"KubeletHasDiskPressure", "kubelet has disk pressure"},
		reasonMessage{"KubeletHasNoDiskPressure", "kubelet has no disk pressure"})
}

// PIDPressureCondition sets the PIDPressure condition from pressureFunc.
func PIDPressureCondition(nowFunc func() time.Time, pressureFunc func() bool) Setter {
	return pressureCondition(v1.NodePIDPressure, nowFunc, pressureFunc,
		reasonMessage{"KubeletHasInsufficientPID", "kubelet has insufficient PID available"},
		reasonMessage{"KubeletHasSufficientPID", "kubelet has sufficient PID available"})
}

type reasonMessage struct{ reason, message string }

func pressureCondition(condType v1.NodeConditionType, nowFunc func() time.Time, pressureFunc func() bool, underPressure, noPressure reasonMessage) Setter {
	return func(ctx context.Context, node *v1.Node) error {
		status, rm := v1.ConditionFalse, noPressure
		if pressureFunc() {
			status, rm = v1.ConditionTrue, underPressure
		}
		SetNodeCondition(node, condType, status, rm.reason, rm.message, nowFunc())
		return nil
	}
}

// RequiredCapacities are the resources a node must report before
// ReadyCondition calls it Ready (upstream adds ephemeral-storage when local
// storage capacity isolation is on, which it is by default).
var RequiredCapacities = []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourcePods, v1.ResourceEphemeralStorage}

// ReadyCondition sets the Ready condition: True with reason KubeletReady,
// unless runtimeErrorsFunc (may be nil) returns an error or a resource in
// requiredCapacities is missing from status.capacity; then False with reason
// KubeletNotReady and the errors as the message. Run it after the setters
// that fill in capacity.
func ReadyCondition(nowFunc func() time.Time, runtimeErrorsFunc func() error, requiredCapacities []v1.ResourceName) Setter {
	return func(ctx context.Context, node *v1.Node) error {
		var errs []error
		if runtimeErrorsFunc != nil {
			errs = append(errs, runtimeErrorsFunc())
		}
		var missing []string
		for _, name := range requiredCapacities {
			if _, ok := node.Status.Capacity[name]; !ok {
				missing = append(missing, string(name))
			}
		}
		if len(missing) > 0 {
			errs = append(errs, fmt.Errorf("missing node capacity for resources: %s", strings.Join(missing, ", ")))
		}
		if err := errors.Join(errs...); err != nil {
			SetNodeCondition(node, v1.NodeReady, v1.ConditionFalse, "KubeletNotReady", strings.ReplaceAll(err.Error(), "\n", "; "), nowFunc())
			return nil
		}
		SetNodeCondition(node, v1.NodeReady, v1.ConditionTrue, "KubeletReady", "kubelet is posting ready status", nowFunc())
		return nil
	}
}

// GetNodeCondition returns the index and a pointer to the condition of the
// given type in status, or -1 and nil when there is none.
func GetNodeCondition(status *v1.NodeStatus, condType v1.NodeConditionType) (int, *v1.NodeCondition) {
	for i := range status.Conditions {
		if status.Conditions[i].Type == condType {
			return i, &status.Conditions[i]
		}
	}
	return -1, nil
}

// SetNodeCondition writes a condition, found by its type: lastHeartbeatTime
// becomes now; lastTransitionTime becomes now only when the status changes
// (or the condition is new). A missing condition is appended.
func SetNodeCondition(node *v1.Node, condType v1.NodeConditionType, status v1.ConditionStatus, reason, message string, now time.Time) {
	t := metav1.NewTime(now)
	_, c := GetNodeCondition(&node.Status, condType)
	if c == nil {
		node.Status.Conditions = append(node.Status.Conditions, v1.NodeCondition{Type: condType, LastTransitionTime: t})
		c = &node.Status.Conditions[len(node.Status.Conditions)-1]
	} else if c.Status != status {
		c.LastTransitionTime = t
	}
	c.Status, c.Reason, c.Message, c.LastHeartbeatTime = status, reason, message, t
}

// Summary is a one-line view of a node's status: its conditions and
// capacity, as "MemoryPressure=False … Ready=True; capacity cpu=… memory=… pods=…".
func Summary(n *v1.Node) string {
	var parts []string
	for _, t := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure, v1.NodeReady} {
		if _, c := GetNodeCondition(&n.Status, t); c != nil {
			parts = append(parts, fmt.Sprintf("%s=%s", t, c.Status))
		}
	}
	cpu, mem, pods := n.Status.Capacity[v1.ResourceCPU], n.Status.Capacity[v1.ResourceMemory], n.Status.Capacity[v1.ResourcePods]
	return fmt.Sprintf("%s; capacity cpu=%s memory=%s pods=%s", strings.Join(parts, " "), cpu.String(), mem.String(), pods.String())
}

// ReadySummary is the node's Ready condition in one phrase, the line a
// kubelet prints after each status write: "Ready=True, runtime
// <containerRuntimeVersion>", or "Ready=<status> <reason>: <message>"
// when it is not True (the setters always write one; a node without it
// reads "Ready=Unknown").
func ReadySummary(n *v1.Node) string {
	_, c := GetNodeCondition(&n.Status, v1.NodeReady)
	switch {
	case c == nil:
		return "Ready=Unknown"
	case c.Status != v1.ConditionTrue:
		return fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
	}
	return fmt.Sprintf("Ready=True, runtime %s", n.Status.NodeInfo.ContainerRuntimeVersion)
}
