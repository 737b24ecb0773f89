package fakeruntime

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/fakeruntime/podnet"
)

// UpdateRuntimeConfig takes the node's pod CIDR from the kubelet (its
// updatePodCIDR, once the node controller has given the node
// spec.podCIDRs), as containerd hands it to its CNI bridge plugin: new
// sandboxes get their addresses from it from then on. Sandboxes already
// running keep theirs: the allocator starts with their addresses taken
// (those in the new range), and the pod network keeps the old range on its
// veth until the last of them stops (podnet.Network.SwitchRange). Without
// a call the runtime keeps Config.PodCIDR (DefaultPodCIDR).
//
// PodCidr is a comma-separated list, as the kubelet joins a dual-stack
// node's spec.podCIDRs; the mock's network is IPv4 only, so it takes the
// first IPv4 range. The same range again changes nothing; an empty one is
// ignored, as containerd ignores it; a malformed one, or none IPv4, is
// InvalidArgument.
func (r *Runtime) UpdateRuntimeConfig(_ context.Context, req *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	cidrs := req.GetRuntimeConfig().GetNetworkConfig().GetPodCidr()
	if strings.TrimSpace(cidrs) == "" {
		return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
	}
	prefix, err := firstIPv4Range(cidrs)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "UpdateRuntimeConfig: %v", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if prefix == r.ips.Prefix() {
		return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
	}
	ips, err := podnet.NewIPAllocator(prefix.String())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "UpdateRuntimeConfig: %v", err)
	}
	for _, s := range r.sandboxes { // their addresses stay theirs until they stop
		if s.state == runtimeapi.PodSandboxState_SANDBOX_READY {
			ips.Reserve(s.ip)
		}
	}
	if r.net != nil {
		if err := r.net.SwitchRange(prefix); err != nil {
			return nil, status.Errorf(codes.FailedPrecondition, "UpdateRuntimeConfig: %v", err)
		}
	}
	r.ips = ips
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

// firstIPv4Range parses a comma-separated list of CIDRs and returns the
// first IPv4 one, masked.
func firstIPv4Range(cidrs string) (netip.Prefix, error) {
	var first netip.Prefix
	for c := range strings.SplitSeq(cidrs, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("pod CIDR %q: %w", c, err)
		}
		if p.Addr().Is4() && !first.IsValid() {
			first = p.Masked()
		}
	}
	if !first.IsValid() {
		return netip.Prefix{}, fmt.Errorf("pod CIDR %q: the mock runtime's pod network is IPv4 only, and there is no IPv4 range", cidrs)
	}
	return first, nil
}

// PodCIDRs are where the sandboxes' IPs are: the current range first
// (PodCIDR), then, as a /32 each, the address of every sandbox still in
// an earlier range. A probe guard that lets the kubelet reach the pod network reads it
// on each dial, since UpdateRuntimeConfig changes it.
func (r *Runtime) PodCIDRs() []netip.Prefix {
	r.mu.Lock()
	defer r.mu.Unlock()
	current := r.ips.Prefix()
	out := []netip.Prefix{current}
	for _, s := range r.sandboxes {
		a, err := netip.ParseAddr(s.ip)
		if err != nil || current.Contains(a) {
			continue
		}
		if !slices.ContainsFunc(out, func(p netip.Prefix) bool { return p.Contains(a) }) {
			out = append(out, netip.PrefixFrom(a, 32))
		}
	}
	return out
}

// ReachPodCIDRs wraps guarded, a dial that reaches only the networks it
// was given when the kubelet started (prober.GuardedDialer), so that an
// address in the runtime's pod network as it is now (PodCIDRs: the node's
// pod CIDR, once UpdateRuntimeConfig has given it) is reached too, and
// every other address is still guarded's to refuse. Without a pod network
// it is guarded: the sandboxes' IPs lead nowhere.
func (r *Runtime) ReachPodCIDRs(guarded func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if r.net == nil {
		return guarded
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			if ip, err := netip.ParseAddr(host); err == nil {
				for _, p := range r.PodCIDRs() {
					if p.Contains(ip.Unmap()) {
						var d net.Dialer
						return d.DialContext(ctx, network, addr)
					}
				}
			}
		}
		return guarded(ctx, network, addr)
	}
}
