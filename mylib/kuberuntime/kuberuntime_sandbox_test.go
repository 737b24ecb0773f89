package kuberuntime

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// cgroupHelper is literalHelper with pod cgroups.
type cgroupHelper struct{ literalHelper }

func (cgroupHelper) GetPodCgroupParent(pod *v1.Pod) string {
	return "/kubepods/burstable/pod" + string(pod.UID)
}

// The sandbox gets the pod's cgroup as CgroupParent (with cgroupfs, the
// path) and the pod's namespaces; its containers the same namespaces.
func TestSandboxCgroupParentAndNamespaces(t *testing.T) {
	m := &Manager{helper: cgroupHelper{}, podLogsDirectory: t.TempDir()}
	pod := webPod()
	cfg, err := m.generatePodSandboxConfig(pod, 0)
	require.NoError(t, err)
	assert.Equal(t, "/kubepods/burstable/poduid-web", cfg.GetLinux().GetCgroupParent())
	assert.Equal(t, &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD},
		cfg.GetLinux().GetSecurityContext().GetNamespaceOptions())

	m.helper = literalHelper{}
	cfg, err = m.generatePodSandboxConfig(pod, 0)
	require.NoError(t, err)
	assert.Equal(t, "", cfg.GetLinux().GetCgroupParent(), "no pod cgroups: the runtime chooses")
}

func TestPidNamespaceForPod(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		change func(*v1.Pod)
		want   runtimeapi.NamespaceMode
	}{
		{"each container its own", func(*v1.Pod) {}, runtimeapi.NamespaceMode_CONTAINER},
		{"shareProcessNamespace false", func(p *v1.Pod) { p.Spec.ShareProcessNamespace = ptr.To(false) }, runtimeapi.NamespaceMode_CONTAINER},
		{"shareProcessNamespace", func(p *v1.Pod) { p.Spec.ShareProcessNamespace = ptr.To(true) }, runtimeapi.NamespaceMode_POD},
		{"hostPID", func(p *v1.Pod) { p.Spec.HostPID = true; p.Spec.ShareProcessNamespace = ptr.To(true) }, runtimeapi.NamespaceMode_NODE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Manager{helper: literalHelper{}, podLogsDirectory: t.TempDir()}
			pod := webPod()
			tc.change(pod)
			sb, err := m.generatePodSandboxConfig(pod, 0)
			require.NoError(t, err)
			assert.Equal(t, tc.want, sb.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid(), "sandbox")
			c, err := m.generateContainerConfig(ctx, &pod.Spec.Containers[0], pod, 0, "10.88.0.2", "sha256:abc", nil, nil)
			require.NoError(t, err)
			assert.Equal(t, tc.want, c.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid(), "container")
		})
	}
	m := &Manager{helper: literalHelper{}, podLogsDirectory: t.TempDir()}
	pod := webPod()
	pod.Spec.HostNetwork, pod.Spec.HostIPC = true, true
	sb, err := m.generatePodSandboxConfig(pod, 0)
	require.NoError(t, err)
	assert.Equal(t, &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_NODE},
		sb.GetLinux().GetSecurityContext().GetNamespaceOptions())
}
