// Package lifecycle decides whether the kubelet admits a pod: upstream's
// pkg/kubelet/lifecycle (interfaces.go, predicate.go), with the checks of
// the scheduler's it reuses (pkg/scheduler AdmissionCheck: noderesources
// Fits, nodeaffinity, nodename), much smaller.
//
// A pod bound to the node is checked once, when it is added, against the
// Node (allocatable, labels) and the pods already admitted: room for one
// more pod (maxPods, reason OutOfpods), its requests within allocatable
// minus theirs (OutOfcpu, OutOfmemory, OutOfephemeral-storage), its node
// selector and required node affinity (NodeAffinity), its spec.nodeName;
// before those, its OS: spec.os.name (PodOSNotSupported) and its own
// kubernetes.io/os label (PodOSSelectorNodeLabelDoesNotMatch) must name
// the OS the kubelet runs on.
// The kubelet fails a rejected pod with the result's reason and message.
//
// Where it departs from upstream, and why:
//   - No supplemental-groups, extended-resource, DRA, node-port or
//     NoExecute-taint checks: the mock runtime has none of those to offer.
//   - Node affinity is matched here (MatchNodeSelectorTerms) rather than
//     with k8s.io/component-helpers, to keep the module's dependencies as
//     they are; the operators are the same (In, NotIn, Exists,
//     DoesNotExist, Gt, Lt; matchFields on metadata.name).
//   - Pod-level resources (spec.resources) count as upstream counts them
//     with the PodLevelResources feature on (its default): a pod-level
//     request of cpu or memory is the pod's request of it, whatever its
//     containers ask.
package lifecycle
