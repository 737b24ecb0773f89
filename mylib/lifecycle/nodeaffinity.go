package lifecycle

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// RequiredNodeAffinityMatches holds when node has every label of the pod's
// nodeSelector and, if the pod has a required node affinity, matches one
// of its terms (upstream: component-helpers nodeaffinity
// GetRequiredNodeAffinity(pod).Match(node)).
func RequiredNodeAffinityMatches(pod *v1.Pod, node *v1.Node) bool {
	for k, v := range pod.Spec.NodeSelector {
		if got, ok := node.Labels[k]; !ok || got != v {
			return false
		}
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	return MatchNodeSelectorTerms(node, a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms)
}

// MatchNodeSelectorTerms holds when node matches one of terms (ORed); a
// term matches when all its expressions and fields do (ANDed), and an
// empty term matches nothing.
func MatchNodeSelectorTerms(node *v1.Node, terms []v1.NodeSelectorTerm) bool {
	for _, t := range terms {
		if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
			continue
		}
		ok := true
		for _, r := range t.MatchExpressions {
			v, has := node.Labels[r.Key]
			ok = ok && requirementMatches(r, v, has)
		}
		for _, r := range t.MatchFields {
			// metadata.name is the only field a node selector may name.
			ok = ok && r.Key == "metadata.name" && requirementMatches(r, node.Name, true)
		}
		if ok {
			return true
		}
	}
	return false
}

func requirementMatches(r v1.NodeSelectorRequirement, value string, has bool) bool {
	in := func() bool {
		for _, v := range r.Values {
			if v == value {
				return true
			}
		}
		return false
	}
	switch r.Operator {
	case v1.NodeSelectorOpIn:
		return has && in()
	case v1.NodeSelectorOpNotIn:
		return !has || !in()
	case v1.NodeSelectorOpExists:
		return has
	case v1.NodeSelectorOpDoesNotExist:
		return !has
	case v1.NodeSelectorOpGt, v1.NodeSelectorOpLt:
		if !has || len(r.Values) != 1 {
			return false
		}
		got, err1 := strconv.ParseInt(value, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == v1.NodeSelectorOpGt {
			return got > want
		}
		return got < want
	}
	return false
}
