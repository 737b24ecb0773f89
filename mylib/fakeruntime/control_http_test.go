package fakeruntime

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/statedir"
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
// POST to localhost (a cross-site form, or a page of another port of
// localhost: same-site, not same-origin) or to a name it rebinds to
// 127.0.0.1; none gets through. Only an Origin equal to the Host passes.
func TestControlAPIRefusesOtherSites(t *testing.T) {
	r, _ := fixture(t)
	require.NoError(t, r.Seed(context.Background()))
	h := NewControlHandler(r)
	for _, tc := range []struct {
		host, origin, site string
		code               int
	}{
		{host: "localhost", code: 200}, // curl --unix-socket … http://localhost/
		{host: "127.0.0.1:10355", code: 200},
		{host: "[::1]:10355", code: 200},
		{host: "localhost", origin: "http://localhost", site: "same-origin", code: 200},
		{host: "localhost", origin: "http://localhost:8080", site: "same-site", code: 403},
		{host: "127.0.0.1:10355", origin: "http://127.0.0.1:8080", code: 403},
		{host: "127.0.0.1:10355", origin: "http://localhost:10355", code: 403},
		{host: "localhost", site: "same-site", code: 403},
		{host: "evil.example:10355", code: 403},
		{host: "10.0.0.5:10355", code: 403},
		{host: "localhost", origin: "https://evil.example", code: 403},
		{host: "localhost", origin: "null", code: 403},
		{host: "localhost", origin: "file://localhost", code: 403},
		{host: "localhost", site: "cross-site", code: 403},
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
		assert.Equal(t, tc.code, rec.Code, "Host %s Origin %q Sec-Fetch-Site %q: %s", tc.host, tc.origin, tc.site, rec.Body)
		if tc.code == 403 {
			assert.True(t, strings.HasPrefix(rec.Body.String(), "forbidden: "), rec.Body.String())
		}
	}
	assert.Equal(t, "RUNNING", r.Snapshot().Sandboxes[1].Containers[0].State)
}

// serveControl serves r's control API on ListenControl's socket in a new
// state directory, and returns the socket's path and a client that dials
// it, as curl --unix-socket does.
func serveControl(t *testing.T, r *Runtime) (string, *http.Client) {
	t.Helper()
	dir, err := os.MkdirTemp("", "ctl") // short: sun_path holds 107 bytes
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "state", statedir.RuntimeControlSocket)
	l, err := ListenControl(path)
	require.NoError(t, err)
	srv := &http.Server{Handler: NewControlHandler(r)}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close(); <-done })
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	t.Cleanup(client.CloseIdleConnections)
	return path, client
}

// TestControlAPIOverItsSocket: the control API answers on its unix socket
// as curl --unix-socket SOCKET http://localhost/ asks it, and the guard
// holds there too.
func TestControlAPIOverItsSocket(t *testing.T) {
	r, _ := fixture(t)
	require.NoError(t, r.Seed(context.Background()))
	_, client := serveControl(t, r)

	resp, err := client.Get("http://localhost/")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Contains(t, string(b), "default/nginx")
	assert.Contains(t, string(b), "curl -s --unix-socket SOCKET http://localhost/")

	req, err := http.NewRequest("POST", "http://localhost/pods/default/nginx/containers/nginx/kill", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", "http://localhost:8080")
	resp, err = client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 403, resp.StatusCode, "a page on another port of localhost")

	resp, err = client.Post("http://localhost/pods/default/nginx/containers/nginx/kill", "", nil)
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode, string(b))
	assert.Contains(t, string(b), "killed container")
}

// TestControlSocketIsPrivate: the socket is mode 0600 in a directory of
// mode 0700, made so; a directory other users may enter is refused; and
// the socket goes when the listener closes.
func TestControlSocketIsPrivate(t *testing.T) {
	dir, err := os.MkdirTemp("", "ctl")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state", statedir.RuntimeControlSocket)

	l, err := ListenControl(path)
	require.NoError(t, err)
	fi, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "the state directory")
	fi, err = os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSocket|0o600, fi.Mode()&(os.ModeType|os.ModePerm), "the socket")

	_, err = ListenControl(path)
	assert.EqualError(t, err, "control socket "+path+": another runtime is already listening there")
	require.NoError(t, l.Close())
	_, err = os.Stat(path)
	assert.True(t, os.IsNotExist(err), "the socket is removed on close")

	open := filepath.Join(dir, "open")
	require.NoError(t, os.Mkdir(open, 0o700))
	require.NoError(t, os.Chmod(open, 0o755))
	_, err = ListenControl(filepath.Join(open, "c.sock"))
	assert.EqualError(t, err, "control socket "+open+"/c.sock: its directory "+open+" is mode 0755, open to other users; it must be 0700 (chmod 700 "+open+"), or choose another --control-address")

	_, err = ListenControl("/tmp/" + strings.Repeat("d", 100) + "/c.sock")
	assert.ErrorContains(t, err, "control socket /tmp/ddd")
	assert.ErrorContains(t, err, "unix socket paths are limited to 107")
}

// connectAs connects to the unix socket at path as user and group uid: from
// a thread of its own, whose credentials it changes (Linux keeps them per
// thread) and which ends with the goroutine, never running other Go code.
func connectAs(t *testing.T, uid int, path string) (net.Conn, error) {
	t.Helper()
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		for _, call := range []struct {
			name string
			nr   uintptr
			a    uintptr
		}{{"setgroups", unix.SYS_SETGROUPS, 0}, {"setresgid", unix.SYS_SETRESGID, uintptr(uid)}, {"setresuid", unix.SYS_SETRESUID, uintptr(uid)}} {
			a := call.a
			if _, _, e := unix.RawSyscall(call.nr, a, a, a); e != 0 {
				ch <- result{nil, fmt.Errorf("%s: %w", call.name, e)}
				return
			}
		}
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			ch <- result{nil, err}
			return
		}
		if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
			unix.Close(fd)
			ch <- result{nil, err}
			return
		}
		f := os.NewFile(uintptr(fd), path)
		defer f.Close()
		c, err := net.FileConn(f)
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// TestControlSocketRefusesOtherUsers: another user cannot connect (the
// directory's and the socket's modes); and should the modes be opened,
// the kernel's word on who connected (SO_PEERCRED) still has the
// connection closed unanswered, while the runtime's own user is answered.
func TestControlSocketRefusesOtherUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to connect as another user")
	}
	const nobody = 65534
	r, _ := fixture(t)
	require.NoError(t, r.Seed(context.Background()))
	path, client := serveControl(t, r)
	require.NoError(t, os.Chmod(filepath.Dir(filepath.Dir(path)), 0o755)) // the temporary directory above the state directory

	_, err := connectAs(t, nobody, path)
	assert.ErrorIs(t, err, unix.EACCES, "the directory's mode 0700 keeps another user out")

	require.NoError(t, os.Chmod(filepath.Dir(path), 0o755))
	_, err = connectAs(t, nobody, path)
	assert.ErrorIs(t, err, unix.EACCES, "the socket's mode 0600 keeps another user out")

	require.NoError(t, os.Chmod(path, 0o666))
	c, err := connectAs(t, nobody, path)
	require.NoError(t, err, "with both opened, the kernel lets another user connect")
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(c, "POST /pods/default/nginx/containers/nginx/kill HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n")
	if err == nil {
		var b []byte
		b, err = io.ReadAll(c)
		assert.Empty(t, string(b), "no answer to another user")
	}
	assert.Equal(t, "RUNNING", r.Snapshot().Sandboxes[1].Containers[0].State, "nginx still runs")

	resp, err := client.Get("http://localhost/")
	require.NoError(t, err, "the runtime's own user is answered")
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
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
