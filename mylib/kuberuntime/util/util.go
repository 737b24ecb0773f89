// Package util holds what both the runtime manager and the status
// generator ask of a pod's sandboxes, as upstream's
// pkg/kubelet/kuberuntime/util: the status package reads it without
// depending on the runtime manager.
package util

import (
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "mykubelet/mylib/container"
)

// PodSandboxChanged tells whether the pod needs a new sandbox, and if so
// with which attempt number and which sandbox it replaces: there is none,
// the newest is not ready, more than one is ready, or the pod's network
// mode changed.
func PodSandboxChanged(pod *v1.Pod, podStatus *kubecontainer.PodStatus) (changed bool, attempt uint32, sandboxID string) {
	if len(podStatus.SandboxStatuses) == 0 {
		return true, 0, ""
	}
	ready := 0
	for _, s := range podStatus.SandboxStatuses {
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready++
		}
	}
	newest := podStatus.SandboxStatuses[0]
	attempt = newest.GetMetadata().GetAttempt() + 1
	if ready > 1 || newest.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return true, attempt, newest.Id
	}
	hostNetwork := newest.GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
	if hostNetwork != kubecontainer.IsHostNetworkPod(pod) {
		return true, attempt, newest.Id
	}
	if !hostNetwork && newest.GetNetwork().GetIp() == "" {
		return true, attempt, newest.Id // a pod network sandbox without an IP
	}
	return false, newest.GetMetadata().GetAttempt(), newest.Id
}
