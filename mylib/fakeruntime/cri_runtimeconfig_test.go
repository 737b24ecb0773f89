package fakeruntime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func updatePodCIDR(r *Runtime, cidr string) error {
	_, err := r.UpdateRuntimeConfig(context.Background(), &runtimeapi.UpdateRuntimeConfigRequest{
		RuntimeConfig: &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: cidr}}})
	return err
}

func sandboxIP(t *testing.T, r *Runtime, id string) string {
	t.Helper()
	st, err := r.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	require.NoError(t, err)
	return st.GetStatus().GetNetwork().GetIp()
}

// TestUpdateRuntimeConfigSwitchesThePodCIDR: without a call the default
// range; after one, new sandboxes come from the node's range while the
// running one keeps its address; the same range again changes nothing.
func TestUpdateRuntimeConfigSwitchesThePodCIDR(t *testing.T) {
	r := New(clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)))
	before := runSandbox(t, r, "before", "uid-before", nil)
	assert.Equal(t, "10.88.0.2", sandboxIP(t, r, before), "today's default range without a pod CIDR")

	require.NoError(t, updatePodCIDR(r, "10.128.3.0/24"))
	assert.Equal(t, "10.128.3.0/24", r.PodCIDR().String())
	first := runSandbox(t, r, "first", "uid-first", nil)
	assert.Equal(t, "10.128.3.2", sandboxIP(t, r, first), "the node's range, its first address after the gateway")
	assert.Equal(t, "10.88.0.2", sandboxIP(t, r, before), "a running sandbox keeps its address")
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.128.3.0/24"), netip.MustParsePrefix("10.88.0.2/32")}, r.PodCIDRs())

	require.NoError(t, updatePodCIDR(r, "10.128.3.0/24"), "idempotent")
	require.NoError(t, updatePodCIDR(r, ""), "an empty pod CIDR is ignored")
	second := runSandbox(t, r, "second", "uid-second", nil)
	assert.Equal(t, "10.128.3.3", sandboxIP(t, r, second), "the same allocator: the next address, not the first again")

	// Dual stack: the kubelet joins spec.podCIDRs with commas; the IPv4 one is taken.
	require.NoError(t, updatePodCIDR(r, "fd00:10::/64, 10.129.0.0/24"))
	assert.Equal(t, "10.129.0.0/24", r.PodCIDR().String())
}

// TestUpdateRuntimeConfigBackToARangeInUse: addresses that sandboxes hold
// in the range switched back to are not handed out again.
func TestUpdateRuntimeConfigBackToARangeInUse(t *testing.T) {
	r := New(clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)))
	a := runSandbox(t, r, "a", "uid-a", nil)
	b := runSandbox(t, r, "b", "uid-b", nil)
	require.Equal(t, []string{"10.88.0.2", "10.88.0.3"}, []string{sandboxIP(t, r, a), sandboxIP(t, r, b)})
	require.NoError(t, updatePodCIDR(r, "10.128.0.0/24"))
	require.NoError(t, updatePodCIDR(r, "10.88.0.0/16"))
	c := runSandbox(t, r, "c", "uid-c", nil)
	assert.Equal(t, "10.88.0.4", sandboxIP(t, r, c), "10.88.0.2 and .3 still run")
}

// TestReachPodCIDRsWithoutAPodNetwork: nothing to reach, the guard decides.
func TestReachPodCIDRsWithoutAPodNetwork(t *testing.T) {
	r := New(clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)))
	require.NoError(t, updatePodCIDR(r, "10.128.0.0/24"))
	calls := 0
	dial := r.ReachPodCIDRs(func(context.Context, string, string) (net.Conn, error) { calls++; return nil, errors.New("outside") })
	_, err := dial(context.Background(), "tcp", "10.128.0.2:80")
	assert.EqualError(t, err, "outside")
	assert.Equal(t, 1, calls)
}

func TestUpdateRuntimeConfigRefusesMalformedCIDRs(t *testing.T) {
	r := New(clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)))
	for cidr, want := range map[string]string{
		"10.128.0.0":          `pod CIDR "10.128.0.0"`,
		"not,a,cidr":          `pod CIDR "not"`,
		"fd00::/64":           "IPv4 only",
		"10.128.0.0/31":       "at least 4 addresses",
		"10.128.0.0/24,bogus": `pod CIDR "bogus"`,
		"127.0.0.0/8":         "loopback",
	} {
		err := updatePodCIDR(r, cidr)
		assert.Equal(t, codes.InvalidArgument, status.Code(err), cidr)
		assert.ErrorContains(t, err, want, cidr)
	}
	assert.Equal(t, DefaultPodCIDR, r.PodCIDR().String(), "nothing taken")
}

// TestUpdateRuntimeConfigMovesThePodNetwork (root): the host end of the
// veth takes the new range's gateway, so the host routes it; a sandbox
// started after serves on an address of it; the old range stays while a
// sandbox of it runs, and goes with it.
func TestUpdateRuntimeConfigMovesThePodNetwork(t *testing.T) {
	r := networkRuntime(t, clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)))
	old := r.PodCIDR()
	oldSandbox := runSandbox(t, r, "old", "uid-old", nil)

	var next netip.Prefix
	var err error
	for i := range 64 { // a range of its own: tests run side by side
		next = netip.MustParsePrefix(fmt.Sprintf("10.233.%d.0/24", (os.Getpid()+i)%256))
		if err = updatePodCIDR(r, next.String()); err == nil {
			break
		}
		require.Equal(t, codes.FailedPrecondition, status.Code(err), "a route of the host's: %v", err)
	}
	require.NoError(t, err)
	_, veth := r.PodNetworkName()
	assert.Equal(t, []string{gatewayOf(old), gatewayOf(next)}, hostAddrs(t, veth), "both ranges while the old sandbox runs")

	newSandbox := runSandbox(t, r, "new", "uid-new", nil)
	ip := sandboxIP(t, r, newSandbox)
	require.True(t, next.Contains(netip.MustParseAddr(ip)), ip)
	l, err := r.net.Listen(net.JoinHostPort(ip, "8080"))
	require.NoError(t, err, "the new address is on eth0 in the namespace")
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			_, _ = c.Write([]byte("hello"))
			c.Close()
		}
	}()
	// A probe guard given the old range at start reaches the new one
	// through ReachPodCIDRs, and still refuses the rest.
	refuse := func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("outside") }
	dial := r.ReachPodCIDRs(refuse)
	_, err = dial(context.Background(), "tcp", "192.0.2.1:80")
	assert.EqualError(t, err, "outside", "not the pod network's")
	c, err := dial(context.Background(), "tcp", net.JoinHostPort(ip, "8080"))
	require.NoError(t, err, "the host reaches the new range through the veth")
	buf := make([]byte, 5)
	_, err = c.Read(buf)
	c.Close()
	require.NoError(t, err)
	assert.Equal(t, "hello", string(buf))

	_, err = r.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: oldSandbox})
	require.NoError(t, err)
	assert.Equal(t, []string{gatewayOf(next)}, hostAddrs(t, veth), "the old range went with its last sandbox")
}

func gatewayOf(p netip.Prefix) string {
	return netip.PrefixFrom(p.Addr().Next(), p.Bits()).String()
}

// hostAddrs are the IPv4 addresses on the host's link name (ip -4 addr show dev name).
func hostAddrs(t *testing.T, name string) []string {
	t.Helper()
	l, err := netlink.LinkByName(name)
	require.NoError(t, err)
	addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
	require.NoError(t, err)
	var out []string
	for _, a := range addrs {
		out = append(out, a.IPNet.String())
	}
	return out
}
