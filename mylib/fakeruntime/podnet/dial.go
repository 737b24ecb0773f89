package podnet

import (
	"context"
	"net"
)

// Dial connects to TCP addr from inside the namespace (inNamespace), as
// port-forward does; the connection is used from any thread. IPv4 and
// IPv6 are tried one after the other (no parallel "happy eyeballs" race:
// its second goroutine would dial from the host's namespace).
func (n *Network) Dial(ctx context.Context, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.inNamespace(func() (err error) {
		d := net.Dialer{FallbackDelay: -1}
		c, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	return c, err
}
