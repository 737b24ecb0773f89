package kuberuntime

import (
	"encoding/json"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	kubecontainer "mykubelet/mylib/container"
)

// The labels the kubelet puts on every sandbox and container it creates
// (upstream pkg/kubelet/types/labels.go). GetPods groups containers into
// pods by KubernetesPodUIDLabel.
const (
	KubernetesPodNameLabel       = "io.kubernetes.pod.name"
	KubernetesPodNamespaceLabel  = "io.kubernetes.pod.namespace"
	KubernetesPodUIDLabel        = "io.kubernetes.pod.uid"
	KubernetesContainerNameLabel = "io.kubernetes.container.name"
)

// The annotations the kubelet puts on every container (upstream
// pkg/kubelet/kuberuntime/labels.go).
const (
	ContainerHashAnnotation         = "io.kubernetes.container.hash"
	ContainerRestartCountAnnotation = "io.kubernetes.container.restartCount"
)

// labeledContainerInfo is what a container's labels say about its pod.
type labeledContainerInfo struct {
	ContainerName string
	PodName       string
	PodNamespace  string
	PodUID        types.UID
}

func getContainerInfoFromLabels(labels map[string]string) labeledContainerInfo {
	return labeledContainerInfo{
		ContainerName: labels[KubernetesContainerNameLabel],
		PodName:       labels[KubernetesPodNameLabel],
		PodNamespace:  labels[KubernetesPodNamespaceLabel],
		PodUID:        types.UID(labels[KubernetesPodUIDLabel]),
	}
}

// annotatedContainerInfo is what a container's annotations say; a missing or
// malformed value reads as 0, as upstream does (after logging).
type annotatedContainerInfo struct {
	Hash         uint64
	RestartCount int
}

func getContainerInfoFromAnnotations(annotations map[string]string) annotatedContainerInfo {
	var info annotatedContainerInfo
	if v, ok := annotations[ContainerHashAnnotation]; ok {
		info.Hash, _ = strconv.ParseUint(v, 16, 64) // malformed: 0, as upstream
	}
	if v, ok := annotations[ContainerRestartCountAnnotation]; ok {
		info.RestartCount, _ = strconv.Atoi(v) // malformed: 0, as upstream
	}
	return info
}

// More of upstream's container annotations: what the kubelet needs back
// from a container when the pod object is gone (how long to let it stop,
// where its termination message is).
const (
	ContainerTerminationMessagePathAnnotation   = "io.kubernetes.container.terminationMessagePath"
	ContainerTerminationMessagePolicyAnnotation = "io.kubernetes.container.terminationMessagePolicy"
	ContainerPortsAnnotation                    = "io.kubernetes.container.ports"
	PodTerminationGracePeriodAnnotation         = "io.kubernetes.pod.terminationGracePeriod"
	PodDeletionGracePeriodAnnotation            = "io.kubernetes.pod.deletionGracePeriod"
)

// newPodLabels are the sandbox's labels: the pod's own, and the three that
// say which pod it is.
func newPodLabels(pod *v1.Pod) map[string]string {
	labels := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		labels[k] = v
	}
	labels[KubernetesPodNameLabel] = pod.Name
	labels[KubernetesPodNamespaceLabel] = pod.Namespace
	labels[KubernetesPodUIDLabel] = string(pod.UID)
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
		KubernetesPodNameLabel:       pod.Name,
		KubernetesPodNamespaceLabel:  pod.Namespace,
		KubernetesPodUIDLabel:        string(pod.UID),
		KubernetesContainerNameLabel: container.Name,
	}
}

// newContainerAnnotations carry what GetPodStatus reads back (hash, restart
// count) and what stopping the container needs without its pod.
func newContainerAnnotations(container *v1.Container, pod *v1.Pod, restartCount int) map[string]string {
	annotations := map[string]string{
		ContainerHashAnnotation:                     strconv.FormatUint(kubecontainer.HashContainer(container), 16),
		ContainerRestartCountAnnotation:             strconv.Itoa(restartCount),
		ContainerTerminationMessagePathAnnotation:   container.TerminationMessagePath,
		ContainerTerminationMessagePolicyAnnotation: string(container.TerminationMessagePolicy),
	}
	if pod.DeletionGracePeriodSeconds != nil {
		annotations[PodDeletionGracePeriodAnnotation] = strconv.FormatInt(*pod.DeletionGracePeriodSeconds, 10)
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		annotations[PodTerminationGracePeriodAnnotation] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	if len(container.Ports) > 0 {
		if b, err := json.Marshal(container.Ports); err == nil { // []ContainerPort always marshals
			annotations[ContainerPortsAnnotation] = string(b)
		}
	}
	return annotations
}

// podTerminationGracePeriodFromAnnotations reads the grace period a
// container's pod had, for stopping a container whose pod is gone.
func podTerminationGracePeriodFromAnnotations(annotations map[string]string) (int64, bool) {
	for _, k := range []string{PodDeletionGracePeriodAnnotation, PodTerminationGracePeriodAnnotation} {
		if v, ok := annotations[k]; ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n, true
			}
		}
	}
	return 0, false
}
