package util

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "mykubelet/mylib/container"
)

func sandbox(id string, attempt uint32, ready bool, ip string, hostNetwork bool) *runtimeapi.PodSandboxStatus {
	s := &runtimeapi.PodSandboxStatus{Id: id, Metadata: &runtimeapi.PodSandboxMetadata{Attempt: attempt},
		State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, Network: &runtimeapi.PodSandboxNetworkStatus{Ip: ip}}
	if ready {
		s.State = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	mode := runtimeapi.NamespaceMode_POD
	if hostNetwork {
		mode = runtimeapi.NamespaceMode_NODE
	}
	s.Linux = &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{Network: mode}}}
	return s
}

func TestPodSandboxChanged(t *testing.T) {
	pod := &v1.Pod{}
	hostPod := &v1.Pod{Spec: v1.PodSpec{HostNetwork: true}}
	for _, tc := range []struct {
		name       string
		pod        *v1.Pod
		sandboxes  []*runtimeapi.PodSandboxStatus
		changed    bool
		attempt    uint32
		replacedID string
	}{
		{"none yet", pod, nil, true, 0, ""},
		{"ready with an IP", pod, []*runtimeapi.PodSandboxStatus{sandbox("a", 2, true, "10.0.0.2", false)}, false, 2, "a"},
		{"the newest is not ready", pod, []*runtimeapi.PodSandboxStatus{sandbox("b", 1, false, "10.0.0.2", false), sandbox("a", 0, true, "10.0.0.3", false)}, true, 2, "b"},
		{"two ready", pod, []*runtimeapi.PodSandboxStatus{sandbox("b", 1, true, "10.0.0.2", false), sandbox("a", 0, true, "10.0.0.3", false)}, true, 2, "b"},
		{"the network mode changed", hostPod, []*runtimeapi.PodSandboxStatus{sandbox("a", 0, true, "10.0.0.2", false)}, true, 1, "a"},
		{"host network needs no IP", hostPod, []*runtimeapi.PodSandboxStatus{sandbox("a", 0, true, "", true)}, false, 0, "a"},
		{"a pod network without an IP", pod, []*runtimeapi.PodSandboxStatus{sandbox("a", 0, true, "", false)}, true, 1, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed, attempt, id := PodSandboxChanged(tc.pod, &kubecontainer.PodStatus{SandboxStatuses: tc.sandboxes})
			assert.Equal(t, tc.changed, changed, "changed")
			assert.Equal(t, tc.attempt, attempt, "attempt")
			assert.Equal(t, tc.replacedID, id, "sandbox ID")
		})
	}
}
