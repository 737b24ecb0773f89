package server

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Upstream's limits on the kubelet's HTTP servers (ListenAndServeKubeletServer
// and ListenAndServeKubeletReadOnlyServer in pkg/kubelet/server/server.go set
// the same four on both), and one of ours.
const (
	// DefaultReadTimeout and DefaultWriteTimeout bound a whole request and its
	// response: 4 hours, so `kubectl logs -f` (a streamed response) and exec
	// or attach (a hijacked connection, which keeps the deadlines) end after
	// 4 hours at the latest, as upstream's do.
	DefaultReadTimeout  = 4 * 60 * time.Minute
	DefaultWriteTimeout = 4 * 60 * time.Minute
	// DefaultIdleTimeout closes a keep-alive connection that has waited 90 s
	// for its next request (http.DefaultTransport's IdleConnTimeout).
	DefaultIdleTimeout = 90 * time.Second
	// DefaultMaxHeaderBytes: a request line and headers over 1 MiB are
	// answered 431 Request Header Fields Too Large.
	DefaultMaxHeaderBytes = 1 << 20
	// DefaultReadHeaderTimeout is not upstream's (it has none, so a client
	// may send its headers a byte at a time for ReadTimeout, 4 h: a
	// slowloris holds a connection before authentication). The API server
	// sends its headers at once; after them, ReadTimeout applies.
	DefaultReadHeaderTimeout = 10 * time.Second
)

// Limits are an HTTP server's timeouts and header limit.
type Limits struct {
	ReadTimeout, WriteTimeout, IdleTimeout, ReadHeaderTimeout time.Duration
	MaxHeaderBytes                                            int
}

// DefaultLimits are the kubelet server's: upstream's, and a ReadHeaderTimeout.
func DefaultLimits() Limits {
	return Limits{ReadTimeout: DefaultReadTimeout, WriteTimeout: DefaultWriteTimeout, IdleTimeout: DefaultIdleTimeout,
		ReadHeaderTimeout: DefaultReadHeaderTimeout, MaxHeaderBytes: DefaultMaxHeaderBytes}
}

// NewHTTPServer is an http.Server of h with limits l.
func NewHTTPServer(h http.Handler, l Limits) *http.Server {
	return &http.Server{Handler: h, ReadTimeout: l.ReadTimeout, WriteTimeout: l.WriteTimeout, IdleTimeout: l.IdleTimeout,
		ReadHeaderTimeout: l.ReadHeaderTimeout, MaxHeaderBytes: l.MaxHeaderBytes}
}

// ServeHTTP serves h on lis with DefaultLimits (upstream's read-only
// server has the kubelet server's) in goroutines wg waits for, until ctx
// ends; then it shuts the server down, letting requests in flight finish
// for up to 5 s. An error while serving is logged, not lost.
func ServeHTTP(ctx context.Context, wg *sync.WaitGroup, lis net.Listener, h http.Handler) {
	serve(ctx, wg, lis, NewHTTPServer(h, DefaultLimits()), nil)
}

// serve serves srv on lis (with TLS when tlsConfig is set) until ctx ends;
// then it shuts srv down, and cuts the streams (exec, logs -f) still open
// after 5 s.
func serve(ctx context.Context, wg *sync.WaitGroup, lis net.Listener, srv *http.Server, tlsConfig *tls.Config) {
	if tlsConfig != nil {
		srv.TLSConfig = tlsConfig
		lis = tls.NewListener(lis, tlsConfig)
	}
	wg.Go(func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "HTTP server stopped", "address", lis.Addr())
		}
	})
	wg.Go(func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			srv.Close() // streams still open: cut them
		}
	})
}
