package kubelet

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	kubecontainer "mykubelet/mylib/container"
	kubepod "mykubelet/mylib/pod"
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

	s = generateAPIPodStatusProbed(pod, ps, v1.PodStatus{}, false, nil, nil, readinessSays{"s": false, "app": true}, nil)
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

// TestAJobWithASidecarCompletes runs a Job-like pod through the runtime
// manager, the mock runtime and the status manager to a fake API server:
// the sidecar starts first and the main container after it; once the main
// container has exited 0 the next sync stops the sidecar, and the pod is
// Succeeded in the API.
func TestAJobWithASidecarCompletes(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "default", UID: "uid-job"},
		Spec: v1.PodSpec{NodeName: "node-a", RestartPolicy: v1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](30),
			InitContainers: []v1.Container{{Name: "logshipper", Image: "busybox:1.37", ImagePullPolicy: v1.PullIfNotPresent,
				RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways), Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600"}}},
			Containers: []v1.Container{{Name: "main", Image: "busybox:1.37", ImagePullPolicy: v1.PullIfNotPresent,
				Command: []string{"sh", "-c", "echo done"}}},
		},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
	client := fake.NewClientset(pod.DeepCopy())
	pm := kubepod.NewBasicPodManager()
	pm.AddPod(pod)
	p := newPodPipeline(t, client, pm)
	ctx := context.Background()
	// apiPhase waits for the API to show the phase with the sidecar's status.
	apiPhase := func(want v1.PodPhase) *v1.Pod {
		t.Helper()
		var got *v1.Pod
		require.Eventually(t, func() bool {
			var err error
			got, err = client.CoreV1().Pods("default").Get(ctx, "job", metav1.GetOptions{})
			return err == nil && got.Status.Phase == want && len(got.Status.InitContainerStatuses) == 1
		}, 10*time.Second, 5*time.Millisecond, "phase %s", want)
		return got
	}

	p.sync(t, pod) // the sandbox and the sidecar
	got := apiPhase(v1.PodPending)
	require.Len(t, got.Status.InitContainerStatuses, 1)
	assert.NotNil(t, got.Status.InitContainerStatuses[0].State.Running)
	assert.Equal(t, PodInitializing, got.Status.ContainerStatuses[0].State.Waiting.Reason)

	p.sync(t, pod) // the sidecar has started: the main container
	require.Eventually(t, func() bool {
		cs := p.runtimeStatus(t, pod).FindContainerStatusByName("main")
		return cs != nil && cs.State == kubecontainer.ContainerStateExited
	}, 10*time.Second, 5*time.Millisecond, "the main container runs and exits")
	sc := p.runtimeStatus(t, pod).FindContainerStatusByName("logshipper")
	require.NotNil(t, sc)
	assert.Equal(t, kubecontainer.ContainerStateRunning, sc.State, "the sidecar outlives the main container")

	p.sync(t, pod) // the main container is done: the pod is killed, sidecar included
	got = apiPhase(v1.PodSucceeded)
	require.Len(t, got.Status.InitContainerStatuses, 1)
	require.NotNil(t, got.Status.InitContainerStatuses[0].State.Terminated, "the sidecar was stopped")
	assert.EqualValues(t, 0, got.Status.ContainerStatuses[0].State.Terminated.ExitCode)
}
