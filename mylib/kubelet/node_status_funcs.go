package kubelet

import (
	"context"
	"net"
	"sync"

	v1 "k8s.io/api/core/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"mykubelet/mylib/nodestatus"
)

// NodeStatusOptions describe the node for upstream's default status
// setters (NodeConfig.Status).
type NodeStatusOptions struct {
	// NodeIP is the InternalIP; nil means the address of the interface
	// with the default route.
	NodeIP net.IP
	// MaxPods is the pods capacity; zero means nodestatus.DefaultMaxPods.
	MaxPods int
	// Port is the kubelet port in status.daemonEndpoints; zero means
	// nodestatus.DefaultKubeletPort.
	Port int32
	// RootDir is the directory whose filesystem is the node's
	// ephemeral-storage capacity (the kubelet's --root-dir). Required.
	RootDir string
	// Capacity overrides measured capacity; SystemReserved is taken off
	// allocatable.
	Capacity, SystemReserved v1.ResourceList
	// RuntimeVersion is the <type>://<version> reported while the Kubelet
	// has no runtime to ask (a node half alone); with a runtime, the CRI's
	// Version answers.
	RuntimeVersion string
	// MockMachine overrides the host's memory and nodefs sizes.
	MockMachine nodestatus.MockMachine
}

// defaultNodeStatusFuncs are the setters in the order of upstream's
// defaultNodeStatusFuncs (Ready last): the runtime's version comes from
// the CRI, Ready follows the runtime's health (RuntimeErrors) when the
// Kubelet has a pod half, and the pressure conditions follow the eviction
// manager (never pressure without one).
func (kl *Kubelet) defaultNodeStatusFuncs(o NodeStatusOptions) []nodestatus.Setter {
	if o.MaxPods == 0 {
		o.MaxPods = nodestatus.DefaultMaxPods
	}
	if o.Port == 0 {
		o.Port = nodestatus.DefaultKubeletPort
	}
	machineInfo := sync.OnceValues(func() (*nodestatus.Machine, error) { return nodestatus.ReadMachineOf(o.RootDir, o.MockMachine) })
	runtimeVersion := func(ctx context.Context) (string, error) {
		if kl.cri == nil {
			return o.RuntimeVersion, nil // no runtime: what we were told, if anything
		}
		return kl.RuntimeVersion(ctx)
	}
	return []nodestatus.Setter{
		nodestatus.NodeAddress(o.NodeIP, kl.nodeName, utilnet.ResolveBindAddress),
		nodestatus.MachineInfo(o.MaxPods, machineInfo, o.Capacity, nodestatus.NodeAllocatableReservation(o.SystemReserved, nil)),
		nodestatus.VersionInfo(machineInfo, runtimeVersion, KubeletVersion),
		nodestatus.DaemonEndpoints(o.Port),
		nodestatus.GoRuntime(),
		nodestatus.MemoryPressureCondition(kl.clock.Now, kl.isUnderMemoryPressure),
		nodestatus.DiskPressureCondition(kl.clock.Now, kl.isUnderDiskPressure),
		nodestatus.PIDPressureCondition(kl.clock.Now, kl.isUnderPIDPressure),
		nodestatus.ReadyCondition(kl.clock.Now, kl.RuntimeErrors, nodestatus.RequiredCapacities),
	}
}
