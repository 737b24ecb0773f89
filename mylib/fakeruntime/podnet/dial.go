package podnet

import (
	"context"
	"errors"
	"net"
	"runtime"
)

// Dial connects to TCP addr from inside the namespace, as port-forward
// does: a goroutine locked to an OS thread joins the namespace with setns,
// connects, and ends without unlocking, so its thread ends with it and no
// other goroutine ever runs in the namespace. The connected socket stays
// in the namespace (a socket keeps the namespace it was made in), so the
// caller reads and writes it from any thread. IPv4 and IPv6 are tried one
// after the other (no parallel "happy eyeballs" race: its second goroutine
// would dial from the host's namespace).
func (n *Network) Dial(ctx context.Context, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
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
		d := net.Dialer{FallbackDelay: -1}
		c, err := d.DialContext(ctx, "tcp", addr)
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}
