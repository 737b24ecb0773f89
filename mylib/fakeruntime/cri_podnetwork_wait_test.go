package fakeruntime

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// TestPodNetworkWaitsForTheNodesPodCIDR: a second runtime on the machine
// whose first range another runtime holds (a second node on one machine) does
// not run without a network, handing out addresses that lead nowhere: it
// waits. Its RunPodSandbox fails with the reason, as a CNI plugin's ADD
// would (the kubelet's FailedCreatePodSandBox), and so does a pod CIDR
// that is taken too; once UpdateRuntimeConfig brings a free range (the
// node's podCIDR), its network is built there, and a sandbox gets an
// address in it that the host reaches: nginx answers on it, from the
// sandbox process that joined the network's namespace.
func TestPodNetworkWaitsForTheNodesPodCIDR(t *testing.T) {
	first := networkRuntime(t, clock.RealClock{})
	taken := first.PodCIDR()

	r, err := NewRuntime(Config{Clock: clock.RealClock{}, StateDir: t.TempDir(), PodCIDR: taken.String(), PodNetwork: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	require.ErrorIs(t, r.PodNetworkError(), ErrPodNetworkWaits)
	assert.EqualError(t, r.PodNetworkError(), fmt.Sprintf("waits for the node's pod CIDR (%s overlaps a route the host already has: %s dev %s)",
		taken, taken, first.net.HostInterface()))
	ns, veth := r.PodNetworkName()
	assert.Contains(t, netnsNames(t), ns, "its namespace is made, with no range on it")
	assert.Empty(t, hostAddrs(t, veth), "no address on the veth: no route")
	assert.Empty(t, r.PodCIDRs(), "the taken range is not its to reach")

	ctx := context.Background()
	_, err = r.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "nginx:1.27"}})
	require.NoError(t, err)
	web := &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-web"}}}
	_, err = r.RunPodSandbox(ctx, web)
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), "RunPodSandbox default/web: the pod network waits for the node's pod CIDR ("+taken.String()+" overlaps a route the host already has: ")
	_, err = r.RunPodSandbox(ctx, web)
	require.Error(t, err, "the failed try left no sandbox, nor its name taken")
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)

	// The node's pod CIDR taken too: refused with the reason; it waits on.
	err = updatePodCIDR(r, taken.String())
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	assert.Contains(t, err.Error(), "overlaps a route the host already has")
	require.ErrorIs(t, r.PodNetworkError(), ErrPodNetworkWaits)

	var node netip.Prefix
	for i := range 64 { // a range of its own: tests run side by side
		node = netip.MustParsePrefix(fmt.Sprintf("10.235.%d.0/24", (os.Getpid()+i)%256))
		if err = updatePodCIDR(r, node.String()); err == nil {
			break
		}
		require.Equal(t, codes.FailedPrecondition, status.Code(err), "a route of the host's: %v", err)
	}
	require.NoError(t, err)
	require.NoError(t, r.PodNetworkError())
	assert.Equal(t, []netip.Prefix{node}, r.PodCIDRs())
	assert.Equal(t, []string{gatewayOf(node)}, hostAddrs(t, veth), "the host routes the node's range through the veth")

	ip, _ := serverContainer(t, r, "web", "nginx:1.27", nil)
	assert.True(t, node.Contains(mustAddr(t, ip)), "%s in %s", ip, node)
	code, body := get(t, "http://"+ip+"/")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, "Welcome to nginx!")
}
