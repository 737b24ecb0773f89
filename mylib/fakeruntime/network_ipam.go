package fakeruntime

import (
	"fmt"
	"net/netip"
)

// ipAllocator hands out sandbox IPs from a range, as a CNI plugin's
// host-local IPAM does: the lowest free address, skipping the network
// address, the gateway (the first host address) and the broadcast address.
// An address is taken while its sandbox lives and free again once the
// sandbox is removed. Caller holds the runtime's lock.
type ipAllocator struct {
	prefix netip.Prefix
	used   map[netip.Addr]bool
	next   netip.Addr // where the search for a free address starts
}

func newIPAllocator(cidr string) (*ipAllocator, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, fmt.Errorf("pod CIDR %q: %w", cidr, err)
	}
	p = p.Masked()
	if !p.Addr().Is4() || p.Bits() > 30 {
		return nil, fmt.Errorf("pod CIDR %q: want an IPv4 range of at least 4 addresses, such as %s", cidr, DefaultPodCIDR)
	}
	if p.Addr().IsLoopback() || p.Addr().IsLinkLocalUnicast() {
		return nil, fmt.Errorf("pod CIDR %q: a loopback or link-local range would collide with the host's own addresses", cidr)
	}
	first := p.Addr().Next().Next() // skip the network address and the gateway
	return &ipAllocator{prefix: p, used: map[netip.Addr]bool{}, next: first}, nil
}

// first and last are the range's first and last allocatable addresses.
func (a *ipAllocator) first() netip.Addr { return a.prefix.Addr().Next().Next() }
func (a *ipAllocator) last() netip.Addr {
	b := a.prefix.Addr().As4()
	host := uint32(1)<<(32-a.prefix.Bits()) - 1
	v := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) | host
	v-- // not the broadcast address
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// allocate returns a free address, searching round from where the last
// search stopped (so that a freed address is not reused at once, as
// host-local does), or an error when the range is full.
func (a *ipAllocator) allocate() (string, error) {
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

// release frees ip; an address not taken is ignored.
func (a *ipAllocator) release(ip string) {
	if addr, err := netip.ParseAddr(ip); err == nil {
		delete(a.used, addr)
	}
}
