package fakeruntime

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet's CgroupParent and PID namespace modes are accepted and the
// sandbox runs its containers as without them; the parent is recorded in
// the verbose status, not used.
func TestSandboxAcceptsCgroupParent(t *testing.T) {
	ctx := context.Background()
	r, _ := fixture(t)
	resp, err := r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "/kubepods/burstable/poduid-1",
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER}}},
	}})
	require.NoError(t, err)
	sb := resp.PodSandboxId
	id := createContainer(t, r, sb, "app", "sleep", "3600")
	startContainer(t, r, id)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, id).State)

	st, err := r.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb, Verbose: true})
	require.NoError(t, err)
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_READY, st.Status.State)
	assert.Contains(t, st.Info["info"], `"cgroupParent":"/kubepods/burstable/poduid-1"`)

	plain := runSandbox(t, r, "other", "uid-2", nil)
	st, err = r.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: plain, Verbose: true})
	require.NoError(t, err)
	assert.NotContains(t, st.Info["info"], "cgroupParent", "none given: none shown")
}
