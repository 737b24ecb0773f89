package status

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podResizeConditions are one pod's resize conditions, as upstream's
// status manager keeps them: PodResizePending (reason Deferred or
// Infeasible: the kubelet has not allocated the resize) and
// PodResizeInProgress (allocated, not yet actuated); nil when not set.
type podResizeConditions struct {
	PodResizePending    *v1.PodCondition
	PodResizeInProgress *v1.PodCondition
}

// updatedPodResizeCondition is a condition of the type with reason and
// message; old's transition time is kept while the reason stays, and old
// itself while nothing changes (so that no new status is written).
func (m *manager) updatedPodResizeCondition(t v1.PodConditionType, old *v1.PodCondition, reason, message string) *v1.PodCondition {
	if old != nil && old.Reason == reason && old.Message == message {
		return old
	}
	now := metav1.NewTime(m.clock.Now())
	transition := now
	if old != nil && old.Reason == reason {
		transition = old.LastTransitionTime
	}
	return &v1.PodCondition{Type: t, Status: v1.ConditionTrue, LastProbeTime: now, LastTransitionTime: transition,
		Reason: reason, Message: message}
}

func (m *manager) SetPodResizePendingCondition(podUID types.UID, reason, message string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.podResizeConditions[podUID]
	c.PodResizePending = m.updatedPodResizeCondition(v1.PodResizePending, c.PodResizePending, reason, message)
	m.podResizeConditions[podUID] = c
}

func (m *manager) SetPodResizeInProgressCondition(podUID types.UID, reason, message string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.podResizeConditions[podUID]
	if old := c.PodResizeInProgress; old != nil && reason == "" && message == "" {
		// Still in progress: an error's reason and message stay until the
		// condition is cleared, as upstream's.
		reason, message = old.Reason, old.Message
	}
	c.PodResizeInProgress = m.updatedPodResizeCondition(v1.PodResizeInProgress, c.PodResizeInProgress, reason, message)
	m.podResizeConditions[podUID] = c
}

func (m *manager) ClearPodResizePendingCondition(podUID types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.podResizeConditions[podUID]; ok {
		c.PodResizePending = nil
		m.podResizeConditions[podUID] = c
	}
}

func (m *manager) ClearPodResizeInProgressCondition(podUID types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.podResizeConditions[podUID]; ok {
		c.PodResizeInProgress = nil
		m.podResizeConditions[podUID] = c
	}
}

// GetPodResizeConditions returns copies of the pod's resize conditions,
// PodResizePending first.
func (m *manager) GetPodResizeConditions(podUID types.UID) []*v1.PodCondition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c := m.podResizeConditions[podUID]
	var out []*v1.PodCondition
	for _, cond := range []*v1.PodCondition{c.PodResizePending, c.PodResizeInProgress} {
		if cond != nil {
			out = append(out, cond.DeepCopy())
		}
	}
	return out
}

func (m *manager) IsPodResizeDeferred(podUID types.UID) bool {
	return m.resizePendingReason(podUID) == v1.PodReasonDeferred
}

func (m *manager) IsPodResizeInfeasible(podUID types.UID) bool {
	return m.resizePendingReason(podUID) == v1.PodReasonInfeasible
}

func (m *manager) resizePendingReason(podUID types.UID) string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if c := m.podResizeConditions[podUID].PodResizePending; c != nil {
		return c.Reason
	}
	return ""
}
