package allocation

import (
	"fmt"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// The checkpoint files, in the directory given to NewManager, named as
// upstream's.
const (
	allocatedPodsStateFile = "allocated_pods_state"
	actuatedPodsStateFile  = "actuated_pods_state"
)

// Manager records the resources allocated to each pod and those actuated
// for it. It is safe for concurrent use.
type Manager struct {
	allocated *state
	actuated  *state
}

// NewManager reads the checkpoints in dir back (none there: nothing is
// recorded yet). A checkpoint that cannot be read is an error: the
// kubelet cannot know what it allocated, and upstream's advice holds:
// drain the node and delete the file before restarting the kubelet.
func NewManager(dir string) (*Manager, error) {
	allocated, err := newState(filepath.Join(dir, allocatedPodsStateFile))
	if err != nil {
		return nil, fmt.Errorf("allocation manager: %w", err)
	}
	actuated, err := newState(filepath.Join(dir, actuatedPodsStateFile))
	if err != nil {
		return nil, fmt.Errorf("allocation manager: %w", err)
	}
	return &Manager{allocated: allocated, actuated: actuated}, nil
}

// GetContainerResourceAllocation returns the resources allocated to the
// container, and whether any are recorded.
func (m *Manager) GetContainerResourceAllocation(podUID types.UID, containerName string) (v1.ResourceRequirements, bool) {
	return m.allocated.container(podUID, containerName)
}

// UpdatePodFromAllocation returns pod with its allocated resources in
// place of the spec's (its containers', its sidecars', its pod-level
// ones), and whether any differed. The pod is copied only when one did;
// a pod with no allocation is returned as it is.
func (m *Manager) UpdatePodFromAllocation(pod *v1.Pod) (*v1.Pod, bool) {
	alloc, ok := m.allocated.pod(pod.UID)
	if !ok {
		return pod, false
	}
	updated := false
	copied := func() *v1.Pod {
		if !updated {
			pod, updated = pod.DeepCopy(), true
		}
		return pod
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if r, ok := alloc.ContainerResources[c.Name]; ok && !apiequality.Semantic.DeepEqual(c.Resources, r) {
			copied().Spec.Containers[i].Resources = r
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if r, ok := alloc.ContainerResources[c.Name]; ok && !apiequality.Semantic.DeepEqual(c.Resources, r) {
			copied().Spec.InitContainers[i].Resources = r
		}
	}
	if r := alloc.PodLevelResources; r != nil && !apiequality.Semantic.DeepEqual(pod.Spec.Resources, r) {
		copied().Spec.Resources = r
	}
	return pod, updated
}

// SetAllocatedResources records pod's resources, as its spec has them,
// as its allocation.
func (m *Manager) SetAllocatedResources(pod *v1.Pod) error {
	if err := m.allocated.setPod(pod.UID, resourcesOf(pod)); err != nil {
		return fmt.Errorf("set allocated resources of %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// SetActuatedResources records what the runtime now applies: container's
// resources, or all of allocatedPod's when container is nil.
func (m *Manager) SetActuatedResources(allocatedPod *v1.Pod, container *v1.Container) error {
	var err error
	if container == nil {
		err = m.actuated.setPod(allocatedPod.UID, resourcesOf(allocatedPod))
	} else {
		err = m.actuated.setContainer(allocatedPod.UID, container.Name, container.Resources)
	}
	if err != nil {
		return fmt.Errorf("set actuated resources of %s/%s: %w", allocatedPod.Namespace, allocatedPod.Name, err)
	}
	return nil
}

// GetActuatedResources returns the resources last actuated for the
// container, and whether any are recorded.
func (m *Manager) GetActuatedResources(podUID types.UID, containerName string) (v1.ResourceRequirements, bool) {
	return m.actuated.container(podUID, containerName)
}

// GetActuatedPodLevelResources returns the pod-level resources last
// actuated for the pod (nil if it has none), and whether its pod-level
// resources are recorded at all.
func (m *Manager) GetActuatedPodLevelResources(podUID types.UID) (*v1.ResourceRequirements, bool) {
	info, ok := m.actuated.pod(podUID)
	if !ok || info.PodLevelResources == nil {
		return nil, false
	}
	return info.PodLevelResources, true
}

// SetActuatedPodLevelResources records allocatedPod's pod-level resources
// (spec.resources) as what the pod's cgroup and containers now apply
// (upstream: the actuated state's SetPodLevelResources). A pod without
// any is not recorded.
func (m *Manager) SetActuatedPodLevelResources(allocatedPod *v1.Pod) error {
	if allocatedPod.Spec.Resources == nil {
		return nil
	}
	if err := m.actuated.setPodLevel(allocatedPod.UID, allocatedPod.Spec.Resources); err != nil {
		return fmt.Errorf("set actuated pod-level resources of %s/%s: %w", allocatedPod.Namespace, allocatedPod.Name, err)
	}
	return nil
}

// RemovePod forgets the pod.
func (m *Manager) RemovePod(uid types.UID) {
	m.allocated.remove(uid)
	m.actuated.remove(uid)
}

// RemoveOrphanedPods forgets every pod whose UID is not in remaining.
// The files keep them until the next write; if the kubelet restarts
// first, the next call forgets them again.
func (m *Manager) RemoveOrphanedPods(remaining sets.Set[types.UID]) {
	m.allocated.removeOrphans(remaining)
	m.actuated.removeOrphans(remaining)
}

// resourcesOf is what is recorded of pod: the resources of its containers
// and of its sidecars (restartable init containers, which run alongside
// them and can be resized too; other init containers have ended), and
// its pod-level resources.
func resourcesOf(pod *v1.Pod) PodResourceInfo {
	info := PodResourceInfo{
		ContainerResources: map[string]v1.ResourceRequirements{},
		PodLevelResources:  pod.Spec.Resources.DeepCopy(),
	}
	for _, c := range pod.Spec.Containers {
		info.ContainerResources[c.Name] = *c.Resources.DeepCopy()
	}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			info.ContainerResources[c.Name] = *c.Resources.DeepCopy()
		}
	}
	return info
}
