package qos

import (
	v1 "k8s.io/api/core/v1"

	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/lifecycle"
)

// OOM score adjustments (upstream: pkg/kubelet/qos/policy.go). The kernel
// ranks processes for its OOM killer by the share of the machine's memory
// each uses, in thousandths, plus the process's oom_score_adj (-1000 to
// 1000): the highest score is killed first.
const (
	// guaranteedOOMScoreAdj: a Guaranteed container is killed last,
	// after every other pod's (the kubelet's own is -999).
	guaranteedOOMScoreAdj = -997
	// besteffortOOMScoreAdj: a BestEffort container is killed first.
	besteffortOOMScoreAdj = 1000
)

// GetContainerOOMScoreAdjust is the oom_score_adj the runtime gives the
// container's processes: -997 in a Guaranteed pod (or a
// system-node-critical one), 1000 in a BestEffort pod, and in a Burstable
// pod 1000 less its memory request's share of the machine's memory in
// thousandths, kept between 3 and 999. So a Burstable container that
// uses what it asked for scores about 1000, like a BestEffort one that
// uses nothing, and the one over its request is killed first.
//
// Two refinements, as upstream's: a pod-level memory request
// (spec.resources) that its containers do not take up is shared equally
// among them, and a sidecar (an init container with restartPolicy
// Always) scores no higher than the pod's smallest regular container, so
// the kernel does not kill it before the containers it serves. pod is
// the allocated pod: a resize changes the score, at the container's next
// start. memoryCapacity is the node's memory in bytes, as its status
// reports it.
func GetContainerOOMScoreAdjust(pod *v1.Pod, container *v1.Container, memoryCapacity int64) int {
	if kubetypes.IsNodeCriticalPod(pod) {
		return guaranteedOOMScoreAdj
	}
	switch GetPodQOS(pod) {
	case v1.PodQOSGuaranteed:
		return guaranteedOOMScoreAdj
	case v1.PodQOSBestEffort:
		return besteffortOOMScoreAdj
	}
	if memoryCapacity <= 0 {
		return besteffortOOMScoreAdj - 1 // no machine to measure against: the highest a Burstable one gets
	}
	var share int64 // of a pod-level memory request its containers leave
	if lifecycle.IsPodLevelRequestsSet(pod) {
		share = remainingPodMemReqPerContainer(pod)
	}
	adjust := func(request int64) int64 { return 1000 - 1000*(request+share)/memoryCapacity }
	score := adjust(container.Resources.Requests.Memory().Value())
	if isSidecarContainer(pod, container) {
		score = min(score, adjust(minRegularContainerMemory(pod)))
	}
	// Above a Guaranteed container's, and below a BestEffort one's.
	return int(min(max(score, 1000+guaranteedOOMScoreAdj), besteffortOOMScoreAdj-1))
}

// isSidecarContainer: the container is one of the pod's init containers
// with restartPolicy Always.
func isSidecarContainer(pod *v1.Pod, container *v1.Container) bool {
	if container.RestartPolicy == nil || *container.RestartPolicy != v1.ContainerRestartPolicyAlways {
		return false
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == container.Name {
			return true
		}
	}
	return false
}

// minRegularContainerMemory is the smallest memory request of the pod's
// regular containers.
func minRegularContainerMemory(pod *v1.Pod) int64 {
	least := pod.Spec.Containers[0].Resources.Requests.Memory().Value()
	for _, c := range pod.Spec.Containers[1:] {
		least = min(least, c.Resources.Requests.Memory().Value())
	}
	return least
}

// remainingPodMemReqPerContainer is the pod-level memory request less
// what its containers request, shared equally among all its containers
// (init containers included); zero when the containers take it all.
func remainingPodMemReqPerContainer(pod *v1.Pod) int64 {
	podRequest := pod.Spec.Resources.Requests.Memory().Value()
	if podRequest == 0 {
		return 0
	}
	containers := lifecycle.AggregateContainerRequests(pod)
	remaining := max(podRequest-containers.Memory().Value(), 0)
	return remaining / int64(len(pod.Spec.Containers)+len(pod.Spec.InitContainers))
}
