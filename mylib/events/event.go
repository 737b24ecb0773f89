// Package events holds the reasons of the events the kubelet records, as
// upstream's pkg/kubelet/events, and NewRecorder, which builds client-go's
// event recorder the way the kubelet does: source component "kubelet", host
// the node's name, written with the node's own credentials (so the Node
// authorizer and NodeRestriction decide which events it may create).
//
//	recorder, stop := events.NewRecorder(ctx, client, nodeName)
//	defer stop()
//	recorder.Eventf(pod, v1.EventTypeNormal, events.PulledImage, "Successfully pulled image %q", image)
//
// Every reason the pod half records on pods is here; the node's reasons
// (Starting, NodeReady, NodeHasSufficientMemory…) are in
// reasons_nodestatus.go. Upstream's list also has the image GC and
// eviction reasons, which here live beside the code that records them (mylib/images: FreeDiskSpaceFailed, InvalidDiskCapacity,
// ImageGCFailed, BackOff; mylib/eviction: Evicted, EvictionThresholdMet);
// the kubelet's own ExceedMaxGracePeriod is here.
// HostPathMapped is the course's own. Two reasons upstream writes where they are
// used (FailedToRetrieveImagePullSecret in kubelet_pods.go, DeadlineExceeded
// in active_deadline.go) are here too, so that one file lists them all. The
// reasons of a pod that admission rejects (OutOfcpu, NodeAffinity, …) are
// the admit handlers' results, in mylib/lifecycle, as upstream.
package events

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedv1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// Container event reasons.
const (
	CreatedContainer        = "Created"
	StartedContainer        = "Started"
	FailedToCreateContainer = "Failed"
	FailedToStartContainer  = "Failed"
	KillingContainer        = "Killing"
	BackOffStartContainer   = "BackOff"
)

// Container lifecycle hook event reasons.
const (
	FailedPostStartHook = "FailedPostStartHook"
	FailedPreStopHook   = "FailedPreStopHook"
)

// Pod event reasons.
const (
	FailedToKillPod                 = "FailedKillPod"
	NetworkNotReady                 = "NetworkNotReady"
	FailedToRetrieveImagePullSecret = "FailedToRetrieveImagePullSecret"
	FailedToMakePodDataDirectories  = "Failed"
	// FailedToCreatePodContainer: the pod's cgroup could not be made
	// (mylib/cm).
	FailedToCreatePodContainer = "FailedCreatePodContainer"
	// DeadlineExceeded fails a pod past its spec.activeDeadlineSeconds
	// (upstream: the reason in pkg/kubelet/active_deadline.go).
	DeadlineExceeded = "DeadlineExceeded"
)

// Volume event reasons.
const (
	// FailedMountVolume: a volume could not be set up (the volume manager's
	// reconciler), or a pod's volumes were not mounted in time (SyncPod).
	FailedMountVolume = "FailedMount"
	// HostPathMapped is the course's: a hostPath volume's path is mapped
	// under the kubelet's root directory, never the node's own file system.
	HostPathMapped = "HostPathMapped"
)

// Image event reasons.
const (
	PullingImage            = "Pulling"
	PulledImage             = "Pulled"
	FailedToPullImage       = "Failed"
	FailedToInspectImage    = "InspectFailed"
	ErrImageNeverPullPolicy = "ErrImageNeverPull"
)

// Eviction event reasons the kubelet records itself (the eviction
// manager's are in mylib/eviction).
const (
	// ExceedMaxGracePeriod: a pod killed for eviction did not stop in time.
	ExceedMaxGracePeriod = "ExceedMaxGracePeriod"
)

// Sandbox event reasons.
const (
	FailedCreatePodSandBox = "FailedCreatePodSandBox"
	FailedStatusPodSandBox = "FailedPodSandBoxStatus"
	SandboxChanged         = "SandboxChanged"
)

// Probe event reasons.
const (
	ContainerUnhealthy    = "Unhealthy"
	ContainerProbeWarning = "ProbeWarning"
)

// ComponentKubelet is the event source's component.
const ComponentKubelet = "kubelet"

// NewRecorder returns an EventRecorder that writes events through client
// (the node's credentials) as component "kubelet" on host nodeName, and a
// stop function that flushes and ends the broadcaster.
func NewRecorder(ctx context.Context, client kubernetes.Interface, nodeName string) (record.EventRecorder, func()) {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedv1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: ComponentKubelet, Host: nodeName})
	return recorder, broadcaster.Shutdown
}
