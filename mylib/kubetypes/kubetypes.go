// Package kubetypes holds the small vocabulary the kubelet's packages share:
// the PodUpdate that pod sources send, the names of those sources, the
// annotations the kubelet puts on the pods it manages, and the
// io.kubernetes.* labels and annotations it puts on sandboxes and
// containers (labels.go), which the runtime and the mock runtime read.
//
// Upstream: pkg/kubelet/types (pod_update.go, types.go, labels.go).
//
// Where it departs from upstream, and why (one line each):
//   - two pod sources, FileSource and ApiserverSource: no HTTPSource (this
//     kubelet reads no --manifest-url) and no AllSource;
//   - no Preemptable: this kubelet does not preempt pods to admit a
//     critical one.
package kubetypes

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Annotations the kubelet adds to the pods it manages.
const (
	// ConfigSourceAnnotationKey says where a pod came from: FileSource or
	// ApiserverSource.
	ConfigSourceAnnotationKey = "kubernetes.io/config.source"
	// ConfigMirrorAnnotationKey marks a mirror pod; its value is the hash of
	// the static pod it mirrors (v1.MirrorPodAnnotationKey).
	ConfigMirrorAnnotationKey = v1.MirrorPodAnnotationKey
	// ConfigFirstSeenAnnotationKey is when the kubelet first saw the pod.
	ConfigFirstSeenAnnotationKey = "kubernetes.io/config.seen"
	// ConfigHashAnnotationKey is a static pod's hash (equal to its UID).
	ConfigHashAnnotationKey = "kubernetes.io/config.hash"
)

// Pod sources.
const (
	// FileSource is the static pod directory (--pod-manifest-path).
	FileSource = "file"
	// ApiserverSource is the API server: pods whose spec.nodeName is this node.
	ApiserverSource = "api"
)

// PodOperation says what a PodUpdate does.
type PodOperation int

// The operations, in upstream's order.
const (
	// SET is a source's complete list of pods: anything not in it is gone.
	// Sources send SET; PodConfig turns it into the operations below.
	SET PodOperation = iota
	// ADD: pods new to this source.
	ADD
	// UPDATE: pods whose spec, labels or annotations changed.
	UPDATE
	// REMOVE: pods that disappeared from the source.
	REMOVE
	// RECONCILE: only the pod's status changed (the kubelet owns status, so
	// it should put it right).
	RECONCILE
	// DELETE: pods marked for graceful deletion (deletionTimestamp set).
	DELETE
)

func (op PodOperation) String() string {
	switch op {
	case SET:
		return "SET"
	case ADD:
		return "ADD"
	case UPDATE:
		return "UPDATE"
	case REMOVE:
		return "REMOVE"
	case RECONCILE:
		return "RECONCILE"
	case DELETE:
		return "DELETE"
	}
	return fmt.Sprintf("PodOperation(%d)", int(op))
}

// PodUpdate is one message on a pod config channel. Pods is never nil.
type PodUpdate struct {
	Pods   []*v1.Pod
	Op     PodOperation
	Source string
}

// GetPodSource returns the pod's config.source annotation.
func GetPodSource(pod *v1.Pod) (string, error) {
	if source, ok := pod.Annotations[ConfigSourceAnnotationKey]; ok {
		return source, nil
	}
	return "", fmt.Errorf("pod %s/%s (uid %s) has no %s annotation", pod.Namespace, pod.Name, pod.UID, ConfigSourceAnnotationKey)
}

// IsStaticPod reports whether the pod came from a source other than the API
// server (for us: a manifest file).
func IsStaticPod(pod *v1.Pod) bool {
	source, err := GetPodSource(pod)
	return err == nil && source != ApiserverSource
}

// IsMirrorPod reports whether the pod is a mirror pod: the API server's copy
// of a static pod.
func IsMirrorPod(pod *v1.Pod) bool {
	_, ok := pod.Annotations[ConfigMirrorAnnotationKey]
	return ok
}

// SystemCriticalPriority is the least priority of a critical pod
// (upstream: scheduling.SystemCriticalPriority, 2 billion: the
// priority classes system-cluster-critical and system-node-critical).
const SystemCriticalPriority = int32(2000000000)

// SystemNodeCritical is the priority class of the pods a node cannot do
// without (upstream: scheduling.SystemNodeCritical).
const SystemNodeCritical = "system-node-critical"

// IsCriticalPod reports whether the pod is critical: a static or mirror
// pod, or one whose priority is at least SystemCriticalPriority. The
// eviction manager never evicts one and always admits it.
func IsCriticalPod(pod *v1.Pod) bool {
	if IsStaticPod(pod) || IsMirrorPod(pod) {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= SystemCriticalPriority
}

// IsNodeCriticalPod reports whether the pod is critical and of the
// priority class system-node-critical: its containers get the OOM score
// of a Guaranteed pod's, whatever its resources (mylib/qos).
func IsNodeCriticalPod(pod *v1.Pod) bool {
	return IsCriticalPod(pod) && pod.Spec.PriorityClassName == SystemNodeCritical
}

// GetPodFullName is "name_namespace", the key the kubelet uses for a pod
// when its UID is not enough (a static pod and its mirror pod share it).
func GetPodFullName(pod *v1.Pod) string { return BuildPodFullName(pod.Name, pod.Namespace) }

// BuildPodFullName builds a full name from its parts.
func BuildPodFullName(name, namespace string) string { return name + "_" + namespace }

// ParsePodFullName splits "name_namespace".
func ParsePodFullName(fullName string) (name, namespace string, err error) {
	// Names and namespaces cannot contain "_", so the last one separates them.
	for i := len(fullName) - 1; i >= 0; i-- {
		if fullName[i] == '_' {
			name, namespace = fullName[:i], fullName[i+1:]
			if name == "" || namespace == "" {
				break
			}
			return name, namespace, nil
		}
	}
	return "", "", fmt.Errorf("pod full name %q is not name_namespace", fullName)
}

// Timestamp formats t as the kubelet writes config.seen: RFC 3339 with
// nanoseconds, always nine digits.
func Timestamp(t time.Time) string {
	return t.Format("2006-01-02T15:04:05.000000000Z07:00")
}

// SyncPodType says why a pod worker is asked to sync a pod.
type SyncPodType int

// The sync types, in upstream's order.
const (
	// SyncPodSync: a periodic or event-driven resync.
	SyncPodSync SyncPodType = iota
	// SyncPodUpdate: the pod changed in its source.
	SyncPodUpdate
	// SyncPodCreate: the pod is new.
	SyncPodCreate
	// SyncPodKill: the pod must stop (removed from its source, or evicted).
	SyncPodKill
)

func (t SyncPodType) String() string {
	switch t {
	case SyncPodSync:
		return "sync"
	case SyncPodUpdate:
		return "update"
	case SyncPodCreate:
		return "create"
	case SyncPodKill:
		return "kill"
	}
	return "unknown"
}
