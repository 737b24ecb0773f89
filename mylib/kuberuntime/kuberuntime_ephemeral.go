package kuberuntime

import (
	v1 "k8s.io/api/core/v1"

	kubecontainer "mykubelet/mylib/container"
)

// ephemeralContainersToStart returns the indexes into
// pod.Spec.EphemeralContainers of the ephemeral containers SyncPod must
// start now. TODO(seam): ephemeral containers are not started yet.
func ephemeralContainersToStart(pod *v1.Pod, podStatus *kubecontainer.PodStatus, changes podActions) []int {
	return nil
}
