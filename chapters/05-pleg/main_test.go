package main_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"

	"mykubelet/mylib/kuberuntime"
	"mykubelet/scripts/docscheck"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

// lineTimeout is how long the tests wait for a line the chapter prints.
const lineTimeout = 30 * time.Second

// post POSTs to path of the control API on the unix socket sock, as
// curl -s -X POST --unix-socket SOCK http://localhost/PATH does.
func post(t *testing.T, sock, path string) string {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	defer client.CloseIdleConnections()
	resp, err := client.Post("http://localhost"+path, "", nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	return string(b)
}

func countEvents(out string) int {
	return len(regexp.MustCompile(`(?m)^Container\w+ pod=`).FindAllString(out, -1))
}

// TestWalkthrough runs the README: the chapter with sample pods, then the
// three curls, then Ctrl-C, and checks the README's expected output.
func TestWalkthrough(t *testing.T) {
	bin := testcluster.BuildChapter(t, "./chapters/05-pleg")
	dir := chaptertest.ShortTempDir(t)
	p := chaptertest.Start(t, bin, "--state-dir", dir, "--seed-pods")
	sock := p.WaitForSubmatch(`control API on unix://(\S+) `, 0, lineTimeout)[1]
	assert.Equal(t, filepath.Join(dir, "runtime-control.sock"), sock, "the control socket is in the state directory by default")
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSocket|0o600, fi.Mode()&(os.ModeType|os.ModePerm), "only its user may use it")
	p.WaitForOutput(`ContainerStarted pod=default/busybox sandbox`, lineTimeout)
	require.Equal(t, 4, countEvents(p.Stdout()))

	// The runtime is a real CRI server on the socket.
	m, err := kuberuntime.Connect(context.Background(), "unix://"+filepath.Join(dir, "mykubelet.sock"), clock.RealClock{})
	require.NoError(t, err)
	pods, err := m.GetPods(context.Background(), true)
	require.NoError(t, err)
	assert.Len(t, pods, 2)
	require.NoError(t, m.Close())

	// Relists that find nothing new send nothing.
	time.Sleep(2500 * time.Millisecond)
	assert.Equal(t, 4, countEvents(p.Stdout()), "a steady relist prints nothing")

	assert.Contains(t, post(t, sock, "/pods/default/nginx/containers/nginx/kill"), "killed container")
	p.WaitForOutput(`ContainerDied pod=default/nginx container=nginx`, lineTimeout)
	post(t, sock, "/pods/default/nginx/containers/nginx/remove")
	p.WaitForOutput(`ContainerRemoved pod=default/nginx container=nginx`, lineTimeout)
	assert.Contains(t, post(t, sock, "/pods/default/busybox/containers/busybox/stop"), "stopped container")
	p.WaitForOutput(`ContainerDied pod=default/busybox container=busybox .* exitCode=1 reason=Error`, lineTimeout)

	require.Equal(t, 0, p.Stop(), "exit after Ctrl-C")
	require.NoError(t, docscheck.Match(chaptertest.ExpectedOutput(t, "README.md"), p.Stdout()))
	_, err = os.Stat(filepath.Join(dir, "mykubelet.sock"))
	assert.True(t, os.IsNotExist(err), "the socket is removed on exit")
}

// TestStandaloneRuntimeAndSeparatePLEG runs the runtime alone (--pleg=false)
// and the PLEG in another process against it (--fake-runtime=false), as the
// README's crictl section does; then restarts the PLEG: a container it
// first sees already exited is reported ContainerDied.
func TestStandaloneRuntimeAndSeparatePLEG(t *testing.T) {
	bin := testcluster.BuildChapter(t, "./chapters/05-pleg")
	dir := chaptertest.ShortTempDir(t)
	sock := filepath.Join(dir, "control", "c.sock")
	rt := chaptertest.Start(t, bin, "--state-dir", dir, "--seed-pods", "--pleg=false", "--control-address", sock)
	rt.WaitForOutput(`control API on unix://`+regexp.QuoteMeta(sock)+` `, lineTimeout)
	rt.WaitForOutput(`serving until Ctrl-C`, lineTimeout)

	pl := chaptertest.Start(t, bin, "--state-dir", dir, "--fake-runtime=false")
	pl.WaitForOutput(`ContainerStarted pod=default/nginx container=nginx`, lineTimeout)
	require.Equal(t, 0, pl.Stop(), "exit after Ctrl-C")

	post(t, sock, "/pods/default/nginx/containers/nginx/kill")
	pl = chaptertest.Start(t, bin, "--state-dir", dir, "--fake-runtime=false")
	pl.WaitForOutput(`ContainerDied pod=default/nginx container=nginx .* exitCode=137 reason=Error`, lineTimeout)
	pl.WaitForOutput(`ContainerStarted pod=default/nginx sandbox`, lineTimeout)
	require.Equal(t, 0, pl.Stop(), "exit after Ctrl-C")
	require.Equal(t, 0, rt.Stop(), "exit after Ctrl-C")
	assert.Contains(t, rt.Stdout(), "stopped: fake runtime shut down")
}

func TestErrors(t *testing.T) {
	bin := testcluster.BuildChapter(t, "./chapters/05-pleg")
	dir := chaptertest.ShortTempDir(t)
	run := func(args ...string) (int, string) {
		t.Helper()
		_, stderr, code := chaptertest.Run(t, bin, args...)
		return code, stderr
	}

	code, stderr := run("--state-dir", dir, "--fake-runtime=false")
	assert.Equal(t, 1, code)
	assert.Regexp(t, `^05-pleg: error: cannot reach the container runtime at unix://`+regexp.QuoteMeta(dir)+`/mykubelet.sock: `, stderr)
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %s", stderr)

	long := filepath.Join(dir, strings.Repeat("d", 100))
	code, stderr = run("--state-dir", long)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "unix socket paths are limited to 107: use a shorter --state-dir")

	busy, err := net.Listen("unix", filepath.Join(dir, "runtime-control.sock"))
	require.NoError(t, err)
	defer busy.Close()
	code, stderr = run("--state-dir", dir)
	assert.Equal(t, 1, code)
	assert.Equal(t, "05-pleg: error: control API: control socket "+dir+"/runtime-control.sock: another runtime is already listening there", strings.TrimSpace(stderr))

	open := filepath.Join(dir, "open")
	require.NoError(t, os.Mkdir(open, 0o755))
	require.NoError(t, os.Chmod(open, 0o755))
	code, stderr = run("--state-dir", dir, "--control-address", open+"/c.sock")
	assert.Equal(t, 1, code)
	assert.Equal(t, "05-pleg: error: control API: control socket "+open+"/c.sock: its directory "+open+" is mode 0755, open to other users; it must be 0700 (chmod 700 "+open+"), or choose another --control-address", strings.TrimSpace(stderr))

	code, stderr = run("--relist-period", "0s")
	assert.Equal(t, 2, code, "a bad flag")
	assert.Equal(t, "05-pleg: --relist-period must be positive (got 0s) (see --help)\n", stderr)

	code, stderr = run("--no-such-flag")
	assert.Equal(t, 2, code)
	assert.Equal(t, "05-pleg: flag provided but not defined: -no-such-flag (see --help)\n", stderr, "one line, no usage")

	code, stderr = run("--kubeconfig", "/nonexistent", "--state-dir", dir, "--fake-runtime=false")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "cannot reach the container runtime", "--kubeconfig is accepted and not read")
}
