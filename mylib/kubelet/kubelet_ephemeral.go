package kubelet

import (
	v1 "k8s.io/api/core/v1"

	kubecontainer "mykubelet/mylib/container"
)

// convertToAPIEphemeralContainerStatuses returns the statuses of the pod's
// ephemeral containers, sorted by name, as upstream: the same
// conversion as the regular containers' (Waiting ContainerCreating, or
// PodInitializing in a pod with init containers, until the runtime has
// the container; then Running or Terminated as the runtime says; a failed
// start's reason while waiting). Unlike regular containers they are never
// probed, so, as upstream shows them, never ready and with no started.
func convertToAPIEphemeralContainerStatuses(pod *v1.Pod, podStatus *kubecontainer.PodStatus, previous []v1.ContainerStatus, reasons *ReasonCache) []v1.ContainerStatus {
	if len(pod.Spec.EphemeralContainers) == 0 {
		return nil
	}
	specs := make([]v1.Container, 0, len(pod.Spec.EphemeralContainers))
	for i := range pod.Spec.EphemeralContainers {
		specs = append(specs, v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	statuses := convertToAPIContainerStatuses(pod, podStatus, previous, specs, len(pod.Spec.InitContainers) > 0, false, reasons, nil) // not resizable: no allocation
	for i := range statuses {
		statuses[i].Ready, statuses[i].Started = false, nil
	}
	return statuses
}
