// Package nodestatus fills in a Node's status, one small function per part,
// as the kubelet's pkg/kubelet/nodestatus/setters.go does: addresses,
// capacity and allocatable, system info, daemon endpoints, the images the
// runtime holds and the four conditions (MemoryPressure, DiskPressure,
// PIDPressure, Ready). The condition setters record the kubelet's node
// events on their transitions (NodeHasSufficientMemory, NodeReady, …)
// through a RecordEventFunc, as upstream's recordEventFunc.
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
//   - the machine is read from /proc, /sys and /etc (mylib/cadvisor's
//     ReadMachineInfo), not from cAdvisor: a few files give the IDs and
//     the capacity;
//   - NodeAddress gives one InternalIP and the Hostname: no cloud provider,
//     no DNS lookup of the node name, no second address family;
//   - no VolumesInUse, VolumeLimits, RuntimeHandlers or NodeFeatures
//     setters: the course's volumes need no attaching and the mock runtime
//     has one handler;
//   - with a cadvisor.MockMachine, or when a file cannot be read (the
//     system UUID is root's), the node's IDs are derived from its name
//     (NodeIDs), so two nodes on one host differ; upstream reports what
//     cAdvisor read, or nothing;
//   - the event functions are optional trailing arguments, so that a
//     caller without a recorder (a fleet's nodes) passes none.
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
	"k8s.io/klog/v2"

	"mykubelet/mylib/cadvisor"
	"mykubelet/mylib/events"
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
// ContainerManager.GetNodeAllocatableReservation), never below zero. The
// IDs are the machine's NodeIDs. When the boot ID differs from the one the
// node had, recordEventFunc (optional) gets a Warning Rebooted event, as
// upstream's.
func MachineInfo(maxPods int, machineInfoFunc func() (*cadvisor.MachineInfo, error), capacityOverride v1.ResourceList, reservationFunc func(capacity v1.ResourceList) v1.ResourceList, recordEventFunc ...func(eventType, event, message string)) Setter {
	return func(ctx context.Context, node *v1.Node) error {
		info, err := machineInfoFunc()
		if err != nil {
			return fmt.Errorf("node %s: machine info: %w", node.Name, err)
		}
		machineID, systemUUID, bootID := info.NodeIDs(node.Name)
		node.Status.NodeInfo.MachineID = machineID
		node.Status.NodeInfo.SystemUUID = systemUUID
		if old := node.Status.NodeInfo.BootID; old != "" && old != bootID {
			for _, record := range recordEventFunc {
				if record == nil {
					continue
				}
				record(v1.EventTypeWarning, events.NodeRebooted, fmt.Sprintf("Node %s has been rebooted, boot id: %s", node.Name, bootID))
			}
		}
		node.Status.NodeInfo.BootID = bootID

		capacity := cadvisor.CapacityFromMachineInfo(info)
		capacity[v1.ResourceEphemeralStorage] = *resource.NewQuantity(info.EphemeralStorageCapacity, resource.BinarySI)
		capacity[v1.ResourcePods] = *resource.NewQuantity(int64(maxPods), resource.DecimalSI)
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
func VersionInfo(machineInfoFunc func() (*cadvisor.MachineInfo, error), runtimeVersionFunc func(ctx context.Context) (string, error), kubeletVersion string) Setter {
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

// RecordEventFunc records an event of this type and reason on the node
// (upstream: Kubelet.recordNodeStatusEvent, whose message is "Node <name>
// status is now: <event>").
type RecordEventFunc func(eventType, event string)

// MemoryPressureCondition sets the MemoryPressure condition from pressureFunc
// (upstream: the eviction manager's IsUnderMemoryPressure). When the
// condition is new or its status changes, recordEventFunc (optional) gets
// NodeHasSufficientMemory or NodeHasInsufficientMemory.
func MemoryPressureCondition(nowFunc func() time.Time, pressureFunc func() bool, recordEventFunc ...RecordEventFunc) Setter {
	return pressureCondition(v1.NodeMemoryPressure, nowFunc, pressureFunc, recordEventFunc,
		reasonMessage{"KubeletHasInsufficientMemory", "kubelet has insufficient memory available", events.NodeHasInsufficientMemory},
		reasonMessage{"KubeletHasSufficientMemory", "kubelet has sufficient memory available", events.NodeHasSufficientMemory})
}

// DiskPressureCondition sets the DiskPressure condition from pressureFunc;
// its events are NodeHasNoDiskPressure and NodeHasDiskPressure.
func DiskPressureCondition(nowFunc func() time.Time, pressureFunc func() bool, recordEventFunc ...RecordEventFunc) Setter {
	return pressureCondition(v1.NodeDiskPressure, nowFunc, pressureFunc, recordEventFunc,
		reasonMessage{"KubeletHasDiskPressure", "kubelet has disk pressure", events.NodeHasDiskPressure},
		reasonMessage{"KubeletHasNoDiskPressure", "kubelet has no disk pressure", events.NodeHasNoDiskPressure})
}

// PIDPressureCondition sets the PIDPressure condition from pressureFunc;
// its events are NodeHasSufficientPID and NodeHasInsufficientPID.
func PIDPressureCondition(nowFunc func() time.Time, pressureFunc func() bool, recordEventFunc ...RecordEventFunc) Setter {
	return pressureCondition(v1.NodePIDPressure, nowFunc, pressureFunc, recordEventFunc,
		reasonMessage{"KubeletHasInsufficientPID", "kubelet has insufficient PID available", events.NodeHasInsufficientPID},
		reasonMessage{"KubeletHasSufficientPID", "kubelet has sufficient PID available", events.NodeHasSufficientPID})
}

// reasonMessage is a condition's reason and message, and the event its
// transition records.
type reasonMessage struct{ reason, message, event string }

func pressureCondition(condType v1.NodeConditionType, nowFunc func() time.Time, pressureFunc func() bool, recordEventFunc []RecordEventFunc, underPressure, noPressure reasonMessage) Setter {
	return func(ctx context.Context, node *v1.Node) error {
		status, rm := v1.ConditionFalse, noPressure
		if pressureFunc() {
			status, rm = v1.ConditionTrue, underPressure
		}
		// A new condition counts as Unknown before, as upstream: the
		// first status records its event too.
		_, old := GetNodeCondition(&node.Status, condType)
		changed := old == nil || old.Status != status
		SetNodeCondition(node, condType, status, rm.reason, rm.message, nowFunc())
		if changed {
			recordEvents(recordEventFunc, v1.EventTypeNormal, rm.event)
		}
		return nil
	}
}

func recordEvents(fns []RecordEventFunc, eventType, event string) {
	for _, record := range fns {
		if record != nil {
			record(eventType, event)
		}
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
// that fill in capacity. When the status of an existing Ready condition
// changes, recordEventFunc (optional) gets NodeReady or NodeNotReady (both
// Normal, as upstream); a new condition records nothing, as upstream's, so
// the event shows when a node that started NotReady (or Unknown, after a
// restart) turns Ready.
func ReadyCondition(nowFunc func() time.Time, runtimeErrorsFunc func() error, requiredCapacities []v1.ResourceName, recordEventFunc ...RecordEventFunc) Setter {
	return func(ctx context.Context, node *v1.Node) error {
		_, old := GetNodeCondition(&node.Status, v1.NodeReady)
		var oldStatus v1.ConditionStatus
		if old != nil {
			oldStatus = old.Status
		}
		set := func(status v1.ConditionStatus, reason, message string) {
			SetNodeCondition(node, v1.NodeReady, status, reason, message, nowFunc())
			switch {
			case oldStatus == "" || oldStatus == status:
			case status == v1.ConditionTrue:
				recordEvents(recordEventFunc, v1.EventTypeNormal, events.NodeReady)
			default:
				recordEvents(recordEventFunc, v1.EventTypeNormal, events.NodeNotReady)
				klog.FromContext(ctx).Info("Node became not ready", "node", node.Name, "reason", reason, "message", message)
			}
		}
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
			set(v1.ConditionFalse, "KubeletNotReady", strings.ReplaceAll(err.Error(), "\n", "; "))
			return nil
		}
		set(v1.ConditionTrue, "KubeletReady", "kubelet is posting ready status")
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
