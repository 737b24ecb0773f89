package podnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetnsPrefix starts the name of every network namespace a runtime makes.
const NetnsPrefix = "mykubelet-"

// NetnsDir is where named network namespaces are mounted, as iproute2
// names them.
const NetnsDir = "/run/netns"

var netnsSeq atomic.Int32 // several runtimes in one process (tests) get their own

// Network is the runtime's network namespace and veth pair.
type Network struct {
	name   string          // the namespace, NetnsPrefix<pid>-<n>
	hostIf string          // the veth's host end
	prefix netip.Prefix    // the range New made the veth for
	ns     *os.File        // the namespace, for setns
	nl     *netlink.Handle // netlink sockets in the namespace, for eth0's addresses

	mu     sync.Mutex
	closed bool
	// The pod CIDRs the veth carries (its host end holds each one's
	// gateway, so the host routes each through it), with how many
	// sandbox addresses each has on eth0. New sandboxes' addresses come
	// from current; an earlier range stays while one of its addresses
	// does, and goes with the last (SwitchRange, DelIP).
	ranges  map[netip.Prefix]int
	current netip.Prefix
}

// New makes the namespace and the veth pair for prefix, after
// removing what crashed runtimes left. It fails with one clear sentence
// when it cannot (not root; the range already routed: a
// *RangeTakenError). A prefix that is not valid (the zero Prefix) makes
// them with no range at all: no address on the veth, no route, until
// SwitchRange gives it one (a runtime whose first range was taken waits
// so for the node's pod CIDR).
func New(prefix netip.Prefix) (*Network, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the pod network needs root (to make a network namespace and a veth pair)")
	}
	RemoveStaleNetworks()
	ranges := map[netip.Prefix]int{}
	if prefix.IsValid() {
		if err := checkRouteFree(prefix, 0); err != nil {
			return nil, err
		}
		ranges[prefix] = 0
	}
	pid, seq := os.Getpid(), netnsSeq.Add(1)-1
	n := &Network{
		name:    fmt.Sprintf("%s%d-%d", NetnsPrefix, pid, seq),
		hostIf:  fmt.Sprintf("mkl%d-%d", pid, seq),
		prefix:  prefix,
		ranges:  ranges,
		current: prefix,
	}
	if err := n.setUp(); err != nil {
		n.Close()
		return nil, fmt.Errorf("pod network %s: %w", prefix, err)
	}
	return n, nil
}

// setUp does what these would do:
//
//	ip netns add NAME
//	ip link add HOSTIF type veth peer name eth0 netns NAME
//	ip addr add GATEWAY/BITS dev HOSTIF
//	ip link set HOSTIF up
//	ip -n NAME link set lo up
//	ip -n NAME link set eth0 up
func (n *Network) setUp() error {
	ns, err := addNamedNetns(n.name)
	if err != nil {
		return err
	}
	n.ns = ns
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: n.hostIf}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(ns.Fd()))}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth pair %s (eth0 in %s): %w", n.hostIf, n.name, err)
	}
	host, err := netlink.LinkByName(n.hostIf)
	if err != nil {
		return fmt.Errorf("veth %s: %w", n.hostIf, err)
	}
	if n.prefix.IsValid() { // else no range yet
		if err := netlink.AddrAdd(host, gateway(n.prefix)); err != nil {
			return fmt.Errorf("add %s to %s: %w", gateway(n.prefix).IPNet, n.hostIf, err)
		}
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return fmt.Errorf("set %s up: %w", n.hostIf, err)
	}
	// Netlink sockets made in the namespace speak to it from any thread.
	n.nl, err = netlink.NewHandleAt(netns.NsHandle(int(ns.Fd())), unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", n.name, err)
	}
	for _, name := range []string{"lo", "eth0"} {
		l, err := n.nl.LinkByName(name)
		if err == nil {
			err = n.nl.LinkSetUp(l)
		}
		if err != nil {
			return fmt.Errorf("set %s up in %s: %w", name, n.name, err)
		}
	}
	// Each sandbox's address is one more of the range on eth0, which the
	// kernel keeps as a secondary of the first; without this, taking the
	// first away (its sandbox stopped) would take all the others with it.
	if err := n.setSysctl("net/ipv4/conf/eth0/promote_secondaries", "1"); err != nil {
		return err
	}
	return nil
}

// setSysctl writes value to /proc/sys/key in the namespace: from a thread
// that joins it (/proc/sys/net shows the namespace of the thread that opens
// it) and ends with its goroutine, never given back.
func (n *Network) setSysctl(key, value string) error {
	err := OnOwnThread(func() error {
		if err := n.Enter(); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644)
	})
	if err != nil {
		return fmt.Errorf("sysctl %s in %s: %w", key, n.name, err)
	}
	return nil
}

// addNamedNetns makes a network namespace and names it as `ip netns add
// name` does: it bind-mounts the namespace on /run/netns/name, which keeps
// it alive with no process in it and lets `ip netns exec name …` find it.
// It returns the namespace, open.
func addNamedNetns(name string) (*os.File, error) {
	if err := os.MkdirAll(NetnsDir, 0o755); err != nil {
		return nil, fmt.Errorf("network namespace %s: %w", name, err)
	}
	path := filepath.Join(NetnsDir, name)
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444) // the mount point
	if err != nil {
		return nil, fmt.Errorf("network namespace %s: %w", name, err)
	}
	f.Close()
	// The thread leaves the host's namespace for a new one, and is never
	// given back (OnOwnThread).
	err = OnOwnThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		if err := unix.Mount("/proc/thread-self/ns/net", path, "none", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind mount on %s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		_ = os.Remove(path) // the mount point we made, empty
		return nil, fmt.Errorf("network namespace %s: %w", name, err)
	}
	ns, err := os.Open(path)
	if err != nil {
		_ = deleteNamedNetns(name)
		return nil, fmt.Errorf("network namespace %s: %w", name, err)
	}
	return ns, nil
}

// deleteNamedNetns is `ip netns del name`: the namespace goes when nothing
// else holds it (an open file, a socket, a process in it).
func deleteNamedNetns(name string) error {
	path := filepath.Join(NetnsDir, name)
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("network namespace %s: unmount: %w", name, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("network namespace %s: %w", name, err)
	}
	return nil
}

// gateway is prefix's first host address, with prefix's mask: the host
// end's address for that range.
func gateway(prefix netip.Prefix) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: prefix.Addr().Next().AsSlice(), Mask: net.CIDRMask(prefix.Bits(), prefix.Addr().BitLen())}}
}

// checkRouteFree fails if the host already routes part of prefix (another
// runtime's pod network, a CNI bridge, a VPN): two routes would fight.
// Routes through the link with index ours (the caller's own veth; 0: none)
// do not count. It reads the main table, as `ip route show` does.
func checkRouteFree(prefix netip.Prefix, ours int) error {
	routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
	for i := 0; errors.Is(err, netlink.ErrDumpInterrupted) && i < 5; i++ {
		routes, err = netlink.RouteList(nil, netlink.FAMILY_V4) // the table changed while it was read
	}
	if err != nil {
		return fmt.Errorf("pod network: list the host's routes: %w", err)
	}
	for _, rt := range routes {
		if rt.Dst == nil || (ours != 0 && rt.LinkIndex == ours) {
			continue // the default route, or one of ours
		}
		a, ok := netip.AddrFromSlice(rt.Dst.IP)
		bits, _ := rt.Dst.Mask.Size()
		if !ok || bits == 0 {
			continue // the default route (0.0.0.0/0)
		}
		if dst := netip.PrefixFrom(a.Unmap(), bits); dst.Overlaps(prefix) {
			return &RangeTakenError{Prefix: prefix, Route: routeString(rt)}
		}
	}
	return nil
}

// RangeTakenError: the host already routes part of a pod CIDR, through
// someone else's link (another runtime's pod network, a CNI bridge, a VPN).
type RangeTakenError struct {
	Prefix netip.Prefix // the pod CIDR asked for
	Route  string       // the route in the way, as `ip route show` writes it
}

func (e *RangeTakenError) Error() string {
	return fmt.Sprintf("the pod CIDR %s overlaps a route the host already has (%s): another mock runtime or a container network uses it; stop it or choose another pod CIDR", e.Prefix, e.Route)
}

// routeString writes a route as `ip route show` does, in short: "10.88.0.0/16
// dev mkl42-0", "10.1.0.0/16 via 192.168.1.1 dev eth0".
func routeString(rt netlink.Route) string {
	s := rt.Dst.String()
	if rt.Gw != nil {
		s += " via " + rt.Gw.String()
	}
	if l, err := netlink.LinkByIndex(rt.LinkIndex); err == nil {
		s += " dev " + l.Attrs().Name
	}
	return s
}

// RemoveStaleNetworks removes the network namespaces (and with them their
// veth pairs) of runtimes whose process is gone, as after a crash.
func RemoveStaleNetworks() {
	entries, err := os.ReadDir(NetnsDir)
	if err != nil {
		return // no namespaces to look at
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), NetnsPrefix) {
			continue
		}
		pidText, _, _ := strings.Cut(strings.TrimPrefix(e.Name(), NetnsPrefix), "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue // alive (or ours): not stale
		}
		_ = deleteNamedNetns(e.Name()) // gone by now, or someone else removed it
	}
}

// AddIP puts a sandbox's IP on eth0 in the namespace (ip -n NAME addr add
// IP/BITS dev eth0, BITS its range's).
func (n *Network) AddIP(addr string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	p, err := n.eth0Addr(addr, n.nl.AddrAdd)
	if err != nil {
		return fmt.Errorf("add %s to eth0 in %s: %w", addr, n.name, err)
	}
	n.ranges[p]++
	return nil
}

// DelIP takes it off; one not there is not an error. The last address of
// a range that is no longer the current one takes the range with it.
func (n *Network) DelIP(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p, _ := n.eth0Addr(addr, n.nl.AddrDel)
	if !p.IsValid() {
		return
	}
	if n.ranges[p] > 0 {
		n.ranges[p]--
	}
	if p != n.current && n.ranges[p] == 0 {
		n.dropRange(p)
	}
}

// eth0Addr calls do (AddrAdd or AddrDel) with eth0 and addr/bits, bits
// those of the range that holds addr, and returns that range. Caller
// holds mu.
func (n *Network) eth0Addr(addr string, do func(netlink.Link, *netlink.Addr) error) (netip.Prefix, error) {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return netip.Prefix{}, err
	}
	var p netip.Prefix
	for r := range n.ranges {
		if r.Contains(a) {
			p = r
		}
	}
	if !p.IsValid() {
		return netip.Prefix{}, fmt.Errorf("%s is in none of the pod network's ranges (%s)", addr, n.rangesString())
	}
	eth0, err := n.nl.LinkByName("eth0")
	if err != nil {
		return p, err
	}
	return p, do(eth0, &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(p.Bits(), a.BitLen())}})
}

// SwitchRange makes prefix the range new sandboxes' addresses come from,
// as a CNI bridge plugin reconfigured with the node's pod CIDR would:
// the host end of the veth takes prefix's gateway (so the host routes
// prefix through it), and the ranges before it stay on the veth only while
// a sandbox still has an address in them. It fails, changing nothing, when
// prefix overlaps a range a sandbox still uses or a route of the host's
// that is not the pod network's.
func (n *Network) SwitchRange(prefix netip.Prefix) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errors.New("the pod network is gone")
	}
	prefix = prefix.Masked()
	if prefix == n.current {
		return nil
	}
	if _, ours := n.ranges[prefix]; !ours {
		for p, addrs := range n.ranges {
			if p.Overlaps(prefix) && addrs > 0 {
				return fmt.Errorf("pod network %s: the pod CIDR %s overlaps %s, where %d sandbox(es) still run", n.name, prefix, p, addrs)
			}
		}
		host, err := netlink.LinkByName(n.hostIf)
		if err != nil {
			return fmt.Errorf("veth %s: %w", n.hostIf, err)
		}
		if err := checkRouteFree(prefix, host.Attrs().Index); err != nil {
			return err
		}
		if err := netlink.AddrAdd(host, gateway(prefix)); err != nil {
			return fmt.Errorf("add %s to %s: %w", gateway(prefix).IPNet, n.hostIf, err)
		}
		n.ranges[prefix] = 0
	}
	n.current = prefix
	for p, addrs := range n.ranges {
		if p != prefix && addrs == 0 {
			n.dropRange(p)
		}
	}
	return nil
}

// dropRange takes p's gateway off the host end (and with it the host's
// route to p). Caller holds mu.
func (n *Network) dropRange(p netip.Prefix) {
	delete(n.ranges, p)
	if host, err := netlink.LinkByName(n.hostIf); err == nil {
		_ = netlink.AddrDel(host, gateway(p)) // gone already is fine
	}
}

// Ranges are the pod CIDRs the veth carries, the current one first
// (none before the first, for a network made without a range).
func (n *Network) Ranges() []netip.Prefix {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []netip.Prefix
	for p := range n.ranges {
		if p != n.current {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	if n.current.IsValid() {
		out = append([]netip.Prefix{n.current}, out...)
	}
	return out
}

// rangesString lists the ranges for an error. Caller holds mu.
func (n *Network) rangesString() string {
	var s []string
	for p := range n.ranges {
		s = append(s, p.String())
	}
	slices.Sort(s)
	return strings.Join(s, ", ")
}

// Listen listens on TCP addr inside the namespace.
func (n *Network) Listen(addr string) (net.Listener, error) {
	var l net.Listener
	err := n.inNamespace(func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

// inNamespace runs fn on an OS thread of its own (OnOwnThread) that has
// joined the namespace with setns, and waits for it: no other goroutine
// ever runs in the namespace. The sockets fn makes stay in the namespace
// (a socket keeps the namespace it was made in), so the caller uses them
// from any thread.
func (n *Network) inNamespace(fn func() error) error {
	return OnOwnThread(func() error {
		n.mu.Lock()
		closed := n.closed
		n.mu.Unlock()
		if closed {
			return errors.New("the pod network is gone")
		}
		if err := n.Enter(); err != nil {
			return err
		}
		return fn()
	})
}

// Close removes the namespace, which takes the veth pair with it.
func (n *Network) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.closed = true
	if n.nl != nil {
		n.nl.Close()
	}
	if n.ns != nil {
		n.ns.Close()
		_ = deleteNamedNetns(n.name) // already gone is fine
	}
	// Normally gone with the namespace; not while a listening socket holds it.
	if l, err := netlink.LinkByName(n.hostIf); err == nil {
		_ = netlink.LinkDel(l)
	}
}

// Name is the namespace's name, for a learner's `ip netns exec`.
func (n *Network) Name() string { return n.name }

// HostInterface is the veth's host end, for a learner's `ip addr`.
func (n *Network) HostInterface() string { return n.hostIf }

// Enter moves the calling OS thread into the namespace. The caller has
// locked its goroutine to the thread and never unlocks it, so that the
// thread ends with the goroutine and nothing else ever runs there.
func (n *Network) Enter() error {
	if err := unix.Setns(int(n.ns.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns %s: %w", n.name, err)
	}
	return nil
}
