package kuberuntime

import (
	"strconv"

	"k8s.io/apimachinery/pkg/types"
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
