package fleet

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// connServer is a TLS test server that requires a client certificate and
// counts the connections it accepted.
type connServer struct {
	*httptest.Server
	mu    sync.Mutex
	conns int
}

func newConnServer(t *testing.T, h http.HandlerFunc) *connServer {
	s := &connServer{Server: httptest.NewUnstartedServer(h)}
	s.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
		}
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *connServer) accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// restConfig is an agent's client configuration for s, as system:node:name.
func (s *connServer) restConfig(t *testing.T, name string) *rest.Config {
	cert, key := clientCert(t, "system:node:"+name)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	// A user agent, as the fleet sets: client-go then wraps the transport.
	return &rest.Config{Host: s.URL, UserAgent: "fleet-test", TLSClientConfig: rest.TLSClientConfig{CertData: cert, KeyData: key, CAData: ca}}
}

// ownTransport builds the agent's own transport for s, as the fleet does,
// with requests timed out after 10 s.
func ownTransport(t *testing.T, s *connServer) *oneConn {
	return ownTransportTimeout(t, s, 10*time.Second)
}

func ownTransportTimeout(t *testing.T, s *connServer, timeout time.Duration) *oneConn {
	t.Helper()
	_, cs, err := newNodeClient(s.restConfig(t, "a"), TransportOwn, timeout)
	require.NoError(t, err)
	t.Cleanup(cs.CloseAll)
	return cs.(*oneConn)
}

func get(t *testing.T, rt http.RoundTripper, u string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
	require.NoError(t, err)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), nil
}

// TestOwnTransportKeepsOneConnection: requests one after another, of every
// kind an agent sends, with and without a Content-Length in the answer, go
// over one connection, with the agent's certificate, in HTTP/1.1.
func TestOwnTransportKeepsOneConnection(t *testing.T) {
	s := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Query().Get("chunked") != "" {
			w.(http.Flusher).Flush() // no Content-Length: chunked
		}
		fmt.Fprintf(w, "%s %s HTTP/%d by %s: %s", r.Method, r.URL.Path, r.ProtoMajor, r.TLS.PeerCertificates[0].Subject.CommonName, body)
	})
	rt := ownTransport(t, s)
	for i, method := range []string{"GET", "PUT", "PATCH", "GET"} {
		u := s.URL + "/x"
		if i%2 == 1 {
			u += "?chunked=1"
		}
		req, err := http.NewRequestWithContext(context.Background(), method, u, strings.NewReader("body"))
		require.NoError(t, err)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		assert.Equal(t, method+" /x HTTP/1 by system:node:a: body", string(b))
	}
	assert.Equal(t, 1, s.accepted(), "one connection for four requests")
}

// TestOwnTransportHoldsNoGoroutine: once its requests are answered, an
// agent's transport has no goroutine of its own (net/http's would keep its
// read and write loops for as long as the connection lives).
func TestOwnTransportHoldsNoGoroutine(t *testing.T) {
	s := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"a"}}`)
	})
	for _, tc := range []struct {
		tr   Transport
		want bool
	}{{TransportOwn, false}, {TransportHTTP1, true}} {
		client, cs, err := newNodeClient(s.restConfig(t, "a"), tc.tr, 10*time.Second)
		require.NoError(t, err)
		n, err := client.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "a", n.Name)
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		assert.Equal(t, tc.want, strings.Contains(stacks, "net/http.(*persistConn)"), "transport %d: a goroutine of net/http's client", tc.tr)
		assert.NotContains(t, stacks, "fleet.(*oneConn)", "transport %d", tc.tr)
		cs.CloseAll()
	}
}

// TestOwnTransportConflict: a 409 Conflict reaches client-go as the
// API server's Status (the lease controller reads the Lease again on it),
// and the connection stays in use.
func TestOwnTransportConflict(t *testing.T) {
	s := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPut {
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict","code":409,"message":"the object has been modified"}`)
			return
		}
		fmt.Fprint(w, `{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"a","namespace":"kube-node-lease","resourceVersion":"7"}}`)
	})
	client, cs, err := newNodeClient(s.restConfig(t, "a"), TransportOwn, 10*time.Second)
	require.NoError(t, err)
	defer cs.CloseAll()
	leases := client.CoordinationV1().Leases("kube-node-lease")
	ctx := context.Background()
	l, err := leases.Get(ctx, "a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "7", l.ResourceVersion)
	_, err = leases.Update(ctx, &coordinationv1.Lease{ObjectMeta: l.ObjectMeta}, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsConflict(err), "want a Conflict, got %v", err)
	_, err = leases.Get(ctx, "a", metav1.GetOptions{})
	assert.NoError(t, err)
	assert.Equal(t, 1, s.accepted())
}

// TestOwnTransportReconnects: when the server closes the kept connection
// (Connection: close, or dropping it between two requests, or a restart),
// the next request goes over a new one; when it drops a request itself,
// the request fails once and the next one reconnects.
func TestOwnTransportReconnects(t *testing.T) {
	var mu sync.Mutex
	var dropNext bool
	s := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		drop := dropNext
		dropNext = false
		mu.Unlock()
		if drop {
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = c.Close()
			}
			return
		}
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		fmt.Fprint(w, "ok")
	})
	rt := ownTransport(t, s)
	expect := func(path string, conns int) {
		t.Helper()
		code, body, err := get(t, rt, s.URL+path)
		require.NoError(t, err)
		assert.Equal(t, "200 ok", fmt.Sprint(code, " ", body))
		assert.Equal(t, conns, s.accepted())
	}
	expect("/", 1)
	expect("/close", 1) // answered, then closed by the server
	expect("/", 2)

	// The server closes the idle connection: the request finds it closed
	// and is sent again over a new one, once.
	s.CloseClientConnections()
	expect("/", 3)

	// The server drops the request on a new connection without answering:
	// that fails (not sent again: the server may have acted on it), and
	// the next request reconnects.
	rt.CloseAll()
	mu.Lock()
	dropNext = true
	mu.Unlock()
	_, _, err := get(t, rt, s.URL+"/")
	assert.Error(t, err)
	expect("/", 5)

	// CloseAll, as after repeated heartbeat failures: a new connection.
	rt.CloseAll()
	expect("/", 6)
}

// TestOwnTransportServerRestart: the API server goes away and comes back on
// the same address; requests fail while it is away and work again after.
func TestOwnTransportServerRestart(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	s := newConnServer(t, h)
	rt := ownTransport(t, s)
	code, _, err := get(t, rt, s.URL+"/")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)

	addr := s.Listener.Addr().String()
	cert := s.TLS.Certificates
	s.Close()
	_, _, err = get(t, rt, s.URL+"/")
	require.Error(t, err, "the server is down")

	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	again := httptest.NewUnstartedServer(h)
	again.Listener.Close()
	again.Listener = l
	again.TLS = &tls.Config{Certificates: cert, ClientAuth: tls.RequireAnyClientCert}
	again.StartTLS()
	defer again.Close()
	code, body, err := get(t, rt, s.URL+"/")
	require.NoError(t, err)
	assert.Equal(t, "200 ok", fmt.Sprint(code, " ", body))
}

// TestOwnTransportCancel: a request whose context ends while it waits for
// the answer returns the context's error and leaves the connection; so
// does one waiting for its turn behind it.
func TestOwnTransportCancel(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	s := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			entered <- struct{}{}
			<-release
		}
		fmt.Fprint(w, "ok")
	})
	defer close(release)
	rt := ownTransportTimeout(t, s, 0) // no timeout: only the cancel ends it
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/hang", nil)
	require.NoError(t, err)
	errs := make(chan error, 2)
	go func() {
		_, err := rt.RoundTrip(req)
		errs <- err
	}()
	<-entered
	// A second request waits for its turn; its context ends too.
	ctx2, cancel2 := context.WithCancel(context.Background())
	req2, err := http.NewRequestWithContext(ctx2, http.MethodGet, s.URL+"/", nil)
	require.NoError(t, err)
	go func() {
		_, err := rt.RoundTrip(req2)
		errs <- err
	}()
	cancel2()
	cancel()
	for range 2 {
		assert.ErrorIs(t, <-errs, context.Canceled)
	}
	code, _, err := get(t, rt, s.URL+"/")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, 2, s.accepted(), "the cancelled request's connection was not used again")
}

// TestOwnTransportRefusesOtherHosts: the transport serves its API server
// only.
func TestOwnTransportRefusesOtherHosts(t *testing.T) {
	s := newConnServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	rt := ownTransport(t, s)
	u, err := url.Parse(s.URL)
	require.NoError(t, err)
	u.Scheme = "http"
	_, _, err = get(t, rt, u.String()+"/")
	assert.ErrorContains(t, err, "only https://")
	cfg := s.restConfig(t, "a")
	cfg.Host = "http://" + u.Host
	_, _, err = newNodeClient(cfg, TransportOwn, time.Second)
	assert.ErrorContains(t, err, "want https://<host>:<port>")
}

// TestOwnTransportBodyNotReplayedWithoutGetBody: a request whose body cannot
// be read again is not sent a second time.
func TestOwnTransportBodyNotReplayedWithoutGetBody(t *testing.T) {
	s := newConnServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	rt := ownTransport(t, s)
	code, _, err := get(t, rt, s.URL+"/")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	s.CloseClientConnections()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPut, s.URL+"/", io.NopCloser(bytes.NewReader([]byte("x"))))
	require.NoError(t, err)
	req.ContentLength = 1
	_, err = rt.RoundTrip(req)
	assert.Error(t, err)
	assert.False(t, errors.Is(err, context.Canceled))
	assert.Equal(t, 1, s.accepted())
}

// TestOwnTransportTimesRequests: the agent's client times its requests out
// in the transport, without the goroutine per request that
// http.Client.Timeout starts (net/http's own transport, given the timeout
// in the client, has it).
func TestOwnTransportTimesRequests(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	s := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	})
	defer close(release)
	for _, tc := range []struct {
		tr   Transport
		want bool
	}{{TransportOwn, false}, {TransportHTTP1, true}} {
		client, cs, err := newNodeClient(s.restConfig(t, "a"), tc.tr, 500*time.Millisecond)
		require.NoError(t, err)
		// Such goroutines of earlier tests' requests end on their own.
		for deadline := time.Now().Add(10 * time.Second); goroutinesIn("net/http.setRequestCancel") > 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		require.Zero(t, goroutinesIn("net/http.setRequestCancel"), "goroutines left by earlier tests")
		errs := make(chan error, 1)
		go func() {
			_, err := client.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
			errs <- err
		}()
		<-entered
		assert.Equal(t, tc.want, goroutinesIn("net/http.setRequestCancel") > 0, "transport %d: a goroutine watching the request's time", tc.tr)
		err = <-errs
		assert.ErrorIs(t, err, context.DeadlineExceeded, "transport %d", tc.tr)
		cs.CloseAll()
	}
}

// goroutinesIn counts the goroutines whose stack holds fn.
func goroutinesIn(fn string) int {
	buf := make([]byte, 4<<20)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}
