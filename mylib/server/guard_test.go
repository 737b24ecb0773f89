package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// request sends one request to a debug server and to a LoopbackOnly
// handler, and returns both status codes and the debug server's body.
func guarded(t *testing.T, method, host string, header map[string]string) (debug, wrapped int, body string) {
	t.Helper()
	newReq := func() *http.Request {
		r := httptest.NewRequest(method, "/pods", strings.NewReader(""))
		r.Host = host
		for k, v := range header {
			r.Header.Set(k, v)
		}
		return r
	}
	w := httptest.NewRecorder()
	NewDebugServer(testManager()).ServeHTTP(w, newReq())
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	w2 := httptest.NewRecorder()
	LoopbackOnly(ok).ServeHTTP(w2, newReq())
	return w.Code, w2.Code, w.Body.String()
}

func TestLoopbackHostsWithAndWithoutPortAreServed(t *testing.T) {
	for _, host := range []string{"127.0.0.1:10255", "127.0.0.1", "localhost:10255", "LOCALHOST", "[::1]:10255", "[::1]", "127.1.2.3:80"} {
		debug, wrapped, body := guarded(t, http.MethodGet, host, nil)
		assert.Equal(t, http.StatusOK, debug, "%s: %s", host, body)
		assert.Equal(t, http.StatusOK, wrapped, host)
	}
	// The learner's own browser tab on the server, submitting to itself.
	debug, wrapped, _ := guarded(t, http.MethodGet, "127.0.0.1:10255", map[string]string{"Origin": "http://127.0.0.1:10255", "Sec-Fetch-Site": "same-origin"})
	assert.Equal(t, http.StatusOK, debug)
	assert.Equal(t, http.StatusOK, wrapped)
	// A URL typed into the address bar.
	debug, _, _ = guarded(t, http.MethodGet, "localhost:10255", map[string]string{"Sec-Fetch-Site": "none"})
	assert.Equal(t, http.StatusOK, debug)
}

// TestDNSRebindingHostIsForbidden: a page on evil.example whose name was
// made to resolve to 127.0.0.1 reaches the server with its own name.
func TestDNSRebindingHostIsForbidden(t *testing.T) {
	for _, host := range []string{"evil.example:10255", "evil.example", "127.0.0.1.evil.example:10255", "localhost.evil.example", "192.0.2.1:10255", ""} {
		debug, wrapped, body := guarded(t, http.MethodGet, host, nil)
		assert.Equal(t, http.StatusForbidden, debug, host)
		assert.Equal(t, http.StatusForbidden, wrapped, host)
		assert.Equal(t, "forbidden: the Host header \""+host+"\" is not a loopback address; this server has no authentication and answers only requests to localhost, 127.0.0.1 or [::1]\n", body)
	}
}

// TestCrossSitePostIsForbidden: a form on another site posting to the
// server (a "simple" request, sent without a preflight) carries the other
// site's Origin.
func TestCrossSitePostIsForbidden(t *testing.T) {
	for _, origin := range []string{"https://evil.example", "http://127.0.0.1:8080", "http://localhost:10255", "null", "file://"} {
		debug, wrapped, body := guarded(t, http.MethodPost, "127.0.0.1:10255", map[string]string{"Origin": origin, "Content-Type": "application/x-www-form-urlencoded"})
		assert.Equal(t, http.StatusForbidden, debug, origin)
		assert.Equal(t, http.StatusForbidden, wrapped, origin)
		assert.Contains(t, body, "forbidden: cross-site request from Origin \""+origin+"\"", origin)
	}
	// A cross-site request a browser sends without Origin (an image, say).
	debug, wrapped, body := guarded(t, http.MethodGet, "127.0.0.1:10255", map[string]string{"Sec-Fetch-Site": "cross-site"})
	assert.Equal(t, http.StatusForbidden, debug)
	assert.Equal(t, http.StatusForbidden, wrapped)
	require.Contains(t, body, "Sec-Fetch-Site: cross-site")
}
