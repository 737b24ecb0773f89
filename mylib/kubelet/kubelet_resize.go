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
// A resize (a changed spec, through the pods/resize subresource) is
// admitted as upstream's allocation manager does (handlePodResourcesResize,
// canResizePod): Infeasible if the pod's new requests exceed the node's
// allocatable, Deferred if they do not fit beside the other pods'
// allocations now (retried later), else allocated; the status manager
// holds the PodResizePending condition that says which.
//
// An allocated resize is then actuated by the runtime manager's SyncPod
// (mylib/kuberuntime: computePodResizeAction, doPodResizeAction), which
// gets the allocated pod: a running container whose allocated CPU or
// memory differs from what was actuated is updated in place through CRI
// UpdateContainerResources (resizePolicy NotRequired, the default) or
// restarted (RestartContainer), and what it applies is recorded as
// actuated; with a container manager, the pod's cgroup is resized too,
// before the containers for what grows and after them for what shrinks.
// After each sync of a pod so resized, the pod cache is read again
// (pleg.UpdateCache: no container event shows a resize) and
// PodResizeInProgress is looked at again, and cleared once actuated
// equals allocated. At admission, and after a restart, each pod counts
// with its allocation, so a resize not yet allocated takes no room.
//
// Where it departs from upstream, and why (one line each):
//   - no allocation without a root directory (PodsConfig.RootDirectory):
//     there is nowhere to checkpoint it, and the status is as before;
//   - without PodsConfig.Admit every resize is allocated, as every pod is
//     admitted: admission is off, with no Node to check against;
//   - pending resizes are retried at each housekeeping, when a pod is
//     updated and when one is removed, not on a 3-minute ticker of their own;
//   - the node's allocatable is read from the Node's status (admission's
//     copy), not from the container manager;
//   - no CPU/memory manager static policies and no swap: none exist here.

package kubelet

import (
	"context"
	"fmt"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"mykubelet/mylib/allocation"
	"mykubelet/mylib/cm"
	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/kubetypes"
	kubelifecycle "mykubelet/mylib/lifecycle"
)

// InPlacePodLevelResourcesVerticalScaling is the feature a node declares
// (status.declaredFeatures) when its kubelet resizes a pod's pod-level
// resources in place: without it the API server refuses such a resize.
const InPlacePodLevelResourcesVerticalScaling = "InPlacePodLevelResourcesVerticalScaling"

// declaredFeatures are the features this node declares in
// status.declaredFeatures (NodeDeclaredFeatures, GA in v1.37): the API
// server refuses a pod update that needs a feature the pod's node does not
// declare (its NodeDeclaredFeatureValidator admission), and the scheduler
// places a pod that needs one only on a node that declares it. Upstream
// discovers them from its feature gates
// (k8s.io/component-helpers/nodedeclaredfeatures); this kubelet declares
// what it does: the pod-level resize with an allocation manager (a root
// directory), nothing without.
func (kl *Kubelet) declaredFeatures() []string {
	if kl.allocationManager == nil {
		return nil
	}
	return []string{InPlacePodLevelResourcesVerticalScaling}
}

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

// pendingResizes are the UIDs of the pods whose resize waits to be
// allocated (upstream: the allocation manager's podsWithPendingResizes).
type pendingResizes struct {
	mu   sync.Mutex
	uids []types.UID
}

// pushPendingResize queues the pod's resize if its spec differs from its
// allocation (upstream: PushPendingResize), and says whether it did.
func (kl *Kubelet) pushPendingResize(pod *v1.Pod) bool {
	if kl.allocationManager == nil || isTerminalPhase(pod.Status.Phase) {
		return false
	}
	if _, differs := kl.allocationManager.UpdatePodFromAllocation(pod); !differs {
		return false
	}
	kl.pendingResizes.mu.Lock()
	defer kl.pendingResizes.mu.Unlock()
	if !slices.Contains(kl.pendingResizes.uids, pod.UID) {
		kl.pendingResizes.uids = append(kl.pendingResizes.uids, pod.UID)
	}
	return true
}

// retryPendingResizes tries each pending resize again; those still
// deferred stay queued. A pod whose resize was allocated is synced, so
// that the runtime applies it, and so is one whose resize conditions
// changed, so that its status says so (upstream: RetryPendingResizes).
func (kl *Kubelet) retryPendingResizes(ctx context.Context) {
	if kl.allocationManager == nil {
		return
	}
	kl.pendingResizes.mu.Lock()
	defer kl.pendingResizes.mu.Unlock()
	var still []types.UID
	for _, uid := range kl.pendingResizes.uids {
		pod, ok := kl.podManager.GetPodByUID(uid)
		if !ok || kl.podWorkers.IsPodTerminationRequested(uid) {
			continue // gone, or going: nothing to resize
		}
		before := kl.statusManager.GetPodResizeConditions(uid)
		allocated, err := kl.handlePodResourcesResize(ctx, pod)
		switch {
		case err != nil:
			klog.FromContext(ctx).Error(err, "Failed to handle the pod's resize; will retry", "pod", klog.KObj(pod))
			still = append(still, uid)
		case kl.statusManager.IsPodResizeDeferred(uid):
			still = append(still, uid)
		}
		if allocated || !apiequality.Semantic.DeepEqual(before, kl.statusManager.GetPodResizeConditions(uid)) {
			kl.dispatchWork(ctx, pod, kubetypes.SyncPodSync)
		}
	}
	kl.pendingResizes.uids = still
}

// handlePodResourcesResize allocates the pod's resize if the node can
// take it, or says why not in the PodResizePending condition; the pod's
// PodResizeInProgress condition is then set while its running containers'
// actuated resources differ from the allocation. allocated: the resize
// was allocated now.
func (kl *Kubelet) handlePodResourcesResize(ctx context.Context, pod *v1.Pod) (allocated bool, err error) {
	allocatedPod, differs := kl.allocationManager.UpdatePodFromAllocation(pod)
	defer func() {
		if err == nil {
			kl.updateResizeInProgress(allocatedPod)
		}
	}()
	if !differs {
		kl.statusManager.ClearPodResizePendingCondition(pod.UID)
		return false, nil
	}
	fit, reason, message, err := kl.canResizePod(ctx, pod)
	if err != nil {
		return false, err
	}
	if !fit {
		kl.statusManager.SetPodResizePendingCondition(pod.UID, reason, message)
		return false, nil
	}
	if err := kl.allocationManager.SetAllocatedResources(pod); err != nil {
		return false, err
	}
	allocatedPod = pod
	kl.printf("pod %s/%s resize allocated", pod.Namespace, pod.Name)
	kl.statusManager.ClearPodResizePendingCondition(pod.UID)
	kl.statusManager.ClearPodResizeInProgressCondition(pod.UID) // set again below if it is in progress
	return true, nil
}

// canResizePod tells whether pod, with its new resources, fits the node:
// not Infeasible (its requests within the node's allocatable) and not
// Deferred (admitted beside the other active pods, each with its
// allocation). Upstream's messages.
func (kl *Kubelet) canResizePod(ctx context.Context, pod *v1.Pod) (fit bool, reason, message string, err error) {
	if kl.admission == nil {
		return true, "", "", nil
	}
	node, err := kl.getNodeAnyWay(ctx, true)
	if err != nil {
		return false, "", "", fmt.Errorf("resize of %s/%s: the node: %w", pod.Namespace, pod.Name, err)
	}
	requests := kubelifecycle.PodRequests(pod)
	cpuRequests, memRequests := requests.Cpu().MilliValue(), requests.Memory().Value()
	cpuAvailable, memAvailable := node.Status.Allocatable.Cpu().MilliValue(), node.Status.Allocatable.Memory().Value()
	if cpuRequests > cpuAvailable || memRequests > memAvailable {
		msg := fmt.Sprintf("cpu, requested: %d, capacity: %d", cpuRequests, cpuAvailable)
		if memRequests > memAvailable {
			msg = fmt.Sprintf("memory, requested: %d, capacity: %d", memRequests, memAvailable)
		}
		return false, v1.PodReasonInfeasible, "Node didn't have enough capacity: " + msg, nil
	}
	var others []*v1.Pod
	for _, p := range kl.activePods() {
		if p.UID != pod.UID {
			allocated, _ := kl.allocationManager.UpdatePodFromAllocation(p)
			others = append(others, allocated)
		}
	}
	if r := kl.admission.handlers.Admit(ctx, &kubelifecycle.PodAdmitAttributes{Pod: pod, OtherPods: others}); !r.Admit {
		return false, v1.PodReasonDeferred, r.Message, nil
	}
	return true, "", "", nil
}

// updateResizeInProgress sets the pod's PodResizeInProgress condition
// while a running container's actuated CPU or memory differs from its
// allocation, and clears it once none does (upstream:
// IsPodResizeInProgress).
func (kl *Kubelet) updateResizeInProgress(allocatedPod *v1.Pod) {
	podStatus, err := kl.podCache.Get(allocatedPod.UID)
	if err != nil {
		return // nothing known of the runtime yet: nothing running to resize
	}
	kl.setResizeInProgress(allocatedPod, podStatus)
}

// setResizeInProgress is updateResizeInProgress with the runtime's
// status of the pod at hand (after a sync, fresher than the cache's).
func (kl *Kubelet) setResizeInProgress(allocatedPod *v1.Pod, podStatus *kubecontainer.PodStatus) {
	if kl.isPodResizeInProgress(allocatedPod, podStatus) {
		kl.statusManager.SetPodResizeInProgressCondition(allocatedPod.UID, "", "")
	} else {
		kl.statusManager.ClearPodResizeInProgressCondition(allocatedPod.UID)
	}
}

// isResizeInProgressCondition: the pod has the PodResizeInProgress
// condition.
func (kl *Kubelet) isResizeInProgressCondition(uid types.UID) bool {
	for _, c := range kl.statusManager.GetPodResizeConditions(uid) {
		if c.Type == v1.PodResizeInProgress {
			return true
		}
	}
	return false
}

// isPodResizeInProgress: a running resizable container (a regular one or
// a sidecar) whose actuated CPU or memory differs from its allocation
// (its limits as it gets them: the pod's where it sets none), or, for a
// pod with pod-level resources, those actuated differing from those
// allocated.
func (kl *Kubelet) isPodResizeInProgress(allocatedPod *v1.Pod, podStatus *kubecontainer.PodStatus) bool {
	actuatedPod, ok := kl.allocationManager.GetActuatedPodLevelResources(allocatedPod.UID)
	if r := allocatedPod.Spec.Resources; r != nil && ok && !cpuMemoryEqual(*r, *actuatedPod) {
		return true
	}
	containers := slices.Clone(allocatedPod.Spec.Containers)
	for _, c := range allocatedPod.Spec.InitContainers {
		if kubecontainer.IsRestartableInitContainer(&c) {
			containers = append(containers, c)
		}
	}
	for _, c := range containers {
		cs := podStatus.FindContainerStatusByName(c.Name)
		if cs == nil || cs.State != kubecontainer.ContainerStateRunning {
			continue // sized right when it (re)starts
		}
		actuated, _ := kl.allocationManager.GetActuatedResources(allocatedPod.UID, c.Name)
		allocated := v1.ResourceRequirements{Requests: c.Resources.Requests, Limits: kubelifecycle.ContainerLimits(allocatedPod.Spec.Resources, c.Resources)}
		actuated.Limits = kubelifecycle.ContainerLimits(actuatedPod, actuated)
		if !cpuMemoryEqual(allocated, actuated) {
			return true
		}
	}
	return false
}

// cpuMemoryEqual: a and b have the same CPU and memory requests and limits.
func cpuMemoryEqual(a, b v1.ResourceRequirements) bool {
	for _, l := range []struct{ a, b v1.ResourceList }{{a.Requests, b.Requests}, {a.Limits, b.Limits}} {
		for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			if !l.a[name].Equal(l.b[name]) {
				return false
			}
		}
	}
	return true
}

// withResizeConditions appends the pod's resize conditions to s.
func (kl *Kubelet) withResizeConditions(pod *v1.Pod, s *v1.PodStatus) {
	if kl.allocationManager == nil {
		return
	}
	for _, c := range kl.statusManager.GetPodResizeConditions(pod.UID) {
		c.ObservedGeneration = pod.Generation
		s.Conditions = append(s.Conditions, *c)
	}
}

// setPodLevelResourcesStatus fills the pod's status.allocatedResources
// (the allocated pod's requests, summed over its containers or its
// pod-level ones) and status.resources, as upstream's generateAPIPodStatus
// does for every pod (InPlacePodLevelResourcesVerticalScaling, on by
// default): for a running pod, what its cgroup applies
// (convertToAPIPodLevelResourcesStatus); for any other, its allocated
// requests and limits. Without a pod cgroup (the mock runtime's node)
// the allocated ones stand for what is applied: the runtime applies
// them to each container, and nothing else could be read.
func (kl *Kubelet) setPodLevelResourcesStatus(pod *v1.Pod, s *v1.PodStatus, old v1.PodStatus) {
	allocatedPod := pod
	if kl.allocationManager != nil {
		allocatedPod, _ = kl.allocationManager.UpdatePodFromAllocation(pod)
	}
	s.AllocatedResources = kubelifecycle.PodRequests(allocatedPod)
	effective := &v1.ResourceRequirements{Requests: s.AllocatedResources.DeepCopy(), Limits: cm.PodLimits(allocatedPod)}
	if pod.Status.Phase != v1.PodRunning || kl.containerManager == nil {
		s.Resources = effective
		return
	}
	pcm := kl.containerManager.NewPodContainerManager()
	memoryConfig, merr := pcm.GetPodCgroupConfig(allocatedPod, v1.ResourceMemory)
	cpuConfig, cerr := pcm.GetPodCgroupConfig(allocatedPod, v1.ResourceCPU)
	if merr == nil && cerr == nil && memoryConfig == nil && cpuConfig == nil {
		s.Resources = effective // no pod cgroup
		return
	}
	resources := allocatedPod.Spec.Resources.DeepCopy()
	if resources == nil {
		resources = &v1.ResourceRequirements{}
	}
	if resources.Requests == nil {
		resources.Requests = v1.ResourceList{}
	}
	if resources.Limits == nil {
		resources.Limits = v1.ResourceList{}
	}
	// preserve keeps the last status's value of what the cgroup could not
	// tell, while the pod runs on.
	preserve := func(name v1.ResourceName, from, to v1.ResourceList) {
		if old.Phase == v1.PodRunning && old.Resources != nil {
			if q, ok := from[name]; ok {
				to[name] = q.DeepCopy()
			}
		}
	}
	var oldResources v1.ResourceRequirements
	if old.Resources != nil {
		oldResources = *old.Resources
	}
	// A value at or below the least the kernel enforces shows as
	// allocated when both are: the cgroup's reads back rounded.
	if q := cm.CPURequestsFromConfig(cpuConfig); q != nil {
		// On cgroup v2 the shares are kept as a coarser cpu.weight: shares
		// that read back as the allocated request's would after that round
		// trip show the allocated request, as upstream's do.
		allocatedShares := cm.MilliCPUToShares(resources.Requests.Cpu().MilliValue())
		roundTrip := *cpuConfig.CPUShares == cm.CPUWeightToShares(cm.CPUWeight(allocatedShares))
		if (q.MilliValue() > cm.MinShares || resources.Requests.Cpu().MilliValue() > cm.MinShares) && !roundTrip {
			resources.Requests[v1.ResourceCPU] = *q
		}
	} else {
		preserve(v1.ResourceCPU, oldResources.Requests, resources.Requests)
	}
	if _, ok := resources.Requests[v1.ResourceMemory]; !ok {
		if q, ok := s.AllocatedResources[v1.ResourceMemory]; ok {
			resources.Requests[v1.ResourceMemory] = q.DeepCopy()
		}
	}
	if q := cm.CPULimitsFromConfig(cpuConfig); q != nil {
		if q.MilliValue() > minMilliCPULimit || resources.Limits.Cpu().MilliValue() > minMilliCPULimit {
			resources.Limits[v1.ResourceCPU] = *q
		}
	} else {
		preserve(v1.ResourceCPU, oldResources.Limits, resources.Limits)
	}
	if q := cm.MemoryLimitsFromConfig(memoryConfig); q != nil {
		resources.Limits[v1.ResourceMemory] = *q
	} else {
		preserve(v1.ResourceMemory, oldResources.Limits, resources.Limits)
	}
	s.Resources = resources
}
