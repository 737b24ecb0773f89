// The resources of a pod's containers, as upstream's in-place pod resize
// (InPlacePodVerticalScaling) keeps them: what the kubelet allocated to
// each container when it admitted the pod, checkpointed in the root
// directory (mylib/allocation), and what the status says of them:
// allocatedResources (the allocation's requests) and resources (the
// allocation, with what the runtime reports it applies in place of the
// CPU and memory it can tell). Upstream: allocationManager.AddPod in
// HandlePodAdditions (pkg/kubelet/kubelet.go), convertToAPIContainerStatuses
// in pkg/kubelet/kubelet_pods.go.
//
// Where it departs from upstream, and why (one line each):
//   - no allocation without a root directory (PodsConfig.RootDirectory):
//     there is nowhere to checkpoint it, and the status is as before.

package kubelet

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"mykubelet/mylib/allocation"
	kubecontainer "mykubelet/mylib/container"
)

// minMilliCPULimit is the least CPU limit the kernel enforces, the least
// quota (1 ms) in the CFS period (100 ms), as upstream's cm.MinMilliCPULimit.
const minMilliCPULimit = 10

// minMilliCPURequest is the CPU request whose shares are upstream's
// cm.MinShares (2): a request at or below it is read back as it.
const minMilliCPURequest = 2

// newAllocationManager reads back the allocations checkpointed in root.
func (kl *Kubelet) newAllocationManager(root string) error {
	m, err := allocation.NewManager(root)
	if err != nil {
		return fmt.Errorf("kubelet: %w", err)
	}
	kl.allocationManager = m
	return nil
}

// allocate records the resources of an admitted pod as its allocation,
// unless it has one already (the kubelet restarted: what it allocated
// then still holds) or it has ended (upstream: allocationManager.AddPod).
func (kl *Kubelet) allocate(pod *v1.Pod) {
	if kl.allocationManager == nil || isTerminalPhase(pod.Status.Phase) || len(pod.Spec.Containers) == 0 {
		return
	}
	if _, ok := kl.allocationManager.GetContainerResourceAllocation(pod.UID, pod.Spec.Containers[0].Name); ok {
		return
	}
	if err := kl.allocationManager.SetAllocatedResources(pod); err != nil {
		// Logged, as upstream: the pod runs with its spec's resources,
		// and its status shows no allocation until one is recorded.
		klog.ErrorS(err, "Failed to record the pod's allocated resources", "pod", klog.KObj(pod))
	}
}

// removeOrphanedAllocations forgets the allocations of pods the pod
// manager no longer holds (upstream: in HandlePodCleanups).
func (kl *Kubelet) removeOrphanedAllocations(pods []*v1.Pod) {
	if kl.allocationManager == nil {
		return
	}
	uids := sets.New[types.UID]()
	for _, p := range pods {
		uids.Insert(p.UID)
	}
	kl.allocationManager.RemoveOrphanedPods(uids)
}

// containerAllocations is what the status needs of the allocation
// manager: a container's allocated resources.
type containerAllocations interface {
	GetContainerResourceAllocation(podUID types.UID, containerName string) (v1.ResourceRequirements, bool)
}

// allocations returns the allocation manager as containerAllocations, a
// nil interface (not a nil *Manager) without one.
func (kl *Kubelet) allocations() containerAllocations {
	if kl.allocationManager == nil {
		return nil
	}
	return kl.allocationManager
}

// setContainerStatusResources fills st's allocatedResources and
// resources, as upstream's convertToAPIContainerStatuses: a container with
// no allocation (an ephemeral container, an init container that is not a
// sidecar) gets neither. A container that is not running shows its
// allocation; a running one shows what the runtime reports it applies in
// place of the allocation's CPU request, CPU limit and memory limit, or,
// when the runtime does not say, what its previous status showed of the
// same running container.
func setContainerStatusResources(allocs containerAllocations, podUID types.UID, st *v1.ContainerStatus, cs *kubecontainer.Status, old v1.ContainerStatus, hadOld bool) {
	if allocs == nil {
		return
	}
	alloc, ok := allocs.GetContainerResourceAllocation(podUID, st.Name) // a copy: ours to change
	if !ok {
		return
	}
	st.AllocatedResources = alloc.Requests
	if cs.State != kubecontainer.ContainerStateRunning {
		st.Resources = &alloc
		return
	}
	var oldResources v1.ResourceRequirements
	if old.Resources != nil {
		oldResources = *old.Resources
	}
	// preserve keeps the previous status's value of a resource the runtime
	// did not report, if that status was of this same running container.
	preserve := func(name v1.ResourceName, from, to v1.ResourceList) {
		if hadOld && old.State.Running != nil && old.ContainerID == st.ContainerID && from != nil {
			if q, ok := from[name]; ok {
				to[name] = q.DeepCopy()
			}
		}
	}
	r := cs.Resources
	resources := *alloc.DeepCopy() // AllocatedResources keeps alloc.Requests as it is
	if resources.Limits != nil {
		// A CPU limit at or below the least the kernel enforces shows as
		// allocated, when both are: the runtime's reads back rounded.
		if r != nil && r.CPULimit != nil {
			if r.CPULimit.MilliValue() > minMilliCPULimit || resources.Limits.Cpu().MilliValue() > minMilliCPULimit {
				resources.Limits[v1.ResourceCPU] = r.CPULimit.DeepCopy()
			}
		} else {
			preserve(v1.ResourceCPU, oldResources.Limits, resources.Limits)
		}
		if r != nil && r.MemoryLimit != nil {
			resources.Limits[v1.ResourceMemory] = r.MemoryLimit.DeepCopy()
		} else {
			preserve(v1.ResourceMemory, oldResources.Limits, resources.Limits)
		}
	}
	if resources.Requests != nil {
		if r != nil && r.CPURequest != nil {
			if r.CPURequest.MilliValue() > minMilliCPURequest || resources.Requests.Cpu().MilliValue() > minMilliCPURequest {
				resources.Requests[v1.ResourceCPU] = r.CPURequest.DeepCopy()
			}
		} else {
			preserve(v1.ResourceCPU, oldResources.Requests, resources.Requests)
		}
	}
	st.Resources = &resources
}
