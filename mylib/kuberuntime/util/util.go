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

// NamespacesForPod is the namespaces a pod's sandbox and containers ask
// the runtime for (upstream's, without user namespaces): IPC, network
// and PID by IpcNamespaceForPod, NetworkNamespaceForPod and
// PidNamespaceForPod.
func NamespacesForPod(pod *v1.Pod) *runtimeapi.NamespaceOption {
	return &runtimeapi.NamespaceOption{
		Ipc:     IpcNamespaceForPod(pod),
		Network: NetworkNamespaceForPod(pod),
		Pid:     PidNamespaceForPod(pod),
	}
}

// IpcNamespaceForPod is NODE for hostIPC, else POD.
func IpcNamespaceForPod(pod *v1.Pod) runtimeapi.NamespaceMode {
	if pod != nil && pod.Spec.HostIPC {
		return runtimeapi.NamespaceMode_NODE
	}
	return runtimeapi.NamespaceMode_POD
}

// NetworkNamespaceForPod is NODE for hostNetwork, else POD.
func NetworkNamespaceForPod(pod *v1.Pod) runtimeapi.NamespaceMode {
	if pod != nil && pod.Spec.HostNetwork {
		return runtimeapi.NamespaceMode_NODE
	}
	return runtimeapi.NamespaceMode_POD
}

// PidNamespaceForPod is NODE for hostPID, POD for
// shareProcessNamespace (the pause process is PID 1 of every
// container), else CONTAINER: each container's command is its own PID 1.
// (Unlike IPC and network, PID does not default to the zero value, POD.)
func PidNamespaceForPod(pod *v1.Pod) runtimeapi.NamespaceMode {
	if pod != nil {
		if pod.Spec.HostPID {
			return runtimeapi.NamespaceMode_NODE
		}
		if pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace {
			return runtimeapi.NamespaceMode_POD
		}
	}
	return runtimeapi.NamespaceMode_CONTAINER
}
