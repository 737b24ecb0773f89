package kuberuntime

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/fakeruntime"
)

func debugger(name, target string) v1.EphemeralContainer {
	return v1.EphemeralContainer{TargetContainerName: target, EphemeralContainerCommon: v1.EphemeralContainerCommon{
		Name: name, Image: "busybox:1.37", ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sh", "-c", serveUntilTERM},
		Stdin: true, TTY: true}}
}

func TestSyncPodStartsAnEphemeralContainerOnceAndNeverAgain(t *testing.T) {
	ctx := context.Background()
	f := newSyncFixture(t)
	pod := webPod()
	// An init container that keeps running: ephemeral containers do not
	// wait for initialization, as upstream.
	pod.Spec.InitContainers[0].Command = []string{"sh", "-c", serveUntilTERM}
	require.NoError(t, f.m.SyncPod(ctx, pod, f.status(t, pod), nil, nil).Error())
	require.Equal(t, kubecontainer.ContainerStateRunning, f.status(t, pod).FindContainerStatusByName("setup").State)
	f.drain()

	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{debugger("debugger-1", "")}
	res := f.m.SyncPod(ctx, pod, f.status(t, pod), nil, nil)
	require.NoError(t, res.Error())
	st := f.status(t, pod)
	cs := st.FindContainerStatusByName("debugger-1")
	require.NotNil(t, cs, "the ephemeral container was started")
	assert.Equal(t, kubecontainer.ContainerStateRunning, cs.State)
	assert.Nil(t, st.FindContainerStatusByName("app"), "the regular containers still wait for the init container")
	assert.Contains(t, f.drain(), "Normal Started Started container debugger-1")
	c := v1.Container(pod.Spec.EphemeralContainers[0].EphemeralContainerCommon)
	assert.Equal(t, "spec.ephemeralContainers{debugger-1}", containerRef(pod, &c).FieldPath, "events name it where it is in the spec")
	assert.Equal(t, "spec.containers{app}", containerRef(pod, &pod.Spec.Containers[0]).FieldPath)

	// It exits: it is never restarted, whatever the pod's restartPolicy (Always).
	_, err := f.rt.ContainerAction(cs.ID.ID, fakeruntime.ActionKill)
	require.NoError(t, err)
	for range 2 {
		res = f.m.SyncPod(ctx, pod, f.status(t, pod), nil, nil)
		require.NoError(t, res.Error())
		assert.Empty(t, res.SyncResults)
	}
	var attempts int
	for _, s := range f.status(t, pod).ContainerStatuses {
		if s.Name == "debugger-1" {
			attempts++
			assert.Equal(t, kubecontainer.ContainerStateExited, s.State)
		}
	}
	assert.Equal(t, 1, attempts, "one container, exited, never replaced")
}

func TestEphemeralContainersToStart(t *testing.T) {
	pod := webPod()
	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{debugger("a", ""), debugger("b", ""), debugger("c", "")}
	ps := &kubecontainer.PodStatus{ContainerStatuses: []*kubecontainer.Status{
		{Name: "b", State: kubecontainer.ContainerStateExited}, // ran once: never again
	}}
	assert.Equal(t, []int{0, 2}, ephemeralContainersToStart(pod, ps, podActions{}))
	assert.Nil(t, ephemeralContainersToStart(pod, ps, podActions{KillPod: true}), "not into a pod being killed")
	assert.Nil(t, ephemeralContainersToStart(pod, ps, podActions{KillPod: true, CreateSandbox: true}), "not before the new sandbox is there")
	assert.Nil(t, ephemeralContainersToStart(webPod(), ps, podActions{}))
}

func TestEphemeralContainerSharesItsTargetsProcessNamespace(t *testing.T) {
	ctx := context.Background()
	f := newSyncFixture(t)
	pod := webPod()
	pod.Spec.InitContainers = nil
	require.NoError(t, f.m.SyncPod(ctx, pod, f.status(t, pod), nil, nil).Error())
	app := f.status(t, pod).FindContainerStatusByName("app")
	require.NotNil(t, app)

	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{debugger("debugger-1", "app"), debugger("debugger-2", "nope"), debugger("debugger-3", "")}
	c := v1.Container(pod.Spec.EphemeralContainers[0].EphemeralContainerCommon)
	cfg, err := f.m.generateContainerConfig(ctx, &c, pod, 0, "10.88.0.2", "sha256:abc", nil, nil)
	require.NoError(t, err)
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	require.NotNil(t, ns)
	assert.Equal(t, runtimeapi.NamespaceMode_TARGET, ns.Pid)
	assert.Equal(t, app.ID.ID, ns.TargetId)
	assert.Equal(t, runtimeapi.NamespaceMode_POD, ns.Network)
	assert.True(t, cfg.Stdin)
	assert.True(t, cfg.Tty)

	c = v1.Container(pod.Spec.EphemeralContainers[1].EphemeralContainerCommon)
	_, err = f.m.generateContainerConfig(ctx, &c, pod, 0, "10.88.0.2", "sha256:abc", nil, nil)
	assert.EqualError(t, err, "unable to find target container nope")

	// No target, or a regular container: the pod's namespaces, the PID
	// namespace the container's own.
	for _, c := range []v1.Container{v1.Container(pod.Spec.EphemeralContainers[2].EphemeralContainerCommon), pod.Spec.Containers[0]} {
		cfg, err = f.m.generateContainerConfig(ctx, &c, pod, 0, "10.88.0.2", "sha256:abc", nil, nil)
		require.NoError(t, err)
		assert.Equal(t, runtimeapi.NamespaceMode_CONTAINER, cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid(), c.Name)
	}

	// The target stopped: the ephemeral container cannot start, and says why.
	_, err = f.rt.ContainerAction(app.ID.ID, fakeruntime.ActionKill)
	require.NoError(t, err)
	c = v1.Container(pod.Spec.EphemeralContainers[0].EphemeralContainerCommon)
	_, err = f.m.generateContainerConfig(ctx, &c, pod, 0, "10.88.0.2", "sha256:abc", nil, nil)
	assert.EqualError(t, err, "unable to find target container app")
}
