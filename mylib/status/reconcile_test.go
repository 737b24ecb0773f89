package status

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
)

// TestNeedToReconcilePodReadiness: a pod with a readiness gate whose
// condition someone else set True (or False again) is synced, so that Ready
// follows; a pod without gates, or whose Ready already says so, is not.
func TestNeedToReconcilePodReadiness(t *testing.T) {
	gated := func(gate v1.ConditionStatus, ready v1.ConditionStatus) *v1.Pod {
		p := &v1.Pod{
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}, ReadinessGates: []v1.PodReadinessGate{{ConditionType: "k8s.io/test-condition1"}}},
			Status: v1.PodStatus{Phase: v1.PodRunning,
				ContainerStatuses: []v1.ContainerStatus{{Name: "c", Ready: true, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}},
				Conditions:        []v1.PodCondition{{Type: v1.PodReady, Status: ready}}},
		}
		if gate != "" {
			p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: "k8s.io/test-condition1", Status: gate})
		}
		want := GeneratePodReadyCondition(p, p.Status.Conditions, p.Status.ContainerStatuses, p.Status.Phase)
		if ready == "" { // Ready as the kubelet last wrote it
			p.Status.Conditions[0] = want
		}
		return p
	}
	assert.True(t, NeedToReconcilePodReadiness(gated(v1.ConditionTrue, v1.ConditionFalse)), "the gate turned True: Ready is to be True")
	assert.True(t, NeedToReconcilePodReadiness(gated(v1.ConditionFalse, v1.ConditionTrue)), "the gate turned False: Ready is to be False")
	assert.False(t, NeedToReconcilePodReadiness(gated(v1.ConditionTrue, "")), "Ready says so already")
	assert.False(t, NeedToReconcilePodReadiness(gated("", "")), "no gate condition yet, and Ready says so")

	ungated := gated(v1.ConditionTrue, v1.ConditionFalse)
	ungated.Spec.ReadinessGates = nil
	assert.False(t, NeedToReconcilePodReadiness(ungated), "no readiness gates: the kubelet owns Ready alone")
}
