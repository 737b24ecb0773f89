package main_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"

	"mykubelet/mylib/docscheck"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/testcluster"
)

// proc is the chapter binary running in the background.
type proc struct {
	cmd            *exec.Cmd
	mu             sync.Mutex
	stdout, stderr bytes.Buffer
	done           chan error
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan error, 1)}
	p.cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")} // no KUBECONFIG: none needed
	p.cmd.Stdout = lockedWriter{&p.mu, &p.stdout}
	p.cmd.Stderr = lockedWriter{&p.mu, &p.stderr}
	require.NoError(t, p.cmd.Start())
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill() // no-op if it exited
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", p.out(), p.errOut())
		}
	})
	return p
}

func (p *proc) out() string    { p.mu.Lock(); defer p.mu.Unlock(); return p.stdout.String() }
func (p *proc) errOut() string { p.mu.Lock(); defer p.mu.Unlock(); return p.stderr.String() }

// waitFor waits until stdout matches re, after skipping the first `after`
// matches, and returns the submatches of that match.
func (p *proc) waitFor(t *testing.T, re string, after int) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := rx.FindAllStringSubmatch(p.out(), -1); len(m) > after {
			return m[after]
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no line matching %q (after %d) in:\n%s\nstderr:\n%s", re, after, p.out(), p.errOut())
	return nil
}

// interrupt sends Ctrl-C and waits for a clean exit.
func (p *proc) interrupt(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	select {
	case err := <-p.done:
		require.NoError(t, err, "exit after Ctrl-C")
	case <-time.After(20 * time.Second):
		t.Fatal("did not exit after Ctrl-C")
	}
}

func post(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Post(url, "", nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	return string(b)
}

func shortDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "crt")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func countEvents(out string) int {
	return len(regexp.MustCompile(`(?m)^Container\w+ pod=`).FindAllString(out, -1))
}

// TestWalkthrough runs the README: the chapter with sample pods, then the
// three curls, then Ctrl-C, and checks the README's expected output.
func TestWalkthrough(t *testing.T) {
	bin := testcluster.BuildChapter(t, "./chapters/05-pleg")
	dir := shortDir(t)
	p := start(t, bin, "--state-dir", dir, "--seed-pods", "--control-address", "127.0.0.1:0")
	addr := p.waitFor(t, `control API on (http://127\.0\.0\.1:\d+)`, 0)[1]
	p.waitFor(t, `ContainerStarted pod=default/busybox sandbox`, 0)
	require.Equal(t, 4, countEvents(p.out()))

	// The runtime is a real CRI server on the socket.
	m, err := kuberuntime.Connect(context.Background(), "unix://"+filepath.Join(dir, "mykubelet.sock"), clock.RealClock{})
	require.NoError(t, err)
	pods, err := m.GetPods(context.Background(), true)
	require.NoError(t, err)
	assert.Len(t, pods, 2)
	require.NoError(t, m.Close())

	// Relists that find nothing new send nothing.
	time.Sleep(2500 * time.Millisecond)
	assert.Equal(t, 4, countEvents(p.out()), "a steady relist prints nothing")

	assert.Contains(t, post(t, addr+"/pods/default/nginx/containers/nginx/kill"), "killed container")
	p.waitFor(t, `ContainerDied pod=default/nginx container=nginx`, 0)
	post(t, addr+"/pods/default/nginx/containers/nginx/remove")
	p.waitFor(t, `ContainerRemoved pod=default/nginx container=nginx`, 0)
	post(t, addr+"/pods/default/busybox/containers/busybox/script?exit-after=2s&exit-code=1&restart-after=2s")
	p.waitFor(t, `ContainerDied pod=default/busybox container=busybox .* exitCode=1 reason=Error`, 0)
	p.waitFor(t, `ContainerStarted pod=default/busybox container=busybox`, 1) // the second one: restarted

	p.interrupt(t)
	expected, err := docscheck.ExpectedOutput("README.md")
	require.NoError(t, err)
	require.NoError(t, docscheck.Match(expected, p.out()))
	_, err = os.Stat(filepath.Join(dir, "mykubelet.sock"))
	assert.True(t, os.IsNotExist(err), "the socket is removed on exit")
}

// TestStandaloneRuntimeAndSeparatePLEG runs the runtime alone (--pleg=false)
// and the PLEG in another process against it (--fake-runtime=false), as the
// README's crictl section does; then restarts the PLEG: a container it
// first sees already exited is reported ContainerDied.
func TestStandaloneRuntimeAndSeparatePLEG(t *testing.T) {
	bin := testcluster.BuildChapter(t, "./chapters/05-pleg")
	dir := shortDir(t)
	rt := start(t, bin, "--state-dir", dir, "--seed-pods", "--pleg=false", "--control-address", "127.0.0.1:0")
	addr := rt.waitFor(t, `control API on (http://127\.0\.0\.1:\d+)`, 0)[1]
	rt.waitFor(t, `serving until Ctrl-C`, 0)

	pl := start(t, bin, "--state-dir", dir, "--fake-runtime=false")
	pl.waitFor(t, `ContainerStarted pod=default/nginx container=nginx`, 0)
	pl.interrupt(t)

	post(t, addr+"/pods/default/nginx/containers/nginx/kill")
	pl = start(t, bin, "--state-dir", dir, "--fake-runtime=false")
	pl.waitFor(t, `ContainerDied pod=default/nginx container=nginx .* exitCode=137 reason=Error`, 0)
	pl.waitFor(t, `ContainerStarted pod=default/nginx sandbox`, 0)
	pl.interrupt(t)
	rt.interrupt(t)
	assert.Contains(t, rt.out(), "stopped: fake runtime shut down")
}

func TestErrors(t *testing.T) {
	bin := testcluster.BuildChapter(t, "./chapters/05-pleg")
	dir := shortDir(t)
	run := func(args ...string) (int, string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return code, stderr.String()
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

	code, stderr = run("--relist-period", "0s")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "--relist-period must be positive")

	code, stderr = run("--no-such-flag")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "flag provided but not defined: -no-such-flag")

	code, stderr = run("--kubeconfig", "/nonexistent", "--state-dir", dir, "--fake-runtime=false")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "cannot reach the container runtime", "--kubeconfig is accepted and not read")
}
