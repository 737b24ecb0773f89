package lifecycle

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

// PodAdmitAttributes is what an admit handler looks at: the pod, and the
// pods already admitted on the node (not terminated, not rejected).
type PodAdmitAttributes struct {
	Pod       *v1.Pod
	OtherPods []*v1.Pod
}

// PodAdmitResult is an admit handler's answer. Reason is one CamelCase
// word (OutOfpods, NodeAffinity…), Message a sentence for a person.
type PodAdmitResult struct {
	Admit   bool
	Reason  string
	Message string
}

// PodAdmitHandler decides whether a pod may run on the node.
type PodAdmitHandler interface {
	Admit(ctx context.Context, attrs *PodAdmitAttributes) PodAdmitResult
}

// PodAdmitHandlers asks each handler in turn; the first refusal wins.
type PodAdmitHandlers []PodAdmitHandler

// Admit returns the first refusal, or an admitting result.
func (hs PodAdmitHandlers) Admit(ctx context.Context, attrs *PodAdmitAttributes) PodAdmitResult {
	for _, h := range hs {
		if r := h.Admit(ctx, attrs); !r.Admit {
			return r
		}
	}
	return PodAdmitResult{Admit: true}
}
