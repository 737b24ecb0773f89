package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// ServeHTTP serves h on lis in a goroutine that wg waits for, until ctx
// ends; then it shuts the server down, letting requests in flight finish
// for up to 5 s. An error while serving is logged, not lost.
func ServeHTTP(ctx context.Context, wg *sync.WaitGroup, lis net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	wg.Go(func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "HTTP server stopped", "address", lis.Addr())
		}
	})
	wg.Go(func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx) // best effort: the program is on its way out
	})
}
