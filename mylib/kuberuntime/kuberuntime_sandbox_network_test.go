package kuberuntime

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// netWaits is a runtime whose pod network is not there yet: its
// RunPodSandbox fails as the mock runtime's does while it waits for the
// node's pod CIDR (and as containerd's does when its CNI plugin fails).
type netWaits struct {
	runtimeapi.RuntimeServiceClient
}

const netWaitsMessage = "RunPodSandbox default/web: the pod network waits for the node's pod CIDR (10.88.0.0/16 overlaps a route the host already has: 10.88.0.0/16 dev mkl42-0)"

func (netWaits) RunPodSandbox(context.Context, *runtimeapi.RunPodSandboxRequest, ...grpc.CallOption) (*runtimeapi.RunPodSandboxResponse, error) {
	return nil, status.Error(codes.Unavailable, netWaitsMessage)
}

// TestSyncPodTellsWhyTheSandboxFailed: a sandbox the runtime cannot make
// is a FailedCreatePodSandBox event with the runtime's reason, as
// upstream's SyncPod records it, and the sync fails (the pod worker tries
// again); nothing is started.
func TestSyncPodTellsWhyTheSandboxFailed(t *testing.T) {
	f := newSyncFixture(t)
	f.m.rs = netWaits{RuntimeServiceClient: f.m.rs}
	pod := webPod()
	pod.Spec.InitContainers = nil
	res := f.m.SyncPod(context.Background(), pod, f.status(t, pod), nil, nil)
	require.Error(t, res.Error())
	assert.Contains(t, f.drain(), "Warning FailedCreatePodSandBox Failed to create pod sandbox: "+netWaitsMessage)
	assert.Empty(t, f.status(t, pod).SandboxStatuses)
}
