package kubetypes

// The labels the kubelet puts on every sandbox and container it creates,
// which say which pod (and which container of it) a runtime's object is:
// the kubelet groups a runtime's containers into pods by
// KubernetesPodUIDLabel, and `crictl ps` shows the pod's name from
// KubernetesPodNameLabel. The mock runtime puts the same ones on the pods
// it seeds. Upstream: pkg/kubelet/types/labels.go.
const (
	KubernetesPodNameLabel       = "io.kubernetes.pod.name"
	KubernetesPodNamespaceLabel  = "io.kubernetes.pod.namespace"
	KubernetesPodUIDLabel        = "io.kubernetes.pod.uid"
	KubernetesContainerNameLabel = "io.kubernetes.container.name"
)

// The annotations the kubelet puts on every container: what it reads back
// from the runtime (the container's hash and restart count) and what it
// needs to stop a container whose pod object is gone (how long to let it
// stop, where its termination message is). Departure: upstream keeps
// these in pkg/kubelet/kuberuntime/labels.go, unexported; here they are
// beside the labels, so that every io.kubernetes.* key is in one place,
// for the kubelet and the mock runtime alike.
const (
	ContainerHashAnnotation                     = "io.kubernetes.container.hash"
	ContainerRestartCountAnnotation             = "io.kubernetes.container.restartCount"
	ContainerTerminationMessagePathAnnotation   = "io.kubernetes.container.terminationMessagePath"
	ContainerTerminationMessagePolicyAnnotation = "io.kubernetes.container.terminationMessagePolicy"
	ContainerPortsAnnotation                    = "io.kubernetes.container.ports"
	PodTerminationGracePeriodAnnotation         = "io.kubernetes.pod.terminationGracePeriod"
	PodDeletionGracePeriodAnnotation            = "io.kubernetes.pod.deletionGracePeriod"
)
