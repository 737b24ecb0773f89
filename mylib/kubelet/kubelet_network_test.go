package kubelet

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/runtime/schema"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// podCIDRCRI records the pod CIDRs UpdateRuntimeConfig is called with and
// fails while err is set.
type podCIDRCRI struct {
	runtimeapi.RuntimeServiceClient
	mu    sync.Mutex
	calls []string
	err   error
}

func (f *podCIDRCRI) UpdateRuntimeConfig(_ context.Context, req *runtimeapi.UpdateRuntimeConfigRequest, _ ...grpc.CallOption) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, req.GetRuntimeConfig().GetNetworkConfig().GetPodCidr())
	if f.err != nil {
		return nil, f.err
	}
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

func (f *podCIDRCRI) callsSoFar() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// TestUpdatePodCIDRTellsTheRuntimeOnChangeOnly: a new CIDR is one CRI
// call and "changed"; the same again is no call; a failed call is
// "changed" with an error, not remembered, and tried again.
func TestUpdatePodCIDRTellsTheRuntimeOnChangeOnly(t *testing.T) {
	ctx := context.Background()
	cri := &podCIDRCRI{}
	kl := &Kubelet{cri: cri, runtimeState: &runtimeState{}}

	changed, err := kl.updatePodCIDR(ctx, "10.128.0.0/24")
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, "10.128.0.0/24", kl.PodCIDR())
	changed, err = kl.updatePodCIDR(ctx, "10.128.0.0/24")
	require.NoError(t, err)
	assert.False(t, changed, "the same CIDR")
	assert.Equal(t, []string{"10.128.0.0/24"}, cri.callsSoFar())

	cri.err = status.Error(codes.InvalidArgument, "bad CIDR")
	changed, err = kl.updatePodCIDR(ctx, "10.128.1.0/24")
	assert.True(t, changed, "as upstream: true after a failed call too")
	assert.ErrorContains(t, err, "failed to update pod CIDR: rpc error: code = InvalidArgument desc = bad CIDR")
	assert.Equal(t, "10.128.0.0/24", kl.PodCIDR(), "remembered only on success")

	cri.err = nil
	changed, err = kl.updatePodCIDR(ctx, "10.128.1.0/24")
	require.NoError(t, err)
	assert.True(t, changed, "tried again")
	assert.Equal(t, "10.128.1.0/24", kl.PodCIDR())
	assert.Equal(t, []string{"10.128.0.0/24", "10.128.1.0/24", "10.128.1.0/24"}, cri.callsSoFar())

	none := &Kubelet{} // no pod half: no runtime to tell
	changed, err = none.updatePodCIDR(ctx, "10.128.0.0/24")
	assert.False(t, changed)
	assert.NoError(t, err)
}

// TestNodeStatusHandsTheNodesPodCIDRsToTheRuntime: once the node has
// spec.podCIDRs (the node IPAM controller's), the next status update hands
// them, joined, to the runtime and writes the status though nothing else
// changed; a runtime that refuses them is asked again at the next update.
func TestNodeStatusHandsTheNodesPodCIDRsToTheRuntime(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	cri := &podCIDRCRI{err: errors.New("runtime busy")}
	f.kl.cri, f.kl.runtimeState = cri, &runtimeState{}
	f.kl.SyncNodeStatus(ctx) // registers and writes the first report
	require.Empty(t, cri.callsSoFar(), "no podCIDRs yet")
	patches := f.count("patch")

	node := f.node(t)
	node.Spec.PodCIDR, node.Spec.PodCIDRs = "10.128.7.0/24", []string{"10.128.7.0/24", "fd00:10:7::/64"}
	require.NoError(t, f.cs.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, node, ""))

	f.kl.SyncNodeStatus(ctx)
	assert.Equal(t, []string{"10.128.7.0/24,fd00:10:7::/64"}, cri.callsSoFar())
	assert.Empty(t, f.kl.PodCIDR(), "refused: not remembered")

	cri.mu.Lock()
	cri.err = nil
	cri.mu.Unlock()
	f.kl.SyncNodeStatus(ctx)
	assert.Equal(t, "10.128.7.0/24,fd00:10:7::/64", f.kl.PodCIDR())
	f.kl.SyncNodeStatus(ctx)
	assert.Len(t, cri.callsSoFar(), 2, "asked again after the failure, then never for the same CIDRs")
	assert.Equal(t, patches+2, f.count("patch"), "a changed pod CIDR writes the status (the failed try too, as upstream)")
}
