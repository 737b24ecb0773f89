package status

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// sidecarSpecPod has a regular init container "i", a sidecar "s"
// (restartPolicy Always) and a regular container "a".
func sidecarSpecPod() *v1.Pod {
	pod := specPod([]string{"i", "s"}, "a")
	pod.Spec.InitContainers[1].RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
	return pod
}

func started(s v1.ContainerStatus, b bool) v1.ContainerStatus {
	s.Started = &b
	return s
}

// TestSidecarReadinessCountsForContainersReady: an unready sidecar makes
// ContainersReady and Ready False, naming it; a regular init container
// does not count.
func TestSidecarReadinessCountsForContainersReady(t *testing.T) {
	pod := sidecarSpecPod()
	unready := []v1.ContainerStatus{cs("i", true, "terminated"), started(cs("s", false, "running"), true), cs("a", true, "running")}
	c := GenerateContainersReadyCondition(pod, unready, v1.PodRunning)
	assert.Equal(t, v1.ConditionFalse, c.Status)
	assert.Equal(t, ContainersNotReady, c.Reason)
	assert.Equal(t, "containers with unready status: [s]", c.Message)
	r := GeneratePodReadyCondition(pod, nil, unready, v1.PodRunning)
	assert.Equal(t, v1.ConditionFalse, r.Status)
	assert.Equal(t, "containers with unready status: [s]", r.Message)

	ready := []v1.ContainerStatus{cs("i", true, "terminated"), started(cs("s", true, "running"), true), cs("a", true, "running")}
	assert.Equal(t, v1.ConditionTrue, GenerateContainersReadyCondition(pod, ready, v1.PodRunning).Status)
	assert.Equal(t, v1.ConditionTrue, GeneratePodReadyCondition(pod, nil, ready, v1.PodRunning).Status)
}

// TestSidecarStartedCountsForInitialized: a sidecar has done its part of
// initialization once started, ready or not.
func TestSidecarStartedCountsForInitialized(t *testing.T) {
	pod := sidecarSpecPod()
	notStarted := []v1.ContainerStatus{cs("i", true, "terminated"), started(cs("s", false, "running"), false), cs("a", false, "waiting")}
	c := GeneratePodInitializedCondition(pod, notStarted, v1.PodPending)
	assert.Equal(t, v1.ConditionFalse, c.Status)
	assert.Equal(t, "containers with incomplete status: [s]", c.Message)

	startedUnready := []v1.ContainerStatus{cs("i", true, "terminated"), started(cs("s", false, "running"), true), cs("a", false, "waiting")}
	assert.Equal(t, v1.ConditionTrue, GeneratePodInitializedCondition(pod, startedUnready, v1.PodPending).Status)
}

// TestSidecarMayRestartUnderNever: a sidecar goes from terminated back to
// running whatever the pod's policy; a regular init container may not.
func TestSidecarMayRestartUnderNever(t *testing.T) {
	pod := sidecarSpecPod()
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	old := v1.PodStatus{InitContainerStatuses: []v1.ContainerStatus{cs("i", true, "terminated"), cs("s", false, "terminated")}}
	restarted := v1.PodStatus{InitContainerStatuses: []v1.ContainerStatus{cs("i", true, "terminated"), cs("s", true, "running")}}
	assert.NoError(t, checkContainerStateTransition(&old, &restarted, &pod.Spec))
	back := v1.PodStatus{InitContainerStatuses: []v1.ContainerStatus{cs("i", true, "running"), cs("s", true, "running")}}
	assert.EqualError(t, checkContainerStateTransition(&old, &back, &pod.Spec),
		"terminated container i attempted illegal transition to non-terminated state")
}
