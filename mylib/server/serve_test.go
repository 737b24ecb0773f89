package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"mykubelet/mylib/bootstrap"
)

func TestDefaultLimitsAreUpstreams(t *testing.T) {
	srv := NewHTTPServer(http.NotFoundHandler(), DefaultLimits())
	assert.Equal(t, 4*time.Hour, srv.ReadTimeout, "upstream: 4 * 60 * time.Minute")
	assert.Equal(t, 4*time.Hour, srv.WriteTimeout, "upstream: 4 * 60 * time.Minute")
	assert.Equal(t, 90*time.Second, srv.IdleTimeout, "upstream: http.DefaultTransport's keep-alive")
	assert.Equal(t, 1<<20, srv.MaxHeaderBytes, "upstream: 1 << 20")
	assert.Equal(t, 10*time.Second, srv.ReadHeaderTimeout, "ours: upstream sets none")
}

// serveTLS serves an "ok" handler with limits l over TLS, as the kubelet
// server, until the test ends, and returns its address and a dialer.
func serveTLS(t *testing.T, l Limits) (string, func() *tls.Conn) {
	t.Helper()
	cert, _, err := bootstrap.SelfSignedServingCert(t.TempDir(), "n1", []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"n1"})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	serve(ctx, &wg, lis, NewHTTPServer(ok, l), TLSConfig(cert))
	addr := lis.Addr().String()
	return addr, func() *tls.Conn {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
}

// closedWithin reports whether the server closes c within d (a read
// returns EOF or a reset, rather than timing out).
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d)) // a tls.Conn always takes a deadline
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

func TestHeadersOver1MiBAre431(t *testing.T) {
	cert, _, err := bootstrap.SelfSignedServingCert(t.TempDir(), "n1", []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"n1"})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	ListenAndServeTLS(ctx, &wg, lis, ok, TLSConfig(cert)) // the kubelet server, its limits
	get := func(header int) int {
		c, err := tls.Dial("tcp", lis.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		require.NoError(t, err)
		defer c.Close()
		go func() { // the server may answer before it has read everything
			_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: n1\r\nX-Big: "+strings.Repeat("a", header)+"\r\n\r\n")
		}()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusOK, get(512<<10), "half a MiB of headers is fine")
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, get(1<<20+8<<10), "over 1 MiB (and net/http's 4 KiB of slack)")
}

func TestIdleKeepAliveConnectionIsClosedAfterIdleTimeout(t *testing.T) {
	l := DefaultLimits()
	l.IdleTimeout = 200 * time.Millisecond
	_, dial := serveTLS(t, l)
	c := dial()
	_, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: n1\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	assert.Equal(t, "ok", string(body))
	assert.False(t, resp.Close, "kept alive")
	start := time.Now()
	assert.True(t, closedWithin(c, 5*time.Second), "closed after the idle timeout; without it, ReadTimeout (4 h) would keep it")
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "not before")
}

func TestSlowHeadersAreCutOff(t *testing.T) {
	l := DefaultLimits()
	l.ReadHeaderTimeout = 300 * time.Millisecond
	_, dial := serveTLS(t, l)
	c := dial()
	_, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: n1\r\n")
	require.NoError(t, err)
	stop := make(chan struct{})
	defer close(stop)
	go func() { // a slowloris: one more header line every 50 ms, never the end
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := io.WriteString(c, "X-Slow: "+strings.Repeat("z", i%7)+"\r\n"); err != nil {
				return
			}
		}
	}()
	start := time.Now()
	assert.True(t, closedWithin(c, 5*time.Second), "cut off after ReadHeaderTimeout; without it, ReadTimeout (4 h) would keep it")
	assert.Less(t, time.Since(start), 3*time.Second)
}
