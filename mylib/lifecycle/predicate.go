package lifecycle

import (
	"context"
	"fmt"
	"runtime"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Reasons a pod is rejected with, as upstream's.
const (
	// InvalidNodeInfo: the kubelet could not read its own Node.
	InvalidNodeInfo = "InvalidNodeInfo"
	// InsufficientResourcePrefix starts every "not enough room" reason.
	InsufficientResourcePrefix = "OutOf"
	OutOfCPU                   = "OutOfcpu"
	OutOfMemory                = "OutOfmemory"
	OutOfEphemeralStorage      = "OutOfephemeral-storage"
	OutOfPods                  = "OutOfpods"
	// NodeAffinity is the predicate (the scheduler plugin's name) a node
	// selector or required node affinity mismatch fails.
	NodeAffinity = "NodeAffinity"
	// NodeName is the predicate a pod bound to another node fails.
	NodeName = "NodeName"

	// PodOSSelectorNodeLabelDoesNotMatch: the pod's kubernetes.io/os
	// label names another OS than the node's.
	PodOSSelectorNodeLabelDoesNotMatch = "PodOSSelectorNodeLabelDoesNotMatch"
	// PodOSNotSupported: the pod's spec.os.name is another OS than the
	// node's.
	PodOSNotSupported = "PodOSNotSupported"

	// ErrReasonNodeAffinity and ErrReasonNodeName are the scheduler
	// plugins' descriptions of those failures.
	ErrReasonNodeAffinity = "node(s) didn't match Pod's node affinity/selector"
	ErrReasonNodeName     = "node(s) didn't match the requested node name"
)

// GetNodeFunc returns the kubelet's Node; useCache false asks for a fresh
// copy (upstream: getNodeAnyWay).
type GetNodeFunc func(ctx context.Context, useCache bool) (*v1.Node, error)

// NewPredicateAdmitHandler returns the handler that checks a pod against
// its Node as the scheduler would have (upstream: NewPredicateAdmitHandler).
func NewPredicateAdmitHandler(getNode GetNodeFunc) PodAdmitHandler {
	return &predicateAdmitHandler{getNode: getNode}
}

type predicateAdmitHandler struct {
	getNode GetNodeFunc
}

// InsufficientResourceError says which resource a pod did not fit in.
// Requested, Used and Capacity are in milli-CPUs for cpu, bytes for memory
// and ephemeral storage, a count for pods.
type InsufficientResourceError struct {
	ResourceName v1.ResourceName
	Requested    int64
	Used         int64
	Capacity     int64
}

func (e *InsufficientResourceError) Error() string {
	return fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
		e.ResourceName, e.Requested, e.Used, e.Capacity)
}

// PredicateFailureError is a failed check that is not about room.
type PredicateFailureError struct {
	PredicateName string
	PredicateDesc string
}

func (e *PredicateFailureError) Error() string {
	return fmt.Sprintf("Predicate %s failed: %s", e.PredicateName, e.PredicateDesc)
}

// Admit checks attrs.Pod; the first failure decides the reason, as upstream.
func (w *predicateAdmitHandler) Admit(ctx context.Context, attrs *PodAdmitAttributes) PodAdmitResult {
	logger := klog.FromContext(ctx)
	node, err := w.getNode(ctx, true)
	if err != nil {
		logger.Error(err, "Cannot get Node info")
		return PodAdmitResult{Reason: InvalidNodeInfo, Message: "Kubelet cannot get node info."}
	}
	// The checks no eviction could help come first, as upstream's.
	if rejectPodAdmissionBasedOnOSSelector(attrs.Pod, node) {
		return PodAdmitResult{Reason: PodOSSelectorNodeLabelDoesNotMatch,
			Message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"}
	}
	if rejectPodAdmissionBasedOnOSField(attrs.Pod) {
		return PodAdmitResult{Reason: PodOSNotSupported, Message: "Failed to admit pod as the OS field doesn't match node OS"}
	}
	failures := GeneralPredicates(attrs.Pod, attrs.OtherPods, node)
	if onlyNodeAffinity(failures) {
		// The node's labels may have changed a moment ago: look again
		// without the cache before rejecting, as upstream does.
		if fresh, err := w.getNode(ctx, false); err == nil {
			failures = GeneralPredicates(attrs.Pod, attrs.OtherPods, fresh)
		}
	}
	if len(failures) == 0 {
		return PodAdmitResult{Admit: true}
	}
	result := PodAdmitResult{Message: failures[0].Error()}
	switch f := failures[0].(type) {
	case *InsufficientResourceError:
		result.Reason = InsufficientResourcePrefix + string(f.ResourceName)
	case *PredicateFailureError:
		result.Reason = f.PredicateName
	}
	logger.V(2).Info("Predicate failed on Pod", "pod", klog.KObj(attrs.Pod), "err", result.Message)
	return result
}

// rejectPodAdmissionBasedOnOSSelector tells whether the pod's own
// kubernetes.io/os label names another OS than the node's, as upstream:
// the node's OS is the one the kubelet runs on, whatever its label says.
func rejectPodAdmissionBasedOnOSSelector(pod *v1.Pod, node *v1.Node) bool {
	nodeOS := node.Labels[v1.LabelOSStable]
	if nodeOS != runtime.GOOS {
		nodeOS = runtime.GOOS
	}
	podOS, ok := pod.Labels[v1.LabelOSStable]
	return ok && podOS != nodeOS
}

// rejectPodAdmissionBasedOnOSField tells whether the pod's spec.os.name
// is another OS than the one the kubelet runs on.
func rejectPodAdmissionBasedOnOSField(pod *v1.Pod) bool {
	return pod.Spec.OS != nil && string(pod.Spec.OS.Name) != runtime.GOOS
}

func onlyNodeAffinity(failures []error) bool {
	for _, f := range failures {
		if p, ok := f.(*PredicateFailureError); !ok || p.PredicateName != NodeAffinity {
			return false
		}
	}
	return len(failures) > 0
}

// GeneralPredicates returns every reason pod cannot run on node beside
// otherPods (upstream: the scheduler's AdmissionCheck with all failures):
// the resources first (pods, cpu, memory, ephemeral-storage), then node
// affinity, then the node name. Nil means it fits.
func GeneralPredicates(pod *v1.Pod, otherPods []*v1.Pod, node *v1.Node) []error {
	var failures []error
	for _, r := range Fits(pod, otherPods, node) {
		failures = append(failures, r)
	}
	if !RequiredNodeAffinityMatches(pod, node) {
		failures = append(failures, &PredicateFailureError{PredicateName: NodeAffinity, PredicateDesc: ErrReasonNodeAffinity})
	}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		failures = append(failures, &PredicateFailureError{PredicateName: NodeName, PredicateDesc: ErrReasonNodeName})
	}
	return failures
}

// Fits returns the resources pod does not fit in (upstream: noderesources
// fitsRequest): one more pod than allocatable pods, or a request (if not
// zero) above allocatable minus what otherPods request.
func Fits(pod *v1.Pod, otherPods []*v1.Pod, node *v1.Node) []*InsufficientResourceError {
	var out []*InsufficientResourceError
	alloc := node.Status.Allocatable
	if allowed := alloc.Pods().Value(); int64(len(otherPods))+1 > allowed {
		out = append(out, &InsufficientResourceError{ResourceName: v1.ResourcePods, Requested: 1, Used: int64(len(otherPods)), Capacity: allowed})
	}
	req := amounts(PodRequests(pod))
	used := amounts(nil)
	for _, p := range otherPods {
		for name, v := range amounts(PodRequests(p)) {
			used[name] += v
		}
	}
	capacity := amounts(alloc)
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage} {
		if req[name] > 0 && req[name] > capacity[name]-used[name] {
			out = append(out, &InsufficientResourceError{ResourceName: name, Requested: req[name], Used: used[name], Capacity: capacity[name]})
		}
	}
	return out
}

// amounts reads cpu in millicores, memory and ephemeral storage in bytes.
func amounts(l v1.ResourceList) map[v1.ResourceName]int64 {
	return map[v1.ResourceName]int64{
		v1.ResourceCPU:              l.Cpu().MilliValue(),
		v1.ResourceMemory:           l.Memory().Value(),
		v1.ResourceEphemeralStorage: l.StorageEphemeral().Value(),
	}
}

// PodRequests is what a pod asks of the node (upstream: component-helpers
// resource.PodRequests with the default options): the sum of its
// containers and sidecars (init containers with restartPolicy Always),
// or, if larger, the largest init container together with the sidecars
// started before it; then a pod-level request (spec.resources.requests)
// of cpu, memory or hugepages replaces that sum for its resource; then
// the pod's overhead.
func PodRequests(pod *v1.Pod) v1.ResourceList {
	reqs := AggregateContainerRequests(pod)
	if IsPodLevelRequestsSet(pod) {
		ApplyPodLevelResources(reqs, pod.Spec.Resources.Requests)
	}
	add(reqs, pod.Spec.Overhead)
	return reqs
}

// AggregateContainerRequests is what the pod's containers ask for
// together (upstream's function of this name): PodRequests without the
// pod-level requests and the overhead.
func AggregateContainerRequests(pod *v1.Pod) v1.ResourceList {
	reqs := v1.ResourceList{}
	for _, c := range pod.Spec.Containers {
		add(reqs, c.Resources.Requests)
	}
	sidecars := v1.ResourceList{}
	initMax := v1.ResourceList{}
	for _, c := range pod.Spec.InitContainers {
		step := v1.ResourceList{}
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			add(reqs, c.Resources.Requests)
			add(sidecars, c.Resources.Requests)
			add(step, sidecars)
		} else {
			add(step, c.Resources.Requests)
			add(step, sidecars)
		}
		maxOf(initMax, step)
	}
	maxOf(reqs, initMax)
	return reqs
}

// IsSupportedPodLevelResource says whether a pod may set name in
// spec.resources (upstream's function of this name): cpu, memory and
// hugepages.
func IsSupportedPodLevelResource(name v1.ResourceName) bool {
	return name == v1.ResourceCPU || name == v1.ResourceMemory || strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

// IsPodLevelResourcesSet says whether the pod sets a supported resource
// in spec.resources, as a request or a limit (upstream's function of this
// name). When it does, the pod's QoS class, its cgroup and the limits of
// its containers that set none come from spec.resources.
func IsPodLevelResourcesSet(pod *v1.Pod) bool {
	return IsPodLevelRequestsSet(pod) || IsPodLevelLimitsSet(pod)
}

// IsPodLevelRequestsSet says whether spec.resources.requests has a
// supported resource.
func IsPodLevelRequestsSet(pod *v1.Pod) bool {
	return pod.Spec.Resources != nil && anySupported(pod.Spec.Resources.Requests)
}

// IsPodLevelLimitsSet says whether spec.resources.limits has a supported
// resource.
func IsPodLevelLimitsSet(pod *v1.Pod) bool {
	return pod.Spec.Resources != nil && anySupported(pod.Spec.Resources.Limits)
}

func anySupported(l v1.ResourceList) bool {
	for name := range l {
		if IsSupportedPodLevelResource(name) {
			return true
		}
	}
	return false
}

// ApplyPodLevelResources overwrites in result each supported resource the
// pod-level list names (upstream: applyPodLevelResources): the pod-level
// amount is the pod's, whatever its containers add up to.
func ApplyPodLevelResources(result, podLevel v1.ResourceList) {
	for name, q := range podLevel {
		if IsSupportedPodLevelResource(name) {
			result[name] = q.DeepCopy()
		}
	}
}

// ContainerLimits are the limits a container gets (upstream: GetLimits
// in pkg/kubelet/util): its own, and, for a CPU or memory limit it does
// not set, the pod's (podLevel is its spec.resources, nil for none). The
// pod-level limit bounds each container too, so a change of it resizes
// the containers that take it.
func ContainerLimits(podLevel *v1.ResourceRequirements, container v1.ResourceRequirements) v1.ResourceList {
	limits := container.Limits.DeepCopy()
	if podLevel == nil {
		return limits
	}
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		own, q := limits[name], podLevel.Limits[name]
		if own.IsZero() && !q.IsZero() {
			if limits == nil {
				limits = v1.ResourceList{}
			}
			limits[name] = q.DeepCopy()
		}
	}
	return limits
}

func add(into, l v1.ResourceList) {
	for name, q := range l {
		sum := into[name]
		sum.Add(q)
		into[name] = sum
	}
}

func maxOf(into, l v1.ResourceList) {
	for name, q := range l {
		if cur, ok := into[name]; !ok || q.Cmp(cur) > 0 {
			into[name] = q.DeepCopy()
		}
	}
}
