package kubelet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	kubecontainer "mykubelet/mylib/container"
)

// sidecarPhasePod has a sidecar "s" (restartable init container) and the
// regular containers named.
func sidecarPhasePod(policy v1.RestartPolicy, containers ...string) *v1.Pod {
	pod := phasePod(policy, []string{"s"}, containers...)
	pod.Spec.InitContainers[0].RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
	return pod
}

func startedRunning(name string, started bool) v1.ContainerStatus {
	s := running(name)
	s.Started = &started
	return s
}

func TestGetPhaseWithSidecars(t *testing.T) {
	never := sidecarPhasePod(v1.RestartPolicyNever, "a")
	onFailure := sidecarPhasePod(v1.RestartPolicyOnFailure, "a")
	always := sidecarPhasePod(v1.RestartPolicyAlways, "a")
	for _, tc := range []struct {
		name        string
		pod         *v1.Pod
		info        []v1.ContainerStatus
		terminal    bool
		initialized bool
		want        v1.PodPhase
	}{
		{name: "sidecar running, not started yet", pod: never,
			info: []v1.ContainerStatus{startedRunning("s", false), waiting("a")}, want: v1.PodPending},
		{name: "sidecar started, main not yet", pod: never,
			info: []v1.ContainerStatus{startedRunning("s", true), waiting("a")}, want: v1.PodPending},
		{name: "sidecar and main running", pod: never,
			info: []v1.ContainerStatus{startedRunning("s", true), running("a")}, initialized: true, want: v1.PodRunning},
		{name: "sidecar restarting after initialization: still Running", pod: always,
			info: []v1.ContainerStatus{startedRunning("s", false), running("a")}, initialized: true, want: v1.PodRunning},
		{name: "sidecar not started, before initialization: Pending", pod: always,
			info: []v1.ContainerStatus{startedRunning("s", false), running("a")}, want: v1.PodPending},
		{name: "Never: main succeeded, sidecar still running: Running until the kubelet stops it", pod: never,
			info: []v1.ContainerStatus{startedRunning("s", true), terminated("a", 0)}, want: v1.PodRunning},
		{name: "Never: main succeeded, sidecar stopped by SIGTERM (143): Succeeded", pod: never,
			info: []v1.ContainerStatus{terminated("s", 143), terminated("a", 0)}, want: v1.PodSucceeded},
		{name: "Never: main succeeded, sidecar killed (137), pod terminal: Succeeded", pod: never,
			info: []v1.ContainerStatus{terminated("s", 137), terminated("a", 0)}, terminal: true, want: v1.PodSucceeded},
		{name: "Never: main failed, sidecar stopped: Failed", pod: never,
			info: []v1.ContainerStatus{terminated("s", 0), terminated("a", 1)}, want: v1.PodFailed},
		{name: "OnFailure: main succeeded, sidecar in back-off: Succeeded", pod: onFailure,
			info: []v1.ContainerStatus{waitingAfter("s", 1), terminated("a", 0)}, want: v1.PodSucceeded},
		{name: "sidecar never seen: Pending", pod: never,
			info: []v1.ContainerStatus{running("a")}, want: v1.PodPending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, getPhase(tc.pod, tc.info, tc.terminal, tc.initialized))
		})
	}
}

// readinessSays is a prober that marks running containers started and
// ready as its map says.
type readinessSays map[string]bool

func (r readinessSays) UpdatePodStatus(_ *v1.Pod, s *v1.PodStatus) {
	for _, list := range [][]v1.ContainerStatus{s.ContainerStatuses, s.InitContainerStatuses} {
		for i := range list {
			if ready, ok := r[list[i].Name]; ok && list[i].State.Running != nil {
				list[i].Started, list[i].Ready = ptr.To(true), ready
			}
		}
	}
}

// TestGenerateAPIPodStatusWithASidecar: a running sidecar shows Running,
// Started and Ready among the init containers, the pod is initialized
// and Running, and the sidecar's readiness decides the pod's Ready.
func TestGenerateAPIPodStatusWithASidecar(t *testing.T) {
	pod := sidecarPhasePod(v1.RestartPolicyNever, "app")
	ps := &kubecontainer.PodStatus{ID: pod.UID, IPs: []string{"10.88.0.2"}, SandboxStatuses: sandbox(),
		ContainerStatuses: []*kubecontainer.Status{ // newest first
			rtStatus("app", "c2", kubecontainer.ContainerStateRunning, 0, 0, podT0.Add(time.Second)),
			rtStatus("s", "c1", kubecontainer.ContainerStateRunning, 0, 0, podT0),
		}}
	s := generateAPIPodStatus(pod, ps, v1.PodStatus{}, false, nil, nil)
	require.Len(t, s.InitContainerStatuses, 1)
	sc := s.InitContainerStatuses[0]
	assert.NotNil(t, sc.State.Running)
	assert.True(t, *sc.Started)
	assert.True(t, sc.Ready, "without probes a running sidecar is ready")
	assert.Equal(t, v1.PodRunning, s.Phase)
	for _, c := range []v1.PodConditionType{v1.PodInitialized, v1.PodReady, v1.ContainersReady} {
		assert.Equal(t, v1.ConditionTrue, condition(s, c).Status, c)
	}

	s = generateAPIPodStatusProbed(pod, ps, v1.PodStatus{}, false, nil, nil, readinessSays{"s": false, "app": true})
	assert.False(t, s.InitContainerStatuses[0].Ready)
	assert.Equal(t, v1.ConditionTrue, condition(s, v1.PodInitialized).Status, "started is enough to initialize")
	assert.Equal(t, v1.ConditionFalse, condition(s, v1.PodReady).Status)
	assert.Equal(t, "containers with unready status: [s]", condition(s, v1.ContainersReady).Message)
}

// TestGenerateAPIPodStatusJobWithASidecarSucceeds: once the main container
// exited 0 and the kubelet stopped the sidecar (exit 143 on SIGTERM), a
// Never pod is Succeeded.
func TestGenerateAPIPodStatusJobWithASidecarSucceeds(t *testing.T) {
	pod := sidecarPhasePod(v1.RestartPolicyNever, "app")
	ps := &kubecontainer.PodStatus{ID: pod.UID, SandboxStatuses: sandbox(),
		ContainerStatuses: []*kubecontainer.Status{
			rtStatus("s", "c1", kubecontainer.ContainerStateExited, 143, 0, podT0.Add(2*time.Second)),
			rtStatus("app", "c2", kubecontainer.ContainerStateExited, 0, 0, podT0.Add(time.Second)),
		}}
	s := generateAPIPodStatus(pod, ps, v1.PodStatus{}, false, nil, nil)
	assert.Equal(t, v1.PodSucceeded, s.Phase)
	assert.EqualValues(t, 143, s.InitContainerStatuses[0].State.Terminated.ExitCode)
	assert.False(t, s.InitContainerStatuses[0].Ready)
	assert.Equal(t, v1.ConditionFalse, condition(s, v1.PodReady).Status)
	assert.Equal(t, "PodCompleted", condition(s, v1.PodReady).Reason)
}
