package nodestatus

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
)

func TestReadySummaryNamesTheRuntimeOrWhyNotReady(t *testing.T) {
	n := &v1.Node{}
	assert.Equal(t, "Ready=Unknown", ReadySummary(n), "no Ready condition yet")

	n.Status.NodeInfo.ContainerRuntimeVersion = "mykubelet-fake://0.1.0"
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse},
		{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady"}}
	assert.Equal(t, "Ready=True, runtime mykubelet-fake://0.1.0", ReadySummary(n))

	n.Status.Conditions[1] = v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: "KubeletNotReady", Message: "container runtime is down"}
	assert.Equal(t, "Ready=False KubeletNotReady: container runtime is down", ReadySummary(n))
}
