package podnet

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newTestNetwork makes a pod network on a /24 of its own (tests run side
// by side), or skips without root.
func newTestNetwork(t *testing.T) *Network {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the pod network needs root (a network namespace and a veth pair)")
	}
	var last error
	for i := range 64 {
		n, err := New(netip.MustParsePrefix(fmt.Sprintf("10.236.%d.0/24", (os.Getpid()+i)%256)))
		if last = err; err == nil {
			t.Cleanup(n.Close)
			return n
		}
	}
	t.Fatalf("no free range for a pod network: %v", last)
	return nil
}

// TestDialConnectsInsideTheNamespace: Dial reaches a server listening on
// the namespace's own loopback, which the host's 127.0.0.1 is not.
func TestDialConnectsInsideTheNamespace(t *testing.T) {
	n := newTestNetwork(t)
	l, err := n.Listen("127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	accepted := make(chan string, 2)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c.RemoteAddr().String()
			_, _ = io.Copy(c, c) // echo
			c.Close()
		}
	}()

	c, err := n.Dial(context.Background(), l.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "hello\n")
	require.NoError(t, err)
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "hello\n", line, "echoed by the server in the namespace")
	<-accepted

	// From the host, the same address is the host's loopback: not that server.
	if hc, err := net.Dial("tcp", l.Addr().String()); err == nil {
		hc.Close()
	}
	select {
	case from := <-accepted:
		t.Fatalf("the namespace's server accepted a connection from the host's namespace (%s)", from)
	default:
	}
}

// TestDialRefused: nothing listening is the kernel's refusal, and a closed
// network refuses to dial at all.
func TestDialRefused(t *testing.T) {
	n := newTestNetwork(t)
	l, err := n.Listen("127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	_, err = n.Dial(context.Background(), addr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "connection refused")

	n.Close()
	_, err = n.Dial(context.Background(), addr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the pod network is gone")
}
