package kuberuntime

import (
	"encoding/json"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/kubetypes"
)

// The labels and annotations themselves (io.kubernetes.*) are in
// mylib/kubetypes (labels.go), shared with the mock runtime; GetPods
// groups containers into pods by kubetypes.KubernetesPodUIDLabel.

// labeledContainerInfo is what a container's labels say about its pod.
type labeledContainerInfo struct {
	ContainerName string
	PodName       string
	PodNamespace  string
	PodUID        types.UID
}

func getContainerInfoFromLabels(labels map[string]string) labeledContainerInfo {
	return labeledContainerInfo{
		ContainerName: labels[kubetypes.KubernetesContainerNameLabel],
		PodName:       labels[kubetypes.KubernetesPodNameLabel],
		PodNamespace:  labels[kubetypes.KubernetesPodNamespaceLabel],
		PodUID:        types.UID(labels[kubetypes.KubernetesPodUIDLabel]),
	}
}

// annotatedContainerInfo is what a container's annotations say; a missing or
// malformed value reads as 0, as upstream does (after logging).
type annotatedContainerInfo struct {
	Hash         uint64
	RestartCount int
	// TerminationMessagePath and TerminationMessagePolicy are the
	// container's, for reading its termination message after it exits.
	TerminationMessagePath   string
	TerminationMessagePolicy v1.TerminationMessagePolicy
}

func getContainerInfoFromAnnotations(annotations map[string]string) annotatedContainerInfo {
	var info annotatedContainerInfo
	if v, ok := annotations[kubetypes.ContainerHashAnnotation]; ok {
		info.Hash, _ = strconv.ParseUint(v, 16, 64) // malformed: 0, as upstream
	}
	if v, ok := annotations[kubetypes.ContainerRestartCountAnnotation]; ok {
		info.RestartCount, _ = strconv.Atoi(v) // malformed: 0, as upstream
	}
	info.TerminationMessagePath = annotations[kubetypes.ContainerTerminationMessagePathAnnotation]
	info.TerminationMessagePolicy = v1.TerminationMessagePolicy(annotations[kubetypes.ContainerTerminationMessagePolicyAnnotation])
	return info
}

// newPodLabels are the sandbox's labels: the pod's own, and the three that
// say which pod it is.
func newPodLabels(pod *v1.Pod) map[string]string {
	labels := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		labels[k] = v
	}
	labels[kubetypes.KubernetesPodNameLabel] = pod.Name
	labels[kubetypes.KubernetesPodNamespaceLabel] = pod.Namespace
	labels[kubetypes.KubernetesPodUIDLabel] = string(pod.UID)
	return labels
}

// newPodAnnotations are the sandbox's annotations: the pod's.
func newPodAnnotations(pod *v1.Pod) map[string]string {
	annotations := make(map[string]string, len(pod.Annotations))
	for k, v := range pod.Annotations {
		annotations[k] = v
	}
	return annotations
}

// newContainerLabels say which pod and which container of it a container is
// (`crictl ps` shows the pod's name from them).
func newContainerLabels(container *v1.Container, pod *v1.Pod) map[string]string {
	return map[string]string{
		kubetypes.KubernetesPodNameLabel:       pod.Name,
		kubetypes.KubernetesPodNamespaceLabel:  pod.Namespace,
		kubetypes.KubernetesPodUIDLabel:        string(pod.UID),
		kubetypes.KubernetesContainerNameLabel: container.Name,
	}
}

// newContainerAnnotations carry what GetPodStatus reads back (hash, restart
// count) and what stopping the container needs without its pod.
func newContainerAnnotations(container *v1.Container, pod *v1.Pod, restartCount int) map[string]string {
	annotations := map[string]string{
		kubetypes.ContainerHashAnnotation:                     strconv.FormatUint(kubecontainer.HashContainer(container), 16),
		kubetypes.ContainerRestartCountAnnotation:             strconv.Itoa(restartCount),
		kubetypes.ContainerTerminationMessagePathAnnotation:   container.TerminationMessagePath,
		kubetypes.ContainerTerminationMessagePolicyAnnotation: string(container.TerminationMessagePolicy),
	}
	if pod.DeletionGracePeriodSeconds != nil {
		annotations[kubetypes.PodDeletionGracePeriodAnnotation] = strconv.FormatInt(*pod.DeletionGracePeriodSeconds, 10)
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		annotations[kubetypes.PodTerminationGracePeriodAnnotation] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	if len(container.Ports) > 0 {
		if b, err := json.Marshal(container.Ports); err == nil { // []ContainerPort always marshals
			annotations[kubetypes.ContainerPortsAnnotation] = string(b)
		}
	}
	return annotations
}

// podTerminationGracePeriodFromAnnotations reads the grace period a
// container's pod had, for stopping a container whose pod is gone.
func podTerminationGracePeriodFromAnnotations(annotations map[string]string) (int64, bool) {
	for _, k := range []string{kubetypes.PodDeletionGracePeriodAnnotation, kubetypes.PodTerminationGracePeriodAnnotation} {
		if v, ok := annotations[k]; ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n, true
			}
		}
	}
	return 0, false
}
