package fakeruntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"net/url"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The containment suite: scripts written as an attacker (or a careless
// learner) would write them run as a container's command, as an exec and
// as a streamed exec in a root runtime, whose scripts run in the sandbox
// process. Canaries wait on the host, outside every container root: a
// secret file, a file named as the interpreter's own temporary files, and
// the directory that holds them. After every script: no canary read,
// written or created; the runtime answers; a bystander container runs on
// with the same ID; goroutines come back to what they were.

// attacks are the corpus; @DIR@ is the canaries' directory on the host,
// @SECRET@ the secret file in it. Each container gets TMPDIR=@DIR@.
var attacks = []struct{ name, script string }{
	{"tmpdir-read", `cat < $TMPDIR/sh-interp-canary`},
	{"tmpdir-write", `echo pwned > $TMPDIR/sh-interp-new; echo pwned >> $TMPDIR/sh-interp-canary`},
	{"tmpdir-cmdsubst", `x=$(< $TMPDIR/sh-interp-canary); echo "$x"`},
	{"tmpdir-dot", `. $TMPDIR/sh-interp-canary`},
	{"tmpdir-nested", `TMPDIR=@DIR@ sh -c 'cat < $TMPDIR/sh-interp-canary; echo pwned > $TMPDIR/sh-interp-nested'`},
	{"tmpdir-export", `export TMPDIR=@DIR@; sh -c 'read x < $TMPDIR/sh-interp-canary; echo $x'`},
	{"absolute", `cat @SECRET@; cat < @SECRET@; read x < @SECRET@; echo $x`},
	{"dotdot", `cd /; cat ../../../../../..@SECRET@; cd ..; cd ..; ls`},
	{"exec-fd", `exec 3< @SECRET@; cat <&3`},
	{"create", `echo pwned > @DIR@/created; mkdir @DIR@/made; touch @DIR@/touched`},
	{"remove", `rm -rf @DIR@; rm @SECRET@`},
	{"dot-path", `PATH=@DIR@ . sh-interp-canary`},
	{"pwd-host", `cd /tmp; PWD=/proc/self/cwd pwd -P; pwd; echo $PWD; cd /proc/self/cwd && pwd -P`},
	{"tilde", `echo ~root ~nobody ~daemon; cd ~root`},
	{"pids", `echo pid $$ ppid $PPID`},
	{"proc", `cat /proc/self/environ /proc/1/cmdline /proc/self/mountinfo; ls /proc`},
	{"nested-sh-true", `echo hi; sh -c true`},
	{"nested-sh-exit0", `sh -c 'exit 0'`},
	{"type-path", `PATH=@DIR@ type sh-interp-canary; PATH=@DIR@ command -v sh-interp-canary`},
	{"many-fds", `i=0; while [ $i -lt 200 ]; do exec 4< /etc/hostname; i=$((i+1)); done; echo done`},
	{"memory-doubling", `x=a; while :; do x=$x$x; done`},
	{"memory-files", `x=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; while :; do echo $x$x$x$x$x$x$x$x >> /tmp/fill; done`},
	{"background-jobs", `i=0; while [ $i -lt 3000 ]; do sleep 60 & i=$((i+1)); done; echo started`},
	{"background-builtins", `i=0; while [ $i -lt 3000 ]; do { while :; do :; done; } & i=$((i+1)); done`},
	{"recursion", `f(){ f; }; f`},
	{"nested-sh-chain", `export s='sh -c "$s"'; sh -c "$s"`},
	{"eval-chain", `e='eval "$e"'; eval "$e"`},
	{"output-flood", `while :; do echo xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done`},
	{"sleep-overflow", `sleep 1e9h & sleep infinity & sleep 99999999999999999999; echo "$?"`},
}

// containmentMemory is the memory limit of the corpus's containers.
const containmentMemory = 64 << 20

// canaries lays the canaries in a directory of the host and returns it.
func canaries(t *testing.T) (dir, secret string) {
	dir = t.TempDir()
	secret = filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("host secret\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sh-interp-canary"), []byte("echo canary-ran; tmp secret\n"), 0o600))
	return dir, secret
}

// checkCanaries fails if anything in dir changed: a file more or less, or
// a file's content.
func checkCanaries(t *testing.T, dir, what string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err, what)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"secret", "sh-interp-canary"}, names, "%s: the canaries' directory changed", what)
	b, _ := os.ReadFile(filepath.Join(dir, "secret"))
	assert.Equal(t, "host secret\n", string(b), what)
	b, _ = os.ReadFile(filepath.Join(dir, "sh-interp-canary"))
	assert.Equal(t, "echo canary-ran; tmp secret\n", string(b), what)
}

// checkOutput fails if out shows a canary or a fact of the host.
func checkOutput(t *testing.T, out, what string) {
	t.Helper()
	cwd, _ := os.Getwd()
	for _, leak := range []string{"host secret", "tmp secret", "canary-ran", cwd, "root:x:0:0"} {
		assert.NotContains(t, out, leak, what)
	}
}

// containment is a root runtime with a bystander container and canaries.
type containment struct {
	r                *Runtime
	dir, secret      string
	sandbox          string
	bystander        string
	goroutinesStart  int
	firstSandboxPID  int
	bystanderSandbox string
}

func newContainment(t *testing.T) *containment {
	r := sandboxRuntime(t)
	dir, secret := canaries(t)
	sb := runSandbox(t, r, "bystander", "uid-bystander", nil)
	by := createContainer(t, r, sb, "bystander", "sh", "-c", "while true; do sleep 1; done")
	startContainer(t, r, by)
	target := runSandbox(t, r, "target", "uid-target", nil)
	pid := sandboxPID(t, r, sb) // the bystander's
	return &containment{r: r, dir: dir, secret: secret, sandbox: target, bystander: by, goroutinesStart: runtime.NumGoroutine(), firstSandboxPID: pid, bystanderSandbox: sb}
}

func (c *containment) expand(script string) string {
	return strings.NewReplacer("@DIR@", c.dir, "@SECRET@", c.secret).Replace(script)
}

// run runs script three ways: as a container's command, as ExecSync in a
// running container, and as a streamed exec; it returns what each printed.
func (c *containment) run(t *testing.T, name, script string) {
	t.Helper()
	ctx := context.Background()
	script = c.expand(script)
	env := []*runtimeapi.KeyValue{{Key: "TMPDIR", Value: []byte(c.dir)}}
	cfg := func(n string, cmd ...string) *runtimeapi.ContainerConfig {
		return &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: n}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
			Command: cmd, Envs: env, Linux: &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: containmentMemory}}}
	}
	// As the container's command, stopped after 3 s if it has not ended.
	resp, err := c.r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: c.sandbox, Config: cfg(name, "sh", "-c", script)})
	require.NoError(t, err)
	var out lockedBuffer
	c.r.mu.Lock()
	c.r.containers[resp.ContainerId].log.sink = func(b []byte) { _, _ = out.Write(b) } // what it prints, without a log file
	c.r.mu.Unlock()
	startContainer(t, c.r, resp.ContainerId)
	stopCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	c.r.mu.Lock()
	done := c.r.containers[resp.ContainerId].done
	c.r.mu.Unlock()
	select {
	case <-done:
	case <-stopCtx.Done():
		_, err = c.r.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: resp.ContainerId, Timeout: 0})
		require.NoError(t, err)
	}
	cancel()
	checkOutput(t, string(out.Bytes()), name+" (command)")

	// As an exec in a running container, then as a streamed exec in
	// another (an OOM kill ends the whole container, as memory.oom.group).
	host := func(n string) string {
		resp, err := c.r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: c.sandbox, Config: cfg(n, "sleep", "3600")})
		require.NoError(t, err)
		startContainer(t, c.r, resp.ContainerId)
		return resp.ContainerId
	}
	execHost, streamHost := host(name+"-exec"), host(name+"-stream")
	ex, err := c.r.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: execHost, Cmd: []string{"sh", "-c", script}, Timeout: 3})
	if err == nil {
		t.Logf("%s: exit %d: %.300q %.300q", name, ex.ExitCode, ex.Stdout, ex.Stderr)
		checkOutput(t, string(ex.Stdout)+string(ex.Stderr), name+" (exec)")
	}
	u := execURL(t, c.r, streamHost, true, false, "sh")
	checkOutput(t, streamFor(t, u, script+"\nexit\n", 5*time.Second), name+" (kubectl exec)")

	for _, id := range []string{resp.ContainerId, execHost, streamHost} {
		_, err := c.r.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
		require.NoError(t, err)
	}
	checkCanaries(t, c.dir, name)
	c.checkAlive(t, name)
}

// streamFor streams stdin to an exec URL for at most d and returns what
// came back on stdout and stderr.
func streamFor(t *testing.T, rawURL, stdin string, d time.Duration) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
	require.NoError(t, err)
	var out lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_ = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &out}) // an exit code or the deadline: either is fine here
	return string(out.Bytes())
}

// checkAlive fails unless the runtime answers and the bystander runs on.
func (c *containment) checkAlive(t *testing.T, what string) {
	t.Helper()
	_, err := c.r.Version(context.Background(), &runtimeapi.VersionRequest{})
	require.NoError(t, err, what)
	st := containerStatus(t, c.r, c.bystander)
	require.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, st.State, "%s: the bystander container stopped", what)
}

// checkGoroutines fails unless the goroutines come back to their number
// at the start, within a few seconds, and the target pod's sandbox
// process's two (started since: its reader of exits and of its stderr).
func (c *containment) checkGoroutines(t *testing.T) {
	t.Helper()
	assert.Eventually(t, func() bool { return runtime.NumGoroutine() <= c.goroutinesStart+2+2 }, 10*time.Second, 50*time.Millisecond,
		"goroutines: %d at the start, %d now", c.goroutinesStart, runtime.NumGoroutine())
}

func TestContainmentCorpus(t *testing.T) {
	c := newContainment(t)
	for _, a := range attacks {
		c.run(t, a.name, a.script)
	}
	c.checkGoroutines(t)
	// The bystander's sandbox process never died; the target's, which ran
	// them all, kept its memory within a few containers' limits.
	require.Equal(t, c.firstSandboxPID, sandboxPID(t, c.r, c.bystanderSandbox), "the bystander's sandbox process did not die")
	pid := sandboxPID(t, c.r, c.sandbox)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	hwm := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindStringSubmatch(string(status))
	require.NotNil(t, hwm)
	peak, _ := strconv.Atoi(hwm[1])
	t.Logf("the sandbox process's peak RSS: %d MiB", peak/1024)
	bound := 10 * containmentMemory / 1024 // KiB: a few containers at their limit at once, and the runtime's own
	if raceEnabled {
		bound *= 4 // the race detector's shadow memory
	}
	assert.Less(t, peak, bound, "peak RSS in KiB")
}

// FuzzContainment runs generated scripts with the same assertions. Its
// seeds (testdata/fuzz/FuzzContainment: pieces of the corpus put together)
// run in every `go test`;
//
//	go test -run '^$' -fuzz FuzzContainment -fuzztime 5m ./mylib/fakeruntime/
//
// generates more from them.
func FuzzContainment(f *testing.F) {
	f.Fuzz(func(t *testing.T, script string) {
		if len(script) > 4096 {
			return
		}
		c := newContainment(t)
		c.run(t, "fuzz", script)
	})
}
