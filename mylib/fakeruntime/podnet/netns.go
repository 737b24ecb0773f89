package podnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
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
	name   string // the namespace, NetnsPrefix<pid>-<n>
	hostIf string // the veth's host end
	prefix netip.Prefix
	ns     *os.File        // the namespace, for setns
	nl     *netlink.Handle // netlink sockets in the namespace, for eth0's addresses

	mu     sync.Mutex
	closed bool
}

// New makes the namespace and the veth pair for prefix, after
// removing what crashed runtimes left. It fails with one clear sentence
// when it cannot (not root, the range already routed).
func New(prefix netip.Prefix) (*Network, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the pod network needs root (to make a network namespace and a veth pair)")
	}
	RemoveStaleNetworks()
	if err := checkRouteFree(prefix); err != nil {
		return nil, err
	}
	pid, seq := os.Getpid(), netnsSeq.Add(1)-1
	n := &Network{
		name:   fmt.Sprintf("%s%d-%d", NetnsPrefix, pid, seq),
		hostIf: fmt.Sprintf("mkl%d-%d", pid, seq),
		prefix: prefix,
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
	gw := &net.IPNet{IP: n.prefix.Addr().Next().AsSlice(), Mask: net.CIDRMask(n.prefix.Bits(), n.prefix.Addr().BitLen())}
	if err := netlink.AddrAdd(host, &netlink.Addr{IPNet: gw}); err != nil {
		return fmt.Errorf("add %s to %s: %w", gw, n.hostIf, err)
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
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := n.Enter(); err != nil {
			errc <- err
			return
		}
		errc <- os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644)
	}()
	if err := <-errc; err != nil {
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
	errc := make(chan error, 1)
	go func() {
		// This thread leaves the host's namespace for a new one, and is
		// never given back: when the goroutine ends, the Go runtime ends
		// the thread, so no other goroutine ever runs there.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		if err := unix.Mount("/proc/thread-self/ns/net", path, "none", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("bind mount on %s: %w", path, err)
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
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

// checkRouteFree fails if the host already routes part of prefix (another
// runtime's pod network, a CNI bridge, a VPN): two routes would fight. It
// reads the main table, as `ip route show` does.
func checkRouteFree(prefix netip.Prefix) error {
	routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
	for i := 0; errors.Is(err, netlink.ErrDumpInterrupted) && i < 5; i++ {
		routes, err = netlink.RouteList(nil, netlink.FAMILY_V4) // the table changed while it was read
	}
	if err != nil {
		return fmt.Errorf("pod network: list the host's routes: %w", err)
	}
	for _, rt := range routes {
		if rt.Dst == nil {
			continue // the default route
		}
		a, ok := netip.AddrFromSlice(rt.Dst.IP)
		bits, _ := rt.Dst.Mask.Size()
		if !ok || bits == 0 {
			continue // the default route (0.0.0.0/0)
		}
		if dst := netip.PrefixFrom(a.Unmap(), bits); dst.Overlaps(prefix) {
			return fmt.Errorf("the pod CIDR %s overlaps a route the host already has (%s): another mock runtime or a container network uses it; stop it or choose another pod CIDR", prefix, routeString(rt))
		}
	}
	return nil
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
// IP/BITS dev eth0).
func (n *Network) AddIP(addr string) error {
	if err := n.eth0Addr(addr, n.nl.AddrAdd); err != nil {
		return fmt.Errorf("add %s to eth0 in %s: %w", addr, n.name, err)
	}
	return nil
}

// DelIP takes it off; one not there is not an error.
func (n *Network) DelIP(addr string) {
	_ = n.eth0Addr(addr, n.nl.AddrDel)
}

// eth0Addr calls do (AddrAdd or AddrDel) with eth0 and addr/bits.
func (n *Network) eth0Addr(addr string, do func(netlink.Link, *netlink.Addr) error) error {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return err
	}
	eth0, err := n.nl.LinkByName("eth0")
	if err != nil {
		return err
	}
	return do(eth0, &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(n.prefix.Bits(), a.BitLen())}})
}

// Listen listens on TCP addr inside the namespace.
func (n *Network) Listen(addr string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// This goroutine's thread joins the namespace and is never given
		// back: when the goroutine ends, the Go runtime ends the thread.
		runtime.LockOSThread()
		n.mu.Lock()
		closed := n.closed
		n.mu.Unlock()
		if closed {
			ch <- result{nil, errors.New("the pod network is gone")}
			return
		}
		if err := n.Enter(); err != nil {
			ch <- result{nil, err}
			return
		}
		l, err := net.Listen("tcp", addr)
		ch <- result{l, err}
	}()
	r := <-ch
	return r.l, r.err
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
