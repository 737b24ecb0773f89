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

func post(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Post(url, "", nil)
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
	p := chaptertest.Start(t, bin, "--state-dir", dir, "--seed-pods", "--control-address", "127.0.0.1:0")
	addr := p.WaitForSubmatch(`control API on (http://127\.0\.0\.1:\d+)`, 0, lineTimeout)[1]
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

	assert.Contains(t, post(t, addr+"/pods/default/nginx/containers/nginx/kill"), "killed container")
	p.WaitForOutput(`ContainerDied pod=default/nginx container=nginx`, lineTimeout)
	post(t, addr+"/pods/default/nginx/containers/nginx/remove")
	p.WaitForOutput(`ContainerRemoved pod=default/nginx container=nginx`, lineTimeout)
	assert.Contains(t, post(t, addr+"/pods/default/busybox/containers/busybox/stop"), "stopped container")
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
	rt := chaptertest.Start(t, bin, "--state-dir", dir, "--seed-pods", "--pleg=false", "--control-address", "127.0.0.1:0")
	addr := rt.WaitForSubmatch(`control API on (http://127\.0\.0\.1:\d+)`, 0, lineTimeout)[1]
	rt.WaitForOutput(`serving until Ctrl-C`, lineTimeout)

	pl := chaptertest.Start(t, bin, "--state-dir", dir, "--fake-runtime=false")
	pl.WaitForOutput(`ContainerStarted pod=default/nginx container=nginx`, lineTimeout)
	require.Equal(t, 0, pl.Stop(), "exit after Ctrl-C")

	post(t, addr+"/pods/default/nginx/containers/nginx/kill")
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

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	code, stderr = run("--state-dir", dir, "--control-address", busy.Addr().String())
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "05-pleg: error: control API: listen tcp "+busy.Addr().String()+": bind: address already in use")

	code, stderr = run("--state-dir", dir, "--control-address", "0.0.0.0:17356")
	assert.Equal(t, 1, code)
	assert.Equal(t, `05-pleg: error: control API: address "0.0.0.0:17356" is not on loopback: the control API has no authentication, so it listens only on 127.0.0.1, ::1 or localhost`, strings.TrimSpace(stderr))

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
