package fakeruntime

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// FuzzControlAPI sends arbitrary requests to the control API: each is
// answered with a status a client can act on, never a panic or a 500.
func FuzzControlAPI(f *testing.F) {
	f.Add("GET", "/", "localhost", "")
	f.Add("POST", "/pods/default/nginx/containers/nginx/kill", "localhost", "http://localhost")
	f.Add("POST", "/pods/default/busybox/containers/busybox/exec?cmd=ls%20/&timeout=1", "localhost", "")
	f.Add("POST", "/pods/default/busybox/containers/busybox/stop?timeout=0", "[::1]:1", "http://127.0.0.1")
	f.Add("POST", "/sandboxes/0/remove", "evil.example", "")
	f.Add("POST", "/containers/%zz/kill", "127.0.0.1", "https://evil.example")
	f.Fuzz(func(t *testing.T, method, target, host, origin string) {
		r, _ := fixture(t)
		if err := r.Seed(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if !strings.HasPrefix(target, "/") {
			target = "/" + target
		}
		req, err := http.NewRequestWithContext(ctx, method, "http://127.0.0.1"+target, nil)
		if err != nil {
			return // not a request an HTTP server could receive
		}
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		rec := httptest.NewRecorder()
		NewControlHandler(r).ServeHTTP(rec, req)
		switch rec.Code {
		case 200, 400, 403, 404, 405, 409, 301, 307, 308: // ServeMux redirects unclean paths
		default:
			t.Fatalf("%s %s (Host %q, Origin %q): status %d: %s", method, target, host, origin, rec.Code, rec.Body)
		}
		if rec.Code == 200 && !isLoopbackHost(host) {
			t.Fatalf("Host %q got through", host)
		}
		if u, err := url.Parse(origin); rec.Code == 200 && origin != "" && (err != nil || !strings.EqualFold(u.Host, host)) {
			t.Fatalf("Origin %q got through to Host %q", origin, host)
		}
	})
}
