package container

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/volume"
)

// EnvVar is one environment variable of a container to run.
type EnvVar struct {
	Name  string
	Value string
}

// Mount is one file or directory of the node mapped into a container, or
// an image volume (upstream's kubecontainer.Mount, without propagation or
// SELinux).
type Mount struct {
	// Name is the volume's name, or "k8s-managed-etc-hosts".
	Name string
	// ContainerPath is where the container sees it (absolute).
	ContainerPath string
	// HostPath is the node's file or directory (absolute, under the
	// kubelet's root directory); "" for an image volume.
	HostPath string
	ReadOnly bool
	// Image is an image volume's image, pulled by the kubelet: the runtime
	// mounts its files (read-only) instead of a host path.
	Image *runtimeapi.ImageSpec
	// ImageSubPath is the mount's subPath inside that image.
	ImageSubPath string
}

// ImageVolumes are the pod's image volumes, by volume name: the image the
// kubelet pulled for each (upstream's kubecontainer.ImageVolumes).
type ImageVolumes map[string]*runtimeapi.ImageSpec

// RunContainerOptions is what the kubelet computes for a container before
// the runtime creates it. Upstream also carries devices, annotations and
// the like.
type RunContainerOptions struct {
	Envs []EnvVar
	// Mounts are the container's volume mounts and /etc/hosts.
	Mounts []Mount
	// PodContainerDir is <pod dir>/containers/<container name>, where the
	// runtime manager creates the termination-message file; "": none.
	PodContainerDir string
}

// VolumeInfo is one mounted volume of a pod, as the volume manager hands
// it to the kubelet (upstream's kubecontainer.VolumeInfo, without the
// block-volume and SELinux fields).
type VolumeInfo struct {
	// Mounter's GetPath is the volume's directory on the node.
	Mounter volume.Mounter
	// ReadOnly: the pod's volume source says so (e.g. a PVC's readOnly).
	ReadOnly bool
}

// VolumeMap is a pod's mounted volumes by their name in the pod spec.
type VolumeMap map[string]VolumeInfo

// ExpandContainerVolumeMounts expands a volumeMount's subPathExpr with the
// container's environment, as upstream: a $(VAR) that is not set, or is
// empty, is an error naming it.
func ExpandContainerVolumeMounts(mount v1.VolumeMount, envs []EnvVar) (string, error) {
	vars := make(map[string]string, len(envs))
	for _, e := range envs {
		vars[e.Name] = e.Value
	}
	missing := map[string]bool{}
	expanded := Expand(mount.SubPathExpr, func(key string) string {
		v := vars[key]
		if v == "" {
			missing[key] = true
		}
		return v
	})
	if len(missing) > 0 {
		keys := make([]string, 0, len(missing))
		for k := range missing {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return "", fmt.Errorf("missing value for %s", strings.Join(keys, ", "))
	}
	return expanded, nil
}

// RuntimeHelper is what the runtime manager asks the kubelet about a pod:
// the container's environment, the pod's DNS and hostname (upstream
// kubecontainer.RuntimeHelper, reduced to these three).
type RuntimeHelper interface {
	// GenerateRunContainerOptions: imageVolumes are the pod's pulled
	// image volumes (nil: none).
	GenerateRunContainerOptions(ctx context.Context, pod *v1.Pod, container *v1.Container, podIP string, podIPs []string, imageVolumes ImageVolumes) (*RunContainerOptions, error)
	// GetPodDNS returns the sandbox's DNS configuration; nil leaves it to the runtime.
	GetPodDNS(pod *v1.Pod) (*runtimeapi.DNSConfig, error)
	GeneratePodHostNameAndDomain(pod *v1.Pod) (hostname, hostDomain string, err error)
	// GetPodCgroupParent is the pod's cgroup, the sandbox's CgroupParent
	// (mylib/cm: /kubepods/burstable/pod<uid>); "" leaves it to the runtime.
	GetPodCgroupParent(pod *v1.Pod) string
}

// HashContainer hashes a container's spec, so that a change of spec (the
// pod was edited: a new image) is noticed. Upstream hashes the same spec
// with another encoder, so the values differ from a real kubelet's.
func HashContainer(container *v1.Container) uint64 {
	c := container.DeepCopy()
	c.Resources = v1.ResourceRequirements{} // resized in place, not restarted
	b, _ := json.Marshal(c)                 // a v1.Container always marshals
	h := fnv.New32a()
	h.Write(b)
	return uint64(h.Sum32())
}

// ShouldContainerBeRestarted tells whether a container that is not running
// should be started (again), by the pod's restartPolicy.
func ShouldContainerBeRestarted(container *v1.Container, pod *v1.Pod, podStatus *PodStatus) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	status := podStatus.FindContainerStatusByName(container.Name)
	if status == nil {
		return true // never started
	}
	switch status.State {
	case ContainerStateRunning:
		return false
	case ContainerStateUnknown, ContainerStateCreated:
		return true
	}
	if IsRestartableInitContainer(container) {
		return true // a sidecar restarts whatever the pod's policy
	}
	return ContainerShouldRestart(container, &pod.Spec, int32(status.ExitCode))
}

// ContainerShouldRestart tells whether a container that exited with
// exitCode is started again: by the first of its restartPolicyRules whose
// exit codes match (action Restart), else by its own restartPolicy, else
// by the pod's (upstream's podutil.ContainerShouldRestart, with the
// ContainerRestartRules feature, beta and on by default since 1.35). The
// RestartAllContainers action (an alpha feature, off) falls back to the
// container's policy, as upstream's with its gate off.
func ContainerShouldRestart(c *v1.Container, spec *v1.PodSpec, exitCode int32) bool {
	if c.RestartPolicy != nil {
		if rule, ok := matchingRestartRule(c, exitCode); ok && rule.Action == v1.ContainerRestartRuleActionRestart {
			return true
		}
		switch *c.RestartPolicy {
		case v1.ContainerRestartPolicyAlways:
			return true
		case v1.ContainerRestartPolicyOnFailure:
			return exitCode != 0
		case v1.ContainerRestartPolicyNever:
			return false
		}
	}
	switch spec.RestartPolicy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return true // Always, the default
}

// matchingRestartRule is the first rule whose exit codes match: In the
// list, or NotIn it.
func matchingRestartRule(c *v1.Container, exitCode int32) (v1.ContainerRestartRule, bool) {
	for _, r := range c.RestartPolicyRules {
		if r.ExitCodes == nil {
			continue
		}
		in := slices.Contains(r.ExitCodes.Values, exitCode)
		switch r.ExitCodes.Operator {
		case v1.ContainerRestartRuleOnExitCodesOpIn:
			if in {
				return r, true
			}
		case v1.ContainerRestartRuleOnExitCodesOpNotIn:
			if !in {
				return r, true
			}
		}
	}
	return v1.ContainerRestartRule{}, false
}

// IsRestartableInitContainer tells whether an init container is a sidecar:
// its restartPolicy is Always, so it keeps running beside the regular
// containers and is restarted whenever it exits (upstream's
// podutil.IsRestartableInitContainer). Only init containers may set it.
func IsRestartableInitContainer(initContainer *v1.Container) bool {
	return initContainer != nil && initContainer.RestartPolicy != nil && *initContainer.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// HasAnyActiveRegularContainerStarted tells whether a regular container of
// the pod is running now, which means every init container has done its
// part. Unlike upstream, which reads the current sandbox's containers, it
// reads the newest status of each name.
func HasAnyActiveRegularContainerStarted(spec *v1.PodSpec, podStatus *PodStatus) bool {
	if podStatus == nil {
		return false
	}
	for i := range spec.Containers {
		if s := podStatus.FindContainerStatusByName(spec.Containers[i].Name); s != nil && s.State == ContainerStateRunning {
			return true
		}
	}
	return false
}

// ExpandContainerCommandAndArgs expands $(VAR) in a container's command and
// args with its environment.
func ExpandContainerCommandAndArgs(container *v1.Container, envs []EnvVar) (command, args []string) {
	vars := make(map[string]string, len(envs))
	for _, e := range envs {
		vars[e.Name] = e.Value
	}
	mapping := MappingFuncFor(vars)
	for _, c := range container.Command {
		command = append(command, Expand(c, mapping))
	}
	for _, a := range container.Args {
		args = append(args, Expand(a, mapping))
	}
	return command, args
}

// ConvertPodStatusToRunningPod returns the Pod that KillPod needs from a
// PodStatus: its running containers and all its sandboxes.
func ConvertPodStatusToRunningPod(runtimeName string, podStatus *PodStatus) Pod {
	pod := Pod{ID: podStatus.ID, Name: podStatus.Name, Namespace: podStatus.Namespace}
	for _, cs := range podStatus.ContainerStatuses {
		if cs.State != ContainerStateRunning {
			continue
		}
		pod.Containers = append(pod.Containers, &Container{
			ID: cs.ID, Name: cs.Name, Image: cs.Image, ImageID: cs.ImageID, Hash: cs.Hash, State: cs.State,
		})
	}
	for _, s := range podStatus.SandboxStatuses {
		state := ContainerStateExited
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			state = ContainerStateRunning
		}
		pod.Sandboxes = append(pod.Sandboxes, &Container{
			ID: ContainerID{Type: runtimeName, ID: s.Id}, State: state, PodSandboxID: s.Id, CreatedAt: s.CreatedAt,
		})
	}
	return pod
}

// IsHostNetworkPod reports whether the pod uses the node's network.
func IsHostNetworkPod(pod *v1.Pod) bool {
	return pod.Spec.HostNetwork
}
