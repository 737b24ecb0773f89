package cm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	"mykubelet/mylib/cadvisor"
)

// ResourcePID is the node's process IDs as a resource (upstream's
// pidlimit.PIDs): node allocatable's pids.max on kubepods.
const ResourcePID v1.ResourceName = "pid"

// defaultNodeAllocatableCgroupName is the pods' cgroup under cgroupRoot.
const defaultNodeAllocatableCgroupName = "kubepods"

// NodeConfig is the container manager's part of the KubeletConfiguration
// (upstream's NodeConfig, in small).
type NodeConfig struct {
	// CgroupsPerQOS makes kubepods, its QoS cgroups and a cgroup per pod
	// (cgroupsPerQOS, default true).
	CgroupsPerQOS bool
	// CgroupRoot is the cgroup kubepods goes in (cgroupRoot; "" is "/").
	CgroupRoot string
	// CgroupDriver must be "cgroupfs" (or "").
	CgroupDriver string
	// EnforceNodeAllocatable: "pods" limits kubepods to node allocatable
	// (capacity less the reservations), else to capacity.
	EnforceNodeAllocatable []string
	// SystemReserved and KubeReserved are taken off capacity.
	SystemReserved, KubeReserved v1.ResourceList
	// PodPidsLimit is each pod cgroup's pids.max; 0 or less: none.
	PodPidsLimit int64
	// EnforceCPULimits gives pods a CFS quota from their CPU limits
	// (cpuCFSQuota, default true); CPUCFSQuotaPeriod is its period
	// (zero: 100 ms).
	EnforceCPULimits  bool
	CPUCFSQuotaPeriod time.Duration
}

// ContainerManager is the kubelet's container manager (upstream's
// interface, in small: the node's and the pods' cgroups only).
type ContainerManager interface {
	// Start makes the node allocatable cgroup and the QoS cgroups and
	// keeps the QoS cgroups up to date until ctx ends.
	Start(ctx context.Context, activePods ActivePodsFunc) error
	// NewPodContainerManager manages the pods' cgroups.
	NewPodContainerManager() PodContainerManager
	// UpdateQOSCgroups sets the QoS cgroups from the active pods now.
	UpdateQOSCgroups() error
	// GetQOSContainersInfo is the QoS cgroups' names.
	GetQOSContainersInfo() QOSContainersInfo
	// CgroupsPerQOS: there are pod cgroups (the kubelet's cgroupsPerQOS,
	// false when the manager is off).
	CgroupsPerQOS() bool
	// GetNodeConfig is the manager's configuration (in-place resize reads
	// EnforceCPULimits and CPUCFSQuotaPeriod for the pod cgroup's quota).
	GetNodeConfig() NodeConfig
}

// containerManager is the ContainerManager with cgroupsPerQOS.
type containerManager struct {
	nc            NodeConfig
	subsystems    *CgroupSubsystems
	cgroupManager CgroupManager
	// cgroupRoot is kubepods's name, under the configured root.
	cgroupRoot CgroupName
	capacity   v1.ResourceList
	qos        *qosContainerManager
}

// NewContainerManager is the container manager over the cgroup
// filesystem cs on a machine of capacity (cpu, memory, pid), as upstream's:
// nc.CgroupRoot must exist; kubepods goes under it. Without
// CgroupsPerQOS it is the stub.
func NewContainerManager(cs *CgroupSubsystems, capacity v1.ResourceList, nc NodeConfig) (ContainerManager, error) {
	cgm, err := NewCgroupManager(cs, nc.CgroupDriver)
	if err != nil {
		return nil, err
	}
	if !nc.CgroupsPerQOS {
		return NewStubContainerManager(), nil
	}
	for _, k := range nc.EnforceNodeAllocatable {
		if k != NodeAllocatableEnforcementKey && k != NoneEnforcementKey {
			return nil, fmt.Errorf("enforceNodeAllocatable %q is not supported by this kubelet: only %q or %q", k, NodeAllocatableEnforcementKey, NoneEnforcementKey)
		}
	}
	root := ParseCgroupfsToCgroupName(nc.CgroupRoot)
	if !cgm.Exists(root) {
		return nil, fmt.Errorf("invalid configuration: cgroup-root %q doesn't exist", root.ToCgroupfs())
	}
	if nc.CPUCFSQuotaPeriod == 0 {
		nc.CPUCFSQuotaPeriod = QuotaPeriod * time.Microsecond
	}
	kubepods := NewCgroupName(root, defaultNodeAllocatableCgroupName)
	return &containerManager{nc: nc, subsystems: cs, cgroupManager: cgm, cgroupRoot: kubepods, capacity: capacity,
		qos: &qosContainerManager{cgroupManager: cgm, cgroupRoot: kubepods}}, nil
}

// NodeAllocatable is capacity less the reservations (upstream's
// GetNodeAllocatableAbsolute: no eviction threshold), none below zero.
func NodeAllocatable(capacity, systemReserved, kubeReserved v1.ResourceList) v1.ResourceList {
	out := v1.ResourceList{}
	for k, v := range capacity {
		value := v.DeepCopy()
		if r, ok := systemReserved[k]; ok {
			value.Sub(r)
		}
		if r, ok := kubeReserved[k]; ok {
			value.Sub(r)
		}
		if value.Sign() < 0 {
			value.Set(0)
		}
		out[k] = value
	}
	return out
}

// NodeAllocatableResources are kubepods's resources for rl (upstream's
// getCgroupConfig): its memory limit, cpu.shares from its CPUs, pids.max.
func NodeAllocatableResources(rl v1.ResourceList) *ResourceConfig {
	var rc ResourceConfig
	if q, ok := rl[v1.ResourceMemory]; ok {
		v := q.Value()
		rc.Memory = &v
	}
	if q, ok := rl[v1.ResourceCPU]; ok {
		v := MilliCPUToShares(q.MilliValue())
		rc.CPUShares = &v
	}
	if q, ok := rl[ResourcePID]; ok {
		v := q.Value()
		rc.PidsLimit = &v
	}
	return &rc
}

// nodeAllocatable is what kubepods is limited to: allocatable with
// enforceNodeAllocatable "pods", else capacity (upstream's
// createNodeAllocatableCgroups and enforceNodeAllocatableCgroups).
func (cm *containerManager) nodeAllocatable() v1.ResourceList {
	if slices.Contains(cm.nc.EnforceNodeAllocatable, NodeAllocatableEnforcementKey) {
		return NodeAllocatable(cm.capacity, cm.nc.SystemReserved, cm.nc.KubeReserved)
	}
	return cm.capacity
}

// Start makes kubepods (node allocatable) unless it exists, sets its
// limits, then starts the QoS manager. Upstream retries a failed update
// of kubepods every minute with an event each time; this logs it once.
func (cm *containerManager) Start(ctx context.Context, activePods ActivePodsFunc) error {
	cfg := &CgroupConfig{Name: cm.cgroupRoot, ResourceParameters: NodeAllocatableResources(cm.nodeAllocatable())}
	if !cm.cgroupManager.Exists(cm.cgroupRoot) {
		if err := cm.cgroupManager.Create(cfg); err != nil {
			return fmt.Errorf("failed to create cgroup %s: %w", cm.cgroupRoot.ToCgroupfs(), err)
		}
	} else if err := cm.cgroupManager.Update(cfg); err != nil {
		klog.ErrorS(err, "Failed to update Node Allocatable Limits", "cgroupName", cm.cgroupRoot.ToCgroupfs())
	}
	if err := cm.qos.Start(ctx, activePods); err != nil {
		return err
	}
	klog.V(2).InfoS("Container manager started", "cgroupVersion", cm.cgroupManager.Version(), "cgroupRoot", cm.cgroupRoot.ToCgroupfs())
	return nil
}

func (cm *containerManager) NewPodContainerManager() PodContainerManager {
	return &podContainerManager{
		qosContainersInfo: cm.qos.GetQOSContainersInfo(),
		subsystems:        cm.subsystems,
		cgroupManager:     cm.cgroupManager,
		podPidsLimit:      cm.nc.PodPidsLimit,
		enforceCPULimits:  cm.nc.EnforceCPULimits,
		cpuCFSQuotaPeriod: uint64(cm.nc.CPUCFSQuotaPeriod / time.Microsecond),
	}
}

func (cm *containerManager) UpdateQOSCgroups() error { return cm.qos.UpdateCgroups() }
func (cm *containerManager) GetQOSContainersInfo() QOSContainersInfo {
	return cm.qos.GetQOSContainersInfo()
}
func (cm *containerManager) CgroupsPerQOS() bool       { return true }
func (cm *containerManager) GetNodeConfig() NodeConfig { return cm.nc }

// stubContainerManager is the container manager that makes no cgroups.
type stubContainerManager struct{}

// NewStubContainerManager makes no cgroups: the pods' cgroup parent is
// "" (upstream's containerManagerStub).
func NewStubContainerManager() ContainerManager { return stubContainerManager{} }

func (stubContainerManager) Start(context.Context, ActivePodsFunc) error { return nil }
func (stubContainerManager) NewPodContainerManager() PodContainerManager {
	return podContainerManagerNoop{}
}
func (stubContainerManager) UpdateQOSCgroups() error                 { return nil }
func (stubContainerManager) GetQOSContainersInfo() QOSContainersInfo { return QOSContainersInfo{} }
func (stubContainerManager) CgroupsPerQOS() bool                     { return false }
func (stubContainerManager) GetNodeConfig() NodeConfig               { return NodeConfig{} }

// NewForNode is the container manager of this machine, or the stub, with
// one line saying why, where the kubelet may not make cgroups: not root,
// no cgroup filesystem, or one it may not write. cgroupsPerQOS false is
// the stub too. A configuration this kubelet refuses (cgroupDriver
// systemd, a cgroupRoot that does not exist) is an error.
func NewForNode(nc NodeConfig) (ContainerManager, error) {
	if nc.CgroupDriver != "" && nc.CgroupDriver != CgroupfsDriver {
		return nil, fmt.Errorf("cgroupDriver %q is not supported by this kubelet: only %q", nc.CgroupDriver, CgroupfsDriver)
	}
	off := func(why string) (ContainerManager, error) {
		klog.InfoS("Container manager is off: the pods get no QoS or pod cgroups", "reason", why)
		return NewStubContainerManager(), nil
	}
	if !nc.CgroupsPerQOS {
		return off("cgroupsPerQOS is false")
	}
	if os.Geteuid() != 0 {
		return off("not root: this kubelet may not create cgroups")
	}
	cs, err := GetCgroupSubsystems()
	if err != nil {
		return off(err.Error())
	}
	if err := unix.Access(cs.writableRoot(), unix.W_OK); err != nil {
		return off(fmt.Sprintf("the cgroup filesystem %s is not writable: %v", cs.writableRoot(), err))
	}
	if cs.Unified != "" {
		if err := controllersBelow(cs, ParseCgroupfsToCgroupName(nc.CgroupRoot)); err != nil {
			return off(err.Error())
		}
	}
	capacity, err := MachineCapacity()
	if err != nil {
		return nil, err
	}
	return NewContainerManager(cs, capacity, nc)
}

// controllersBelow checks, on cgroup v2, that the cpu and memory
// controllers are (or can be) enabled below root, where kubepods goes.
// They cannot be in a cgroup that holds processes of its own (the
// kernel's no-internal-processes rule), as the root of a container's
// cgroup namespace often does. A root that does not exist is
// NewContainerManager's error, not this one's.
func controllersBelow(cs *CgroupSubsystems, root CgroupName) error {
	dir := filepath.Join(cs.Unified, root.ToCgroupfs())
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	m := &cgroupManager{subsystems: cs}
	if err := m.enableControllers(NewCgroupName(root, defaultNodeAllocatableCgroupName)); err != nil {
		return err
	}
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control")) // unreadable: none enabled, said below
	var enabled []string
	for _, c := range strings.Fields(string(b)) {
		enabled = append(enabled, strings.TrimPrefix(c, "+")) // the kernel shows "cpu"; a test's plain file what was written
	}
	for _, c := range []string{"cpu", "memory"} {
		if !slices.Contains(enabled, c) {
			return fmt.Errorf("cgroup v2: the %s controller cannot be enabled below %s (a cgroup with processes of its own, as a container's root?)", c, root.ToCgroupfs())
		}
	}
	return nil
}

// MachineCapacity is the machine's CPUs and memory (from mylib/cadvisor,
// as upstream's cadvisor.CapacityFromMachineInfo) and process IDs (the
// lesser of kernel.pid_max and kernel.threads-max, as upstream's pidlimit).
func MachineCapacity() (v1.ResourceList, error) {
	info, err := cadvisor.ReadMachineInfo("")
	if err != nil {
		return nil, err
	}
	out := cadvisor.CapacityFromMachineInfo(info)
	pids := int64(-1)
	for _, f := range []string{"/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && (pids < 0 || n < pids) {
			pids = n
		}
	}
	if pids > 0 {
		out[ResourcePID] = *resource.NewQuantity(pids, resource.DecimalSI)
	}
	return out, nil
}
