package kuberuntime

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/kubetypes"
)

// Ephemeral containers (`kubectl debug`) are added to a running pod through
// its ephemeralcontainers subresource. As upstream, each starts once, even
// while init containers have not finished, and is never restarted: a
// debugging container that exited stays exited.

// ephemeralContainersToStart returns the indexes into
// pod.Spec.EphemeralContainers of the ephemeral containers SyncPod must
// start now: those the runtime has never seen (no status at all), as
// upstream's computePodActions. None while the pod is being killed or its
// sandbox (re)created: the next sync starts them in the new sandbox.
func ephemeralContainersToStart(pod *v1.Pod, podStatus *kubecontainer.PodStatus, changes podActions) []int {
	if changes.KillPod || changes.CreateSandbox {
		return nil
	}
	var toStart []int
	for i := range pod.Spec.EphemeralContainers {
		if podStatus.FindContainerStatusByName(pod.Spec.EphemeralContainers[i].Name) == nil {
			toStart = append(toStart, i)
		}
	}
	return toStart
}

// ephemeralContainer returns the pod's ephemeral container of that name,
// or nil when the name is a regular or init container's.
func ephemeralContainer(pod *v1.Pod, name string) *v1.EphemeralContainer {
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return &pod.Spec.EphemeralContainers[i]
		}
	}
	return nil
}

// containerFieldPath is the field path of a regular or ephemeral container
// in the pod's spec, as upstream's fieldpath.ExtractContainerFieldPath:
// events about an ephemeral container name spec.ephemeralContainers{NAME}.
func containerFieldPath(pod *v1.Pod, name string) string {
	if ephemeralContainer(pod, name) != nil {
		return fmt.Sprintf("spec.ephemeralContainers{%s}", name)
	}
	return fmt.Sprintf("spec.containers{%s}", name)
}

// applyEphemeralTarget gives an ephemeral container with a
// targetContainerName the process namespace of that container, as
// upstream's namespacesForPod does with the target's ID: PID namespace
// mode TARGET and TargetId. The target must be running (upstream's
// getTargetID error otherwise). Upstream finds the target in the pod's
// status; this asks the runtime for the running container of that name
// in the pod, which is the same container.
func (m *Manager) applyEphemeralTarget(ctx context.Context, config *runtimeapi.ContainerConfig, container *v1.Container, pod *v1.Pod) error {
	ec := ephemeralContainer(pod, container.Name)
	if ec == nil || ec.TargetContainerName == "" {
		return nil
	}
	resp, err := m.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{
			kubetypes.KubernetesPodUIDLabel:        string(pod.UID),
			kubetypes.KubernetesContainerNameLabel: ec.TargetContainerName,
		}}})
	if err != nil || len(resp.GetContainers()) == 0 {
		return fmt.Errorf("unable to find target container %v", ec.TargetContainerName)
	}
	network := runtimeapi.NamespaceMode_POD
	if kubecontainer.IsHostNetworkPod(pod) {
		network = runtimeapi.NamespaceMode_NODE
	}
	if config.Linux == nil {
		config.Linux = &runtimeapi.LinuxContainerConfig{}
	}
	if config.Linux.SecurityContext == nil {
		config.Linux.SecurityContext = &runtimeapi.LinuxContainerSecurityContext{}
	}
	config.Linux.SecurityContext.NamespaceOptions = &runtimeapi.NamespaceOption{
		Network:  network,
		Ipc:      runtimeapi.NamespaceMode_POD,
		Pid:      runtimeapi.NamespaceMode_TARGET,
		TargetId: resp.GetContainers()[0].GetId(),
	}
	return nil
}
