package cm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"mykubelet/mylib/qos"
)

// PodContainerManager manages the pods' cgroups (upstream's interface).
type PodContainerManager interface {
	// GetPodContainerName is the pod's cgroup: its name, and its cgroupfs
	// name, the sandbox's CgroupParent ("" when there are no pod cgroups).
	GetPodContainerName(*v1.Pod) (CgroupName, string)
	// EnsureExists makes the pod's cgroup with its resources
	// (ResourceConfigForPod) unless it exists.
	EnsureExists(*v1.Pod) error
	// Exists: the pod's cgroup exists.
	Exists(*v1.Pod) bool
	// Destroy kills the processes in a pod's cgroup, then removes it.
	Destroy(CgroupName) error
	// RemoveIfEmpty removes a pod's cgroup if no process is in it (not
	// upstream's: the kubelet of this course tidies up when it stops).
	RemoveIfEmpty(CgroupName) error
	// ReduceCPULimits gives a pod's cgroup the least CPU weight.
	ReduceCPULimits(CgroupName) error
	// GetAllPodsFromCgroups is every pod cgroup under the QoS cgroups, by
	// the pod's UID.
	GetAllPodsFromCgroups() (map[types.UID]CgroupName, error)
	// IsPodCgroup says whether a cgroupfs name is a pod's, and whose.
	IsPodCgroup(cgroupfs string) (bool, types.UID)

	// In-place resize reads and sets the pod cgroup's CPU and memory
	// with these (kuberuntime's doPodResizeAction).
	// GetPodCgroupConfig is the pod cgroup's CPU (shares, quota, period)
	// or memory (limit) now; nil without pod cgroups.
	GetPodCgroupConfig(pod *v1.Pod, resource v1.ResourceName) (*ResourceConfig, error)
	// SetPodCgroupConfig writes the set fields of the config into the pod
	// cgroup, leaving the others as they are.
	SetPodCgroupConfig(pod *v1.Pod, resourceConfig *ResourceConfig) error
	// GetPodCgroupMemoryUsage is the memory the pod's cgroup uses now.
	GetPodCgroupMemoryUsage(pod *v1.Pod) (uint64, error)
}

// podContainerManager is the PodContainerManager with cgroupsPerQOS.
type podContainerManager struct {
	qosContainersInfo QOSContainersInfo
	subsystems        *CgroupSubsystems
	cgroupManager     CgroupManager
	// podPidsLimit is the kubelet's podPidsLimit; 0 or less: none.
	podPidsLimit      int64
	enforceCPULimits  bool
	cpuCFSQuotaPeriod uint64
}

var _ PodContainerManager = &podContainerManager{}

func (m *podContainerManager) GetPodContainerName(pod *v1.Pod) (CgroupName, string) {
	var parent CgroupName
	switch qos.GetPodQOS(pod) {
	case v1.PodQOSGuaranteed:
		parent = m.qosContainersInfo.Guaranteed
	case v1.PodQOSBurstable:
		parent = m.qosContainersInfo.Burstable
	default:
		parent = m.qosContainersInfo.BestEffort
	}
	name := NewCgroupName(parent, GetPodCgroupNameSuffix(pod.UID))
	return name, m.cgroupManager.Name(name)
}

func (m *podContainerManager) Exists(pod *v1.Pod) bool {
	name, _ := m.GetPodContainerName(pod)
	return m.cgroupManager.Exists(name)
}

func (m *podContainerManager) EnsureExists(pod *v1.Pod) error {
	if m.Exists(pod) {
		return nil
	}
	name, _ := m.GetPodContainerName(pod)
	cfg := &CgroupConfig{Name: name, ResourceParameters: ResourceConfigForPod(pod, m.enforceCPULimits, m.cpuCFSQuotaPeriod)}
	if m.podPidsLimit > 0 {
		cfg.ResourceParameters.PidsLimit = &m.podPidsLimit
	}
	if err := m.cgroupManager.Create(cfg); err != nil {
		return fmt.Errorf("failed to create container for %v : %w", name.ToCgroupfs(), err)
	}
	return nil
}

// Destroy removes the pod's cgroup after killing the processes left in it,
// as upstream: a sandbox whose start was under way when its pod was
// stopped shows up in the runtime's lists only later, and a cgroup that
// holds a process cannot be removed (EBUSY): the pod would wait for that
// forever. The kubelet destroys only the cgroups of its own pods
// (kubelet_cm.go), never another kubelet's on the same machine.
func (m *podContainerManager) Destroy(name CgroupName) error {
	if err := m.tryKillingCgroupProcesses(name); err != nil {
		return fmt.Errorf("failed to kill all the processes attached to the %v cgroups : %w", name.ToCgroupfs(), err)
	}
	if err := m.cgroupManager.Destroy(&CgroupConfig{Name: name, ResourceParameters: &ResourceConfig{}}); err != nil {
		return fmt.Errorf("failed to delete cgroup paths for %v : %w", name.ToCgroupfs(), err)
	}
	return nil
}

// RemoveIfEmpty removes the pod's cgroup unless processes run in it (then
// the kernel refuses, and it stays as it is).
func (m *podContainerManager) RemoveIfEmpty(name CgroupName) error {
	if err := m.cgroupManager.Destroy(&CgroupConfig{Name: name, ResourceParameters: &ResourceConfig{}}); err != nil {
		return fmt.Errorf("failed to delete cgroup paths for %v : %w", name.ToCgroupfs(), err)
	}
	return nil
}

// tryKillingCgroupProcesses sends SIGKILL to every process in the cgroup
// (and the cgroups under it) and waits for them to leave it, in up to five
// rounds (upstream's tryKillingCgroupProcesses, which does not wait: its
// caller tries again at the pod's next sync).
func (m *podContainerManager) tryKillingCgroupProcesses(name CgroupName) error {
	var pids []int
	for attempt := 0; attempt < 5; attempt++ {
		if pids = m.cgroupManager.Pids(name); len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			// ESRCH: it exited meanwhile, as wanted.
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("kill %d: %w", pid, err)
			}
		}
		time.Sleep(time.Duration(attempt+1) * 20 * time.Millisecond)
	}
	if pids = m.cgroupManager.Pids(name); len(pids) > 0 {
		return fmt.Errorf("processes %v still in it", pids)
	}
	return nil
}

func (m *podContainerManager) ReduceCPULimits(name CgroupName) error {
	return m.cgroupManager.ReduceCPULimits(name)
}

func (m *podContainerManager) GetPodCgroupConfig(pod *v1.Pod, resource v1.ResourceName) (*ResourceConfig, error) {
	name, _ := m.GetPodContainerName(pod)
	return m.cgroupManager.GetCgroupConfig(name, resource)
}

func (m *podContainerManager) SetPodCgroupConfig(pod *v1.Pod, resourceConfig *ResourceConfig) error {
	name, _ := m.GetPodContainerName(pod)
	return m.cgroupManager.Update(&CgroupConfig{Name: name, ResourceParameters: resourceConfig})
}

func (m *podContainerManager) GetPodCgroupMemoryUsage(pod *v1.Pod) (uint64, error) {
	name, _ := m.GetPodContainerName(pod)
	usage, err := m.cgroupManager.MemoryUsage(name)
	if err != nil {
		return 0, err
	}
	return uint64(usage), nil
}

func (m *podContainerManager) qosCgroups() []CgroupName {
	return []CgroupName{m.qosContainersInfo.BestEffort, m.qosContainersInfo.Burstable, m.qosContainersInfo.Guaranteed}
}

func (m *podContainerManager) IsPodCgroup(cgroupfs string) (bool, types.UID) {
	name := m.cgroupManager.CgroupName(cgroupfs)
	for _, q := range m.qosCgroups() {
		if len(name) == len(q)+1 && slicesEqual(name[:len(q)], q) {
			if uid, ok := strings.CutPrefix(name[len(q)], podCgroupNamePrefix); ok && uid != "" {
				return true, types.UID(uid)
			}
		}
	}
	return false, ""
}

func slicesEqual(a, b CgroupName) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// GetAllPodsFromCgroups reads the QoS cgroups' directories in every
// hierarchy: each pod<uid> directory is a pod's cgroup. (The Guaranteed
// cgroup, kubepods, also holds burstable and besteffort: not pods.)
func (m *podContainerManager) GetAllPodsFromCgroups() (map[types.UID]CgroupName, error) {
	found := map[types.UID]CgroupName{}
	var roots []string
	if m.subsystems.Unified != "" {
		roots = []string{m.subsystems.Unified}
	} else {
		for _, mp := range m.subsystems.MountPoints {
			roots = append(roots, mp)
		}
	}
	for _, root := range roots {
		for _, q := range m.qosCgroups() {
			dir := filepath.Join(root, m.cgroupManager.Name(q))
			entries, err := os.ReadDir(dir)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("failed to read the cgroup directory %v : %w", dir, err)
			}
			for _, e := range entries {
				if !e.IsDir() {
					continue
				}
				if uid, ok := strings.CutPrefix(e.Name(), podCgroupNamePrefix); ok && uid != "" {
					found[types.UID(uid)] = NewCgroupName(q, e.Name())
				}
			}
		}
	}
	return found, nil
}

// podContainerManagerNoop is the PodContainerManager without pod cgroups
// (cgroupsPerQOS false, or no cgroups at all): the pods' cgroup parent is
// "" and the runtime chooses.
type podContainerManagerNoop struct{}

func (podContainerManagerNoop) GetPodContainerName(*v1.Pod) (CgroupName, string) {
	return RootCgroupName, ""
}
func (podContainerManagerNoop) EnsureExists(*v1.Pod) error       { return nil }
func (podContainerManagerNoop) Exists(*v1.Pod) bool              { return true }
func (podContainerManagerNoop) Destroy(CgroupName) error         { return nil }
func (podContainerManagerNoop) RemoveIfEmpty(CgroupName) error   { return nil }
func (podContainerManagerNoop) ReduceCPULimits(CgroupName) error { return nil }
func (podContainerManagerNoop) GetAllPodsFromCgroups() (map[types.UID]CgroupName, error) {
	return nil, nil
}
func (podContainerManagerNoop) IsPodCgroup(string) (bool, types.UID) { return false, "" }

// GetPodCgroupConfig is nil: there is no pod cgroup to resize.
func (podContainerManagerNoop) GetPodCgroupConfig(*v1.Pod, v1.ResourceName) (*ResourceConfig, error) {
	return nil, nil
}
func (podContainerManagerNoop) SetPodCgroupConfig(*v1.Pod, *ResourceConfig) error { return nil }
func (podContainerManagerNoop) GetPodCgroupMemoryUsage(*v1.Pod) (uint64, error)   { return 0, nil }
