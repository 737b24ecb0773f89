package fakeruntime

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

	code, body := do(t, srv, "GET", "/")
	assert.Equal(t, 200, code)
	assert.Regexp(t, `default/nginx\s+[0-9a-f]{13}\s+READY\s+nginx\s+[0-9a-f]{13}\s+RUNNING`, body)
	assert.Contains(t, body, "POST /containers/{id}/{kill|start|remove|script}")

	code, body = do(t, srv, "POST", "/pods/default/nginx/containers/nginx/kill")
	assert.Equal(t, 200, code, body)
	assert.Equal(t, "killed container "+nginx[:13]+" (nginx, pod default/nginx)\n", body)
	st := containerStatus(t, r, nginx)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.State)
	assert.Equal(t, int32(137), st.ExitCode)

	code, body = do(t, srv, "POST", "/containers/"+nginx[:8]+"/start")
	assert.Equal(t, 200, code, body)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, nginx).State)

	code, body = do(t, srv, "POST", "/containers/"+nginx+"/script?exit-after=3s&exit-code=2")
	assert.Equal(t, 200, code, body)
	assert.Equal(t, "scripted container "+nginx[:13]+" (nginx, pod default/nginx): exit-after=3s exit-code=2\n", body)
	clk.Step(3 * time.Second)
	st = containerStatus(t, r, nginx)
	assert.Equal(t, int32(2), st.ExitCode)

	code, body = do(t, srv, "POST", "/pods/default/busybox/kill")
	assert.Equal(t, 200, code, body)
	assert.Regexp(t, `^killed sandbox [0-9a-f]{13} \(pod default/busybox\)\n$`, body)
	snap := r.Snapshot()
	assert.Equal(t, "NOTREADY", snap.Sandboxes[0].State)
	assert.Equal(t, "EXITED", snap.Sandboxes[0].Containers[0].State)

	code, body = do(t, srv, "POST", "/pods/default/busybox/start")
	assert.Equal(t, 200, code, body)
	snap = r.Snapshot()
	assert.Equal(t, "READY", snap.Sandboxes[0].State)
	assert.Equal(t, "RUNNING", snap.Sandboxes[0].Containers[0].State)

	code, body = do(t, srv, "POST", "/sandboxes/"+snap.Sandboxes[0].ID+"/remove")
	assert.Equal(t, 200, code, body)
	code, body = do(t, srv, "POST", "/containers/"+nginx+"/remove")
	assert.Equal(t, 200, code, body)
	snap = r.Snapshot()
	require.Len(t, snap.Sandboxes, 1)
	assert.Equal(t, "default/nginx", snap.Sandboxes[0].Pod)
	assert.Empty(t, snap.Sandboxes[0].Containers)
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
		{"POST", "/containers/abc1/explode", 400, `bad request: unknown action "explode": want kill, start or remove`},
		{"POST", "/containers/abc1/kill?now=1", 400, "bad request: kill takes no query parameters"},
		{"POST", "/containers/abc1/script?exit-after=soon", 400, `bad request: exit-after "soon": want a positive duration such as 5s`},
		{"POST", "/containers/abc1/script?colour=red", 400, `bad request: unknown parameter "colour"`},
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
