package fakeruntime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

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
// A pod network whose first range was taken (another mock runtime on the
// machine holds it) waits for this call with no range (netWaits): the
// first free range it brings is built, as a CNI bridge plugin builds its
// bridge at the first ADD, and RunPodSandbox works from then on. A range
// that is taken too fails with the reason, FailedPrecondition, and the
// network waits on (the kubelet tries again at its next status update).
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
	if prefix == r.ips.Prefix() && !r.netWaits {
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
			var taken *podnet.RangeTakenError
			if r.netWaits && errors.As(err, &taken) {
				r.netErr = waitsError(taken) // it waits on, for this reason now
			}
			return nil, status.Errorf(codes.FailedPrecondition, "UpdateRuntimeConfig: %v", err)
		}
	}
	r.ips = ips
	if r.netWaits {
		r.netWaits, r.netErr = false, nil
		klog.InfoS("The mock runtime's pod network is built on the node's pod CIDR", "podCIDR", prefix, "netns", r.net.Name(), "hostInterface", r.net.HostInterface())
	}
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

// ErrPodNetworkWaits: the pod network's first range (Config.PodCIDR) was
// taken, and the network waits for the node's pod CIDR.
var ErrPodNetworkWaits = errors.New("waits for the node's pod CIDR")

// waitsError is the reason a waiting pod network gives.
func waitsError(taken *podnet.RangeTakenError) error {
	return fmt.Errorf("%w (%s overlaps a route the host already has: %s)", ErrPodNetworkWaits, taken.Prefix, taken.Route)
}

// waitForPodCIDR turns a pod network that New refused because its range
// is taken (another mock runtime on the machine, such as a second node's)
// into one that waits for the node's pod CIDR: the namespace and the veth
// pair are made with no range, and RunPodSandbox fails until
// UpdateRuntimeConfig brings a free one. Before, the runtime ran without a
// network and handed out addresses that led nowhere. Called by NewRuntime.
func (r *Runtime) waitForPodCIDR() {
	var taken *podnet.RangeTakenError
	if !errors.As(r.netErr, &taken) {
		return
	}
	n, err := podnet.New(netip.Prefix{})
	if err != nil {
		return // no network, and netErr says why the first try failed
	}
	r.net, r.netErr, r.netWaits = n, waitsError(taken), true
}

// podNetworkReady fails, as a CNI plugin's ADD would, while the pod
// network waits for the node's pod CIDR: no sandbox gets an address that
// leads nowhere. Caller holds mu.
func (r *Runtime) podNetworkReady() error {
	if r.netWaits {
		return fmt.Errorf("the pod network %v", r.netErr)
	}
	return nil
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
// (PodCIDR; not while the pod network waits for the node's), then, as a /32 each, the address of every sandbox still in
// an earlier range. A probe guard that lets the kubelet reach the pod network reads it
// on each dial, since UpdateRuntimeConfig changes it.
func (r *Runtime) PodCIDRs() []netip.Prefix {
	r.mu.Lock()
	defer r.mu.Unlock()
	current := r.ips.Prefix()
	var out []netip.Prefix
	if !r.netWaits { // else the range is someone else's
		out = append(out, current)
	}
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
