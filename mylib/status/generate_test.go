package status

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "mykubelet/mylib/container"
)

func specPod(inits []string, containers ...string) *v1.Pod {
	pod := &v1.Pod{}
	for _, n := range inits {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: n})
	}
	for _, n := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n})
	}
	return pod
}

func cs(name string, ready bool, state string) v1.ContainerStatus {
	s := v1.ContainerStatus{Name: name, Ready: ready}
	switch state {
	case "running":
		s.State.Running = &v1.ContainerStateRunning{}
	case "terminated":
		s.State.Terminated = &v1.ContainerStateTerminated{}
	default:
		s.State.Waiting = &v1.ContainerStateWaiting{Reason: "ContainerCreating"}
	}
	return s
}

func TestGenerateContainersReadyAndReadyConditions(t *testing.T) {
	pod := specPod(nil, "a", "b")
	for _, tc := range []struct {
		name     string
		statuses []v1.ContainerStatus
		phase    v1.PodPhase
		want     v1.PodCondition
	}{
		{"no statuses", nil, v1.PodPending, v1.PodCondition{Status: v1.ConditionFalse, Reason: UnknownContainerStatuses}},
		{"all ready", []v1.ContainerStatus{cs("a", true, "running"), cs("b", true, "running")}, v1.PodRunning,
			v1.PodCondition{Status: v1.ConditionTrue}},
		{"one unready, one unknown", []v1.ContainerStatus{cs("a", false, "waiting")}, v1.PodPending,
			v1.PodCondition{Status: v1.ConditionFalse, Reason: ContainersNotReady,
				Message: "containers with unknown status: [b], containers with unready status: [a]"}},
		{"succeeded", []v1.ContainerStatus{cs("a", false, "terminated"), cs("b", false, "terminated")}, v1.PodSucceeded,
			v1.PodCondition{Status: v1.ConditionFalse, Reason: PodCompleted}},
		{"failed", []v1.ContainerStatus{cs("a", false, "terminated"), cs("b", false, "terminated")}, v1.PodFailed,
			v1.PodCondition{Status: v1.ConditionFalse, Reason: PodFailed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			want.Type = v1.ContainersReady
			assert.Equal(t, want, GenerateContainersReadyCondition(pod, tc.statuses, tc.phase))
			want.Type = v1.PodReady
			assert.Equal(t, want, GeneratePodReadyCondition(pod, nil, tc.statuses, tc.phase))
		})
	}
}

func TestPodReadyWaitsForReadinessGates(t *testing.T) {
	pod := specPod(nil, "a")
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
	statuses := []v1.ContainerStatus{cs("a", true, "running")}
	got := GeneratePodReadyCondition(pod, nil, statuses, v1.PodRunning)
	assert.Equal(t, v1.ConditionFalse, got.Status)
	assert.Equal(t, ReadinessGatesNotReady, got.Reason)
	assert.Equal(t, `corresponding condition of pod readiness gate "example.com/lb" does not exist.`, got.Message)
	got = GeneratePodReadyCondition(pod, []v1.PodCondition{{Type: "example.com/lb", Status: v1.ConditionTrue}}, statuses, v1.PodRunning)
	assert.Equal(t, v1.ConditionTrue, got.Status)
}

func TestGeneratePodInitializedCondition(t *testing.T) {
	pod := specPod([]string{"i0", "i1"}, "a")
	for _, tc := range []struct {
		name     string
		statuses []v1.ContainerStatus
		phase    v1.PodPhase
		want     v1.PodCondition
	}{
		{"first running", []v1.ContainerStatus{cs("i0", false, "running")}, v1.PodPending,
			v1.PodCondition{Status: v1.ConditionFalse, Reason: ContainersNotInitialized,
				Message: "containers with unknown status: [i1], containers with incomplete status: [i0]"}},
		{"both completed", []v1.ContainerStatus{cs("i0", true, "terminated"), cs("i1", true, "terminated")}, v1.PodPending,
			v1.PodCondition{Status: v1.ConditionTrue}},
		{"a regular container started", []v1.ContainerStatus{cs("i0", false, "waiting"), cs("a", true, "running")}, v1.PodRunning,
			v1.PodCondition{Status: v1.ConditionTrue}},
		{"succeeded", []v1.ContainerStatus{cs("i0", true, "terminated"), cs("i1", true, "terminated")}, v1.PodSucceeded,
			v1.PodCondition{Status: v1.ConditionTrue, Reason: PodCompleted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.Type = v1.PodInitialized
			assert.Equal(t, tc.want, GeneratePodInitializedCondition(pod, tc.statuses, tc.phase))
		})
	}
	assert.Equal(t, v1.ConditionTrue, GeneratePodInitializedCondition(specPod(nil, "a"), nil, v1.PodPending).Status, "no init containers")
}

func TestGeneratePodReadyToStartContainersCondition(t *testing.T) {
	pod := specPod(nil, "a")
	none := &kubecontainer.PodStatus{}
	assert.Equal(t, v1.ConditionFalse, GeneratePodReadyToStartContainersCondition(pod, none).Status)
	ready := &kubecontainer.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{{Id: "s",
		State: runtimeapi.PodSandboxState_SANDBOX_READY, Metadata: &runtimeapi.PodSandboxMetadata{},
		Network: &runtimeapi.PodSandboxNetworkStatus{Ip: "10.88.0.2"}}}}
	got := GeneratePodReadyToStartContainersCondition(pod, ready)
	assert.Equal(t, v1.PodReadyToStartContainers, got.Type)
	assert.Equal(t, v1.ConditionTrue, got.Status)
	ready.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	assert.Equal(t, v1.ConditionFalse, GeneratePodReadyToStartContainersCondition(pod, ready).Status)
}
