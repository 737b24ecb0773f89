package fakeruntime

// The pod network: with Config.PodNetwork, the runtime makes the sandboxes'
// IPs real, so that the kubelet's httpGet, tcpSocket and grpc probes (and
// curl) reach the servers the images run, as a CNI bridge plugin would
// make them reachable — but in one network namespace of the runtime's own
// rather than one per sandbox, since the containers are goroutines of this
// process, not processes of their own:
//
//	host namespace                          namespace mykubelet-<pid>-<n>
//	mkl<pid>-<n>  10.88.0.1/16  <== veth ==>  eth0  10.88.0.2/16, 10.88.0.3/16, … (one per sandbox)
//
// The host end holds the range's first address (the gateway, which the
// IPAM never hands out), so the host has a route to the range through the
// veth and nowhere else; each sandbox's IP is added to eth0 when it runs
// and removed when it stops. A server command listens on its sandbox's
// IP, in the namespace (a goroutine locked to an OS thread that joins the
// namespace with setns, makes the listening socket and ends, so no other
// goroutine ever runs there); the socket keeps the namespace. Nothing in
// it routes anywhere else.
//
// It needs root and the ip command (iproute2). The namespace goes with
// Close; one left by a runtime that crashed (its process is gone) is
// removed when the next runtime makes its own.

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// NetnsPrefix starts the name of every network namespace a runtime makes.
const NetnsPrefix = "mykubelet-"

var netnsSeq atomic.Int32 // several runtimes in one process (tests) get their own

// podNetwork is the runtime's network namespace and veth pair.
type podNetwork struct {
	name   string // the namespace, NetnsPrefix<pid>-<n>
	hostIf string // the veth's host end
	prefix netip.Prefix
	ns     *os.File // the namespace, for setns

	mu     sync.Mutex
	closed bool
}

// newPodNetwork makes the namespace and the veth pair for prefix, after
// removing what crashed runtimes left. It fails with one clear sentence
// when it cannot (not root, no ip command, the range already routed).
func newPodNetwork(prefix netip.Prefix) (*podNetwork, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the pod network needs root (to make a network namespace and a veth pair)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, errors.New("the pod network needs the ip command (iproute2)")
	}
	RemoveStaleNetworks()
	if err := checkRouteFree(prefix); err != nil {
		return nil, err
	}
	pid, seq := os.Getpid(), netnsSeq.Add(1)-1
	n := &podNetwork{
		name:   fmt.Sprintf("%s%d-%d", NetnsPrefix, pid, seq),
		hostIf: fmt.Sprintf("mkl%d-%d", pid, seq),
		prefix: prefix,
	}
	gw := netip.PrefixFrom(prefix.Addr().Next(), prefix.Bits()).String()
	for _, args := range [][]string{
		{"netns", "add", n.name},
		{"link", "add", n.hostIf, "type", "veth", "peer", "name", "eth0", "netns", n.name},
		{"addr", "add", gw, "dev", n.hostIf},
		{"link", "set", n.hostIf, "up"},
		{"-n", n.name, "link", "set", "lo", "up"},
		{"-n", n.name, "link", "set", "eth0", "up"},
	} {
		if err := ip(args...); err != nil {
			n.close()
			return nil, fmt.Errorf("pod network %s: %w", prefix, err)
		}
	}
	f, err := os.Open("/run/netns/" + n.name)
	if err != nil {
		n.close()
		return nil, fmt.Errorf("pod network %s: %w", prefix, err)
	}
	n.ns = f
	return n, nil
}

// ip runs the ip command; its error says what ip said.
func ip(args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.Command("ip", args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %s", strings.Join(args, " "), strings.TrimSpace(stderr.String()+" "+err.Error()))
	}
	return nil
}

// checkRouteFree fails if the host already routes part of prefix (another
// runtime's pod network, a CNI bridge, a VPN): two routes would fight.
func checkRouteFree(prefix netip.Prefix) error {
	out, err := exec.Command("ip", "-o", "-4", "route", "show").Output()
	if err != nil {
		return fmt.Errorf("pod network: ip route show: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == "default" {
			continue
		}
		dst, err := netip.ParsePrefix(f[0])
		if err != nil {
			a, err2 := netip.ParseAddr(f[0])
			if err2 != nil {
				continue
			}
			dst = netip.PrefixFrom(a, 32)
		}
		if dst.Overlaps(prefix) {
			return fmt.Errorf("the pod CIDR %s overlaps a route the host already has (%s): another mock runtime or a container network uses it; stop it or choose another pod CIDR", prefix, strings.TrimSpace(line))
		}
	}
	return nil
}

// RemoveStaleNetworks removes the network namespaces (and with them their
// veth pairs) of runtimes whose process is gone, as after a crash.
func RemoveStaleNetworks() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return // no namespaces to look at
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], NetnsPrefix) {
			continue
		}
		pidText, _, _ := strings.Cut(strings.TrimPrefix(f[0], NetnsPrefix), "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue // alive (or ours): not stale
		}
		_ = ip("netns", "del", f[0]) // gone by now, or someone else removed it
	}
}

// addIP puts a sandbox's IP on eth0 in the namespace.
func (n *podNetwork) addIP(addr string) error {
	return ip("-n", n.name, "addr", "add", addr+"/"+strconv.Itoa(n.prefix.Bits()), "dev", "eth0")
}

// delIP takes it off; one not there is not an error.
func (n *podNetwork) delIP(addr string) {
	_ = ip("-n", n.name, "addr", "del", addr+"/"+strconv.Itoa(n.prefix.Bits()), "dev", "eth0")
}

// listen listens on TCP addr inside the namespace.
func (n *podNetwork) listen(addr string) (net.Listener, error) {
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
		if err := unix.Setns(int(n.ns.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{nil, fmt.Errorf("setns %s: %w", n.name, err)}
			return
		}
		l, err := net.Listen("tcp", addr)
		ch <- result{l, err}
	}()
	r := <-ch
	return r.l, r.err
}

// close removes the namespace, which takes the veth pair with it.
func (n *podNetwork) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.closed = true
	if n.ns != nil {
		n.ns.Close()
	}
	_ = ip("netns", "del", n.name)  // already gone is fine
	_ = ip("link", "del", n.hostIf) // normally gone with the namespace
}

// PodNetworkName names the pod network's namespace and host interface
// ("" without one), for a learner's `ip netns exec` and `ip addr`.
func (r *Runtime) PodNetworkName() (namespace, hostInterface string) {
	if r.net == nil {
		return "", ""
	}
	return r.net.name, r.net.hostIf
}
