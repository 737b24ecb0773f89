package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// ServeProfiles serves Go's runtime profiles (net/http/pprof: heap,
// goroutine, profile for CPU, …) on addr, a loopback host:port (port 0
// picks a free one), until ctx ends. It returns the address it listens on:
// read it with `go tool pprof http://<addr>/debug/pprof/heap`.
func ServeProfiles(ctx context.Context, addr string) (string, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("profile address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return "", fmt.Errorf("profile address %q: want a loopback address such as 127.0.0.1:6060", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("profile address: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		// Serve ends with ErrServerClosed when ctx ends; nothing to report.
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = l.Close()
		}
	}()
	return l.Addr().String(), nil
}
