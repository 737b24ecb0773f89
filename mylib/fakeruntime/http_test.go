package fakeruntime

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func do(t *testing.T, srv *httptest.Server, method, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	require.NoError(t, err)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestControlAPI(t *testing.T) {
	r, clk := fixture(t)
	require.NoError(t, r.Seed(context.Background()))
	srv := httptest.NewServer(NewControlHandler(r))
	defer srv.Close()
	nginx, err := r.FindContainer("default", "nginx", "nginx")
	require.NoError(t, err)
	busybox, err := r.FindContainer("default", "busybox", "busybox")
	require.NoError(t, err)

	code, body := do(t, srv, "GET", "/")
	assert.Equal(t, 200, code)
	assert.Regexp(t, `default/nginx\s+[0-9a-f]{13}\s+READY\s+nginx\s+0\s+[0-9a-f]{13}\s+RUNNING`, body)
	assert.Contains(t, body, "POST /containers/{id}/{kill|stop|remove|exec|fail|recover}")

	// exec runs in the container's root: a file made there is seen there.
	code, body = do(t, srv, "POST", "/containers/"+busybox[:8]+"/exec?cmd=touch%20/tmp/healthy%3B%20ls%20/tmp")
	assert.Equal(t, 200, code, body)
	assert.Equal(t, "healthy\nexec in container "+busybox[:13]+" (busybox, pod default/busybox): exit code 0\n", body)
	code, body = do(t, srv, "POST", "/containers/"+busybox[:8]+"/exec?cmd=cat%20/tmp/nope")
	assert.Equal(t, 200, code, body)
	assert.Contains(t, body, "cat: /tmp/nope: no such file or directory\nexec in container "+busybox[:13]+" (busybox, pod default/busybox): exit code 1\n")

	code, body = do(t, srv, "POST", "/pods/default/nginx/containers/nginx/kill")
	assert.Equal(t, 200, code, body)
	assert.Equal(t, "killed container "+nginx[:13]+" (nginx, pod default/nginx)\n", body)
	st := containerStatus(t, r, nginx)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.State)
	assert.Equal(t, int32(137), st.ExitCode)

	code, body = do(t, srv, "POST", "/containers/"+nginx[:8]+"/exec?cmd=true")
	assert.Equal(t, 409, code, body)
	assert.Contains(t, body, "not running")

	// stop: busybox traps SIGTERM and exits 1 (its script says so).
	code, body = do(t, srv, "POST", "/pods/default/busybox/containers/busybox/stop?timeout=30")
	assert.Equal(t, 200, code, body)
	assert.Equal(t, "stopped container "+busybox[:13]+" (busybox, pod default/busybox)\n", body)
	st = containerStatus(t, r, busybox)
	assert.Equal(t, int32(1), st.ExitCode)
	assert.Equal(t, clk.Now().UnixNano(), st.FinishedAt, "it exited at once, no timeout waited")

	code, body = do(t, srv, "POST", "/pods/default/busybox/kill")
	assert.Equal(t, 200, code, body)
	assert.Regexp(t, `^killed sandbox [0-9a-f]{13} \(pod default/busybox\)\n$`, body)
	snap := r.Snapshot()
	assert.Equal(t, "NOTREADY", snap.Sandboxes[0].State)

	code, body = do(t, srv, "POST", "/sandboxes/"+snap.Sandboxes[0].ID+"/remove")
	assert.Equal(t, 200, code, body)
	code, body = do(t, srv, "POST", "/containers/"+nginx+"/remove")
	assert.Equal(t, 200, code, body)
	snap = r.Snapshot()
	require.Len(t, snap.Sandboxes, 1)
	assert.Equal(t, "default/nginx", snap.Sandboxes[0].Pod)
	assert.Empty(t, snap.Sandboxes[0].Containers)
}

// TestControlAPIRefusesOtherSites: a web page can make the browser send a
// POST to 127.0.0.1 (cross-site form) or to a name it rebinds to
// 127.0.0.1; neither gets through.
func TestControlAPIRefusesOtherSites(t *testing.T) {
	r, _ := fixture(t)
	require.NoError(t, r.Seed(context.Background()))
	h := NewControlHandler(r)
	for _, tc := range []struct {
		host, origin, site string
		code               int
	}{
		{host: "127.0.0.1:10355", code: 200},
		{host: "localhost:10355", code: 200},
		{host: "[::1]:10355", code: 200},
		{host: "127.0.0.1:10355", origin: "http://localhost:8080", code: 200},
		{host: "evil.example:10355", code: 403},
		{host: "10.0.0.5:10355", code: 403},
		{host: "127.0.0.1:10355", origin: "https://evil.example", code: 403},
		{host: "127.0.0.1:10355", origin: "null", code: 403},
		{host: "127.0.0.1:10355", site: "cross-site", code: 403},
	} {
		req := httptest.NewRequest("POST", "/pods/default/nginx/containers/nginx/exec?cmd=true", nil)
		req.Host = tc.host
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		if tc.site != "" {
			req.Header.Set("Sec-Fetch-Site", tc.site)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, tc.code, rec.Code, "Host %s Origin %q: %s", tc.host, tc.origin, rec.Body)
	}
	assert.Equal(t, "RUNNING", r.Snapshot().Sandboxes[1].Containers[0].State)
}

func TestListenControlOnlyOnLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0", "example.com:0"} {
		_, err := ListenControl(addr)
		require.Error(t, err, addr)
		assert.Contains(t, err.Error(), "is not on loopback: the control API has no authentication", addr)
	}
	_, err := ListenControl("127.0.0.1")
	assert.EqualError(t, err, `address "127.0.0.1": want host:port, such as 127.0.0.1:10355`)
	l, err := ListenControl("127.0.0.1:0")
	require.NoError(t, err)
	l.Close()
}

func TestControlAPIBadRequests(t *testing.T) {
	r, _ := fixture(t)
	require.NoError(t, r.Seed(context.Background()))
	// Two containers whose IDs share a prefix, to check ambiguity.
	r.mu.Lock()
	var sbID string
	for id := range r.sandboxes {
		sbID = id
	}
	r.addContainer(r.sandboxes[sbID], &container{id: "abc1", sandboxID: sbID, meta: &runtimeapi.ContainerMetadata{Name: "x"}})
	r.addContainer(r.sandboxes[sbID], &container{id: "abc2", sandboxID: sbID, meta: &runtimeapi.ContainerMetadata{Name: "y"}})
	r.mu.Unlock()
	srv := httptest.NewServer(NewControlHandler(r))
	defer srv.Close()

	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"POST", "/containers/nope/kill", 404, `not found: container "nope" not found`},
		{"POST", "/containers/abc/kill", 409, `ambiguous: container ID prefix "abc" is ambiguous`},
		{"POST", "/containers/abc1/explode", 400, `bad request: unknown action "explode": want kill, stop, remove, exec, fail or recover`},
		{"POST", "/containers/abc1/kill?now=1", 400, "bad request: kill takes no query parameters"},
		{"POST", "/containers/abc1/stop?timeout=soon", 400, `bad request: timeout "soon": want whole seconds from 0 to 60`},
		{"POST", "/containers/abc1/stop?timeout=3600", 400, `bad request: timeout "3600": want whole seconds from 0 to 60`},
		{"POST", "/containers/abc1/stop?colour=red", 400, `bad request: unknown parameter "colour" for stop: want timeout`},
		{"POST", "/containers/abc1/exec", 400, `bad request: exec needs cmd=SCRIPT`},
		{"POST", "/pods/default/nginx/start", 400, `bad request: unknown action "start" for a sandbox or pod: want kill or remove`},
		{"POST", "/pods/default/nginx/kill?x=1", 400, `bad request: kill takes no query parameters`},
		{"POST", "/pods/default/ghost/kill", 404, "not found: no pod default/ghost"},
		{"POST", "/pods/default/nginx/containers/ghost/kill", 404, `not found: pod default/nginx has no container "ghost"`},
		{"POST", "/sandboxes/nope/remove", 404, `not found: pod sandbox "nope" not found`},
		{"GET", "/containers/abc1/kill", 405, "GET /containers/abc1/kill: use POST"},
		{"POST", "/nowhere", 404, "POST /nowhere: no such request"},
	} {
		code, body := do(t, srv, tc.method, tc.path)
		assert.Equal(t, tc.code, code, "%s %s: %s", tc.method, tc.path, body)
		assert.True(t, strings.HasPrefix(body, tc.body), "%s %s: body %q should start with %q", tc.method, tc.path, body, tc.body)
	}
}
