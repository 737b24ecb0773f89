package status

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestResizeConditionsKeepTheirTimesUntilTheReasonChanges(t *testing.T) {
	f := newFixture(t)
	m := f.m
	m.SetPodResizePendingCondition("u1", v1.PodReasonDeferred, "no room")
	first := m.GetPodResizeConditions("u1")
	require.Len(t, first, 1)
	assert.True(t, m.IsPodResizeDeferred("u1"))
	assert.False(t, m.IsPodResizeInfeasible("u1"))

	f.clk.Step(time.Minute)
	m.SetPodResizePendingCondition("u1", v1.PodReasonDeferred, "no room")
	assert.Equal(t, first, m.GetPodResizeConditions("u1"), "the same condition again is unchanged: no new status to write")
	m.SetPodResizePendingCondition("u1", v1.PodReasonDeferred, "still no room")
	assert.Equal(t, first[0].LastTransitionTime, m.GetPodResizeConditions("u1")[0].LastTransitionTime, "same reason: same transition")
	f.clk.Step(time.Minute)
	m.SetPodResizePendingCondition("u1", v1.PodReasonInfeasible, "too big")
	c := m.GetPodResizeConditions("u1")[0]
	assert.Equal(t, f.clk.Now().Unix(), c.LastTransitionTime.Unix(), "a new reason is a transition")
	assert.True(t, m.IsPodResizeInfeasible("u1"))

	m.SetPodResizeInProgressCondition("u1", "", "")
	conds := m.GetPodResizeConditions("u1")
	require.Len(t, conds, 2)
	assert.Equal(t, v1.PodResizePending, conds[0].Type)
	assert.Equal(t, v1.PodResizeInProgress, conds[1].Type)
	m.ClearPodResizePendingCondition("u1")
	conds = m.GetPodResizeConditions("u1")
	require.Len(t, conds, 1)
	assert.Equal(t, v1.PodResizeInProgress, conds[0].Type)

	m.RemoveOrphanedStatuses(map[types.UID]bool{})
	assert.Empty(t, m.GetPodResizeConditions("u1"), "forgotten with the pod")
}

func TestResizeConditionsAreTheKubelets(t *testing.T) {
	assert.True(t, PodConditionByKubelet(v1.PodResizePending))
	assert.True(t, PodConditionByKubelet(v1.PodResizeInProgress))
}

// A resize that failed stays in progress with the error as its reason
// while the kubelet retries it (set again with no reason), until the
// condition is cleared, as upstream's.
func TestResizeInProgressKeepsItsErrorUntilCleared(t *testing.T) {
	m := newFixture(t).m
	m.SetPodResizeInProgressCondition("u1", "", "")
	m.SetPodResizeInProgressCondition("u1", v1.PodReasonError, "attempting to set pod memory limit (10240) below current usage (1048576)")
	m.SetPodResizeInProgressCondition("u1", "", "")
	conds := m.GetPodResizeConditions("u1")
	require.Len(t, conds, 1)
	assert.Equal(t, v1.PodReasonError, conds[0].Reason)
	assert.Contains(t, conds[0].Message, "below current usage")

	m.ClearPodResizeInProgressCondition("u1")
	m.SetPodResizeInProgressCondition("u1", "", "")
	conds = m.GetPodResizeConditions("u1")
	require.Len(t, conds, 1)
	assert.Empty(t, conds[0].Reason, "cleared, then in progress again: no old error")
}
