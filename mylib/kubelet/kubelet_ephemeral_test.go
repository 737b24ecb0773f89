package kubelet

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	kubecontainer "mykubelet/mylib/container"
)

func withEphemeral(pod *v1.Pod, names ...string) *v1.Pod {
	for _, n := range names {
		pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, v1.EphemeralContainer{
			EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: n, Image: "busybox", Stdin: true, TTY: true},
			TargetContainerName:      "app"})
	}
	return pod
}

func TestEphemeralContainerStatuses(t *testing.T) {
	pod := withEphemeral(phasePod(v1.RestartPolicyAlways, nil, "app"), "debugger-waiting", "debugger-running", "debugger-done")
	ps := &kubecontainer.PodStatus{ID: pod.UID, IPs: []string{"10.88.0.2"}, SandboxStatuses: sandbox(),
		ContainerStatuses: []*kubecontainer.Status{
			rtStatus("debugger-done", "e2", kubecontainer.ContainerStateExited, 3, 0, podT0),
			rtStatus("debugger-running", "e1", kubecontainer.ContainerStateRunning, 0, 0, podT0),
			rtStatus("app", "c1", kubecontainer.ContainerStateRunning, 0, 0, podT0),
		}}
	s := generateAPIPodStatus(pod, ps, v1.PodStatus{}, false, nil, nil)

	require.Len(t, s.EphemeralContainerStatuses, 3)
	byName := map[string]v1.ContainerStatus{}
	var names []string
	for _, st := range s.EphemeralContainerStatuses {
		byName[st.Name] = st
		names = append(names, st.Name)
		assert.False(t, st.Ready, "%s: an ephemeral container is never ready", st.Name)
		assert.Nil(t, st.Started, "%s: nor started (it has no probes)", st.Name)
	}
	assert.Equal(t, []string{"debugger-done", "debugger-running", "debugger-waiting"}, names, "sorted by name, as upstream")

	w := byName["debugger-waiting"]
	require.NotNil(t, w.State.Waiting)
	assert.Equal(t, ContainerCreating, w.State.Waiting.Reason)
	assert.Equal(t, "busybox", w.Image)

	r := byName["debugger-running"]
	require.NotNil(t, r.State.Running)
	assert.Equal(t, "fake://e1", r.ContainerID)

	d := byName["debugger-done"]
	require.NotNil(t, d.State.Terminated)
	assert.EqualValues(t, 3, d.State.Terminated.ExitCode)
	assert.Equal(t, "Error", d.State.Terminated.Reason)
	assert.Zero(t, d.RestartCount)

	// They do not count for the pod: it runs and is ready with its one
	// container, and the main statuses hold only that one.
	assert.Equal(t, v1.PodRunning, s.Phase)
	require.Len(t, s.ContainerStatuses, 1)
	assert.Equal(t, v1.ConditionTrue, condition(s, v1.ContainersReady).Status)
	assert.Equal(t, v1.ConditionTrue, condition(s, v1.PodReady).Status)
}

func TestEphemeralContainerStatusesWaitWhileInitializing(t *testing.T) {
	pod := withEphemeral(phasePod(v1.RestartPolicyAlways, []string{"init"}, "app"), "debugger")
	ps := &kubecontainer.PodStatus{ID: pod.UID, SandboxStatuses: sandbox(),
		ContainerStatuses: []*kubecontainer.Status{rtStatus("init", "c1", kubecontainer.ContainerStateRunning, 0, 0, podT0)}}
	s := generateAPIPodStatus(pod, ps, v1.PodStatus{}, false, nil, nil)
	require.Len(t, s.EphemeralContainerStatuses, 1)
	require.NotNil(t, s.EphemeralContainerStatuses[0].State.Waiting)
	assert.Equal(t, PodInitializing, s.EphemeralContainerStatuses[0].State.Waiting.Reason)

	assert.Nil(t, generateAPIPodStatus(phasePod(v1.RestartPolicyAlways, nil, "app"), ps, v1.PodStatus{}, false, nil, nil).EphemeralContainerStatuses,
		"a pod without ephemeral containers has no such statuses")
}
