package podnet

import (
	"fmt"
	"net/netip"
)

// IPAllocator hands out sandbox IPs from a range, as a CNI plugin's
// host-local IPAM does: the lowest free address, skipping the network
// address, the gateway (the first host address) and the broadcast address.
// An address is taken while its sandbox runs and free again once the
// sandbox stops (the runtime releases it in StopPodSandbox, as containerd's
// CNI DEL does). It is not safe for concurrent use: the runtime calls it under its lock.
type IPAllocator struct {
	prefix netip.Prefix
	used   map[netip.Addr]bool
	next   netip.Addr // where the search for a free address starts
}

// NewIPAllocator hands out the addresses of cidr, an IPv4 range of at
// least 4 addresses (such as 10.88.0.0/16) that is neither loopback nor
// link-local.
func NewIPAllocator(cidr string) (*IPAllocator, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, fmt.Errorf("pod CIDR %q: %w", cidr, err)
	}
	p = p.Masked()
	if !p.Addr().Is4() || p.Bits() > 30 {
		return nil, fmt.Errorf("pod CIDR %q: want an IPv4 range of at least 4 addresses, such as 10.88.0.0/16", cidr)
	}
	if p.Addr().IsLoopback() || p.Addr().IsLinkLocalUnicast() {
		return nil, fmt.Errorf("pod CIDR %q: a loopback or link-local range would collide with the host's own addresses", cidr)
	}
	first := p.Addr().Next().Next() // skip the network address and the gateway
	return &IPAllocator{prefix: p, used: map[netip.Addr]bool{}, next: first}, nil
}

// Prefix is the range.
func (a *IPAllocator) Prefix() netip.Prefix { return a.prefix }

// first and last are the range's first and last allocatable addresses.
func (a *IPAllocator) first() netip.Addr { return a.prefix.Addr().Next().Next() }
func (a *IPAllocator) last() netip.Addr {
	b := a.prefix.Addr().As4()
	host := uint32(1)<<(32-a.prefix.Bits()) - 1
	v := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) | host
	v-- // not the broadcast address
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Allocate returns a free address, searching round from where the last
// search stopped (so that a freed address is not reused at once, as
// host-local does), or an error when the range is full.
func (a *IPAllocator) Allocate() (string, error) {
	first, last := a.first(), a.last()
	ip := a.next
	for range 1 << (32 - a.prefix.Bits()) {
		if ip.Compare(last) > 0 || ip.Compare(first) < 0 {
			ip = first
		}
		if !a.used[ip] {
			a.used[ip] = true
			a.next = ip.Next()
			return ip.String(), nil
		}
		ip = ip.Next()
	}
	return "", fmt.Errorf("no free IP left in the pod CIDR %s (%d sandboxes)", a.prefix, len(a.used))
}

// Reserve marks ip taken without handing it out: a sandbox that already
// runs there when the runtime switches to this range (a pod CIDR it had
// before). An address outside the range is ignored.
func (a *IPAllocator) Reserve(ip string) {
	if addr, err := netip.ParseAddr(ip); err == nil && a.prefix.Contains(addr) {
		a.used[addr] = true
	}
}

// Release frees ip; an address not taken is ignored.
func (a *IPAllocator) Release(ip string) {
	if addr, err := netip.ParseAddr(ip); err == nil {
		delete(a.used, addr)
	}
}
