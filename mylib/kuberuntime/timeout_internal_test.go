package kuberuntime

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCallTimeoutsAsUpstream checks the deadline each CRI call gets from the
// runtime request timeout (2 min by default), as upstream's CRI client.
func TestCallTimeoutsAsUpstream(t *testing.T) {
	assert.Equal(t, 2*time.Minute, DefaultRuntimeRequestTimeout)
	const rt = DefaultRuntimeRequestTimeout
	for _, tc := range []struct {
		method string
		req    any
		want   time.Duration
		bound  bool
	}{
		{runtimeapi.RuntimeService_ListPodSandbox_FullMethodName, &runtimeapi.ListPodSandboxRequest{}, rt, true},
		{runtimeapi.RuntimeService_ListContainers_FullMethodName, &runtimeapi.ListContainersRequest{}, rt, true},
		{runtimeapi.RuntimeService_ContainerStatus_FullMethodName, &runtimeapi.ContainerStatusRequest{}, rt, true},
		{runtimeapi.RuntimeService_RunPodSandbox_FullMethodName, &runtimeapi.RunPodSandboxRequest{}, 2 * rt, true},
		{runtimeapi.RuntimeService_StopContainer_FullMethodName, &runtimeapi.StopContainerRequest{Timeout: 30}, rt + 30*time.Second, true},
		{runtimeapi.RuntimeService_ExecSync_FullMethodName, &runtimeapi.ExecSyncRequest{Timeout: 5}, rt + 5*time.Second, true},
		{runtimeapi.RuntimeService_ExecSync_FullMethodName, &runtimeapi.ExecSyncRequest{}, 0, false},
		{runtimeapi.ImageService_PullImage_FullMethodName, &runtimeapi.PullImageRequest{}, 0, false},
		{runtimeapi.ImageService_ListImages_FullMethodName, &runtimeapi.ListImagesRequest{}, rt, true},
	} {
		got, bound := callTimeout(tc.method, tc.req, rt)
		assert.Equal(t, tc.bound, bound, tc.method)
		assert.Equal(t, tc.want, got, tc.method)
	}
}

// TestReconnectBackoffCappedAtThreeSeconds checks the back-off constants
// against upstream's CRI client.
func TestReconnectBackoffCappedAtThreeSeconds(t *testing.T) {
	assert.Equal(t, 100*time.Millisecond, baseBackoffDelay)
	assert.Equal(t, 3*time.Second, maxBackoffDelay)
	assert.Equal(t, 5*time.Second, minConnectionTimeout)
}
