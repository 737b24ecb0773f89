package kubelet

import (
	v1 "k8s.io/api/core/v1"

	kubecontainer "mykubelet/mylib/container"
)

// convertToAPIEphemeralContainerStatuses returns the statuses of the pod's
// ephemeral containers. TODO(seam): none yet.
func convertToAPIEphemeralContainerStatuses(pod *v1.Pod, podStatus *kubecontainer.PodStatus, previous []v1.ContainerStatus, reasons *ReasonCache) []v1.ContainerStatus {
	return nil
}
