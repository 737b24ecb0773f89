package nodelease

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"mykubelet/scripts/testkit/silent"
)

// heldLease is a lease the controller already has (with its owner
// reference, so renewing it needs no other request).
func heldLease() *coordinationv1.Lease {
	holder := "n1"
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: corev1.NamespaceNodeLease, ResourceVersion: "1",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "uid-n1"}}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}
}

func heartbeatController(t *testing.T, cfg *rest.Config, timeout time.Duration) *Controller {
	t.Helper()
	hb, err := NewHeartbeatClient(cfg, timeout, 40*time.Second)
	require.NoError(t, err)
	c, err := NewController(Config{Client: hb, NodeName: "n1", Clock: clock.RealClock{}, OnRepeatedHeartbeatFailure: hb.CloseAllConns})
	require.NoError(t, err)
	return c
}

// TestRenewAgainstASilentServerEndsAtTheTimeout: a server on 127.0.0.1
// accepts connections and never answers. Each renewal attempt ends at the
// heartbeat client's timeout (not the caller's context), and the next
// attempt comes on a new connection.
func TestRenewAgainstASilentServerEndsAtTheTimeout(t *testing.T) {
	srv := silent.Start(t)

	c := heartbeatController(t, &rest.Config{Host: "http://" + srv.Addr}, 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := c.retryUpdateLease(ctx, heldLease())
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the attempts timed out")
	assert.NoError(t, ctx.Err(), "the heartbeat's own timeout ended each attempt, not the caller's context")
	assert.Equal(t, MaxUpdateRetries, srv.Accepted(), "each attempt on a new connection")
}

// TestRepeatedHeartbeatFailureClosesTheConnection: over HTTP/2 (as to a
// real API server) every request shares one connection; the server accepts
// the requests and never answers, as a half-open connection behaves. After
// the second failed attempt the controller closes the heartbeat client's
// connections, so every later attempt dials a new one, as upstream does.
func TestRepeatedHeartbeatFailureClosesTheConnection(t *testing.T) {
	var mu sync.Mutex
	var remotes []string // the client address of each lease update
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		remotes = append(remotes, r.RemoteAddr)
		mu.Unlock()
		<-r.Context().Done() // never answer
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	// 1 s leaves a new TLS connection time to carry its request, even
	// under the race detector on a busy machine.
	c := heartbeatController(t, &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}}, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.Error(t, c.retryUpdateLease(ctx, heldLease()))
	require.NoError(t, ctx.Err())

	mu.Lock()
	defer mu.Unlock()
	// An attempt that starts while the closed connection is being torn
	// down fails at once ("use of closed network connection") without
	// reaching the server, so fewer than MaxUpdateRetries may arrive.
	require.GreaterOrEqual(t, len(remotes), 3)
	assert.Equal(t, remotes[0], remotes[1], "HTTP/2: the second attempt reuses the first one's connection")
	for i := 2; i < len(remotes); i++ {
		assert.NotContains(t, remotes[:i], remotes[i], "request %d, after a repeated failure, comes on a new connection", i+1)
	}
}

func TestNewHeartbeatClientChecksItsInput(t *testing.T) {
	_, err := NewHeartbeatClient(&rest.Config{Host: "https://127.0.0.1:6443", Dial: (&net.Dialer{}).DialContext}, time.Second, time.Second)
	assert.EqualError(t, err, "heartbeat client: the rest.Config already has a dialer or transport")
	_, err = NewHeartbeatClient(&rest.Config{Host: "https://127.0.0.1:6443"}, 0, 40*time.Second)
	assert.EqualError(t, err, "heartbeat client: the timeout must be positive (node status update frequency 0s, lease duration 40s)")
	_, err = NewHeartbeatClient(nil, time.Second, time.Second)
	assert.Error(t, err)
}
