package fakeruntime

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"mykubelet/mylib/fakeruntime/sandboxproc"
)

// Tests of the interpreter layer's walls: what an untrusted script may do
// to the runtime's process (crash it, exhaust its stack, goroutines or
// memory) and what it may learn of the host.

func TestNestedShThatExitsZeroDoesNotCrash(t *testing.T) {
	r, _ := fixture(t)
	st, _ := runToEnd(t, r, "echo hi; sh -c true")
	assert.Equal(t, int32(0), st.ExitCode)
	assert.Equal(t, ReasonCompleted, st.Reason)

	sb := runSandbox(t, r, "other", "uid-other", nil)
	c := createContainer(t, r, sb, "app", "sleep", "3600")
	startContainer(t, r, c)
	resp := execIn(t, r, c, "sh", "-c", "echo hi; sh -c true")
	assert.Equal(t, int32(0), resp.ExitCode, string(resp.Stderr))
	assert.Equal(t, "hi\n", string(resp.Stdout))
	resp = execIn(t, r, c, "sh", "-c", "sh -c 'exit 3'; echo $?; sh -c 'sh -c true'")
	assert.Equal(t, int32(0), resp.ExitCode, string(resp.Stderr))
	assert.Equal(t, "3\n", string(resp.Stdout))
}

func TestPanicEndsOnlyItsContainer(t *testing.T) {
	hook := func(name string) {
		if name == "boom" {
			panic("boom: a bug in a utility\nwith a second line")
		}
	}
	sandboxproc.TestHookExec.Store(&hook)
	t.Cleanup(func() { sandboxproc.TestHookExec.Store(nil) })
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	bystander := createContainer(t, r, sb, "bystander", "sleep", "3600")
	startContainer(t, r, bystander)

	st, _ := runToEnd(t, r, "echo before; boom; echo never")
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.State)
	assert.Equal(t, int32(2), st.ExitCode)
	assert.Equal(t, ReasonError, st.Reason)

	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, bystander).State)
	resp := execIn(t, r, bystander, "sh", "-c", "echo before; boom; echo never")
	assert.Equal(t, int32(2), resp.ExitCode)
	assert.Equal(t, "before\n", string(resp.Stdout))
	assert.Equal(t, "sh: internal error: boom: a bug in a utility\n", string(resp.Stderr), "one line, no trace")
	resp = execIn(t, r, bystander, "sh", "-c", "echo still here")
	assert.Equal(t, "still here\n", string(resp.Stdout))

	// The streaming exec's interactive shell too.
	var out, errOut lockedBuffer
	code, err := r.execStreams(context.Background(), bystander, []string{"sh"}, strings.NewReader("echo a\nboom\necho b\n"), &out, &errOut, false)
	require.NoError(t, err)
	assert.Equal(t, 2, code)
	assert.Equal(t, "a\n", string(out.Bytes()))
	assert.Equal(t, "sh: internal error: boom: a bug in a utility\n", string(errOut.Bytes()))
}

func TestSleepRunsOnTheClock(t *testing.T) {
	r, clk := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	running := func(id string) bool {
		return containerStatus(t, r, id).State == runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	sum := createContainer(t, r, sb, "sum", "sleep", "1m", "30s")
	forever := createContainer(t, r, sb, "forever", "sleep", "infinity")
	huge := createContainer(t, r, sb, "huge", "sleep", "1e9h", "1e9h")
	for _, c := range []string{sum, forever, huge} {
		startContainer(t, r, c)
	}
	for _, c := range []string{sum, forever, huge} {
		waitRunningUtility(t, r, c, "sleep", 1)
	}
	clk.Step(89 * time.Second)
	assert.True(t, running(sum), "1m 30s is 90 s")
	clk.Step(time.Second)
	waitDone(t, r, sum)
	assert.Equal(t, ReasonCompleted, containerStatus(t, r, sum).Reason)
	clk.Step(100 * 365 * 24 * time.Hour)
	assert.True(t, running(forever), "infinity")
	assert.True(t, running(huge), "saturated, not overflowed")
	resp := execIn(t, r, forever, "sleep", "1", "bogus")
	assert.Equal(t, int32(1), resp.ExitCode)
	assert.Equal(t, "sleep: invalid time interval \"bogus\"\n", string(resp.Stderr))
}

// waitRunningUtility waits until n utilities called name run in container id.
func waitRunningUtility(t *testing.T, r *Runtime, id, name string, n int) {
	t.Helper()
	r.mu.Lock()
	c := r.containers[id]
	r.mu.Unlock()
	require.Eventually(t, func() bool { return c.running.Count(name) == n }, 10*time.Second, time.Millisecond, "%d %s in %s", n, name, short(id))
}

// TestExecSyncOutputIsCappedAt16MiB: each stream keeps 16 MiB while the
// command runs, and the reply is cut to fit one answer of the kubelet's
// CRI client (16 MiB, framing included): over the socket, it arrives
// instead of failing with ResourceExhausted.
func TestExecSyncOutputIsCappedAt16MiB(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "app", "sleep", "3600")
	startContainer(t, r, c)
	dir, err := os.MkdirTemp("", "cri") // short: a unix socket's path has at most 107 bytes
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	lis, err := net.Listen("unix", filepath.Join(dir, "sock"))
	require.NoError(t, err)
	srv := NewGRPCServer(r)
	go func() { _ = srv.Serve(lis) }() // returns when stopped
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20))) // the kubelet's (kuberuntime.MaxMsgSize)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })

	// 17 MiB on each stream, in lines of 16 KiB, as yes would write them.
	line := strings.Repeat("y", 16<<10-1)
	resp, err := runtimeapi.NewRuntimeServiceClient(conn).ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: c, Cmd: []string{
		"sh", "-c", `x=` + line + `; i=0; while [ $i -lt 1088 ]; do echo $x; echo $x >&2; i=$((i+1)); done; echo done >&2`}})
	require.NoError(t, err, "the reply fits one answer")
	assert.Equal(t, int32(0), resp.ExitCode, "the command went on and exited")
	assert.Len(t, resp.Stdout, maxExecSyncReply/2)
	assert.Len(t, resp.Stderr, maxExecSyncReply-maxExecSyncReply/2)
	assert.Equal(t, line+"\n", string(resp.Stdout[:16<<10]))
	assert.NotContains(t, string(resp.Stderr[len(resp.Stderr)-10:]), "done", "what came after the cap is dropped")

	// A short stream keeps all of it; the other the rest.
	out, errOut := fitExecSyncReply(make([]byte, 16<<20), []byte("short"))
	assert.Len(t, out, maxExecSyncReply-5)
	assert.Equal(t, "short", string(errOut))
}

func TestRecursionEndsInTheContainerNotInAStackOverflow(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "app", "sleep", "3600")
	startContainer(t, r, c)
	for _, script := range []string{
		`f(){ f; }; f`,
		`export s='sh -c "$s"'; sh -c "$s"; exit $?`,
		`s='eval "$s"'; eval "$s"`,
		`echo '. /tmp/self' > /tmp/self; . /tmp/self`,
	} {
		resp := execIn(t, r, c, "sh", "-c", script)
		assert.NotZero(t, resp.ExitCode, script)
		// Each nested sh is a process: a chain of them may meet the pids
		// limit before the depth bound, as fork fails in a real container.
		if !strings.Contains(string(resp.Stderr), sandboxproc.ErrForkFailed) {
			assert.Contains(t, string(resp.Stderr), "sh: maximum nesting depth (", script)
		}
		assert.Equal(t, 1, strings.Count(string(resp.Stderr), "\n"), "one line: %s", resp.Stderr)
	}
	// Without a process limit, the sh chain meets the depth bound.
	unlimited := fixtureConfig(t, Config{PodPidsLimit: -1})
	usb := runSandbox(t, unlimited, "web", "uid-1", nil)
	uc := createContainer(t, unlimited, usb, "app", "sleep", "3600")
	startContainer(t, unlimited, uc)
	resp := execIn(t, unlimited, uc, "sh", "-c", `export s='sh -c "$s"'; sh -c "$s"`)
	assert.NotZero(t, resp.ExitCode)
	assert.Equal(t, fmt.Sprintf("sh: maximum nesting depth (%d stack frames) exceeded\n", sandboxproc.MaxStackFrames), string(resp.Stderr))

	// Real recursion, far from the bound, works.
	resp = execIn(t, r, c, "sh", "-c", `f(){ if [ $1 -gt 0 ]; then f $(($1-1)); else echo bottom; fi; }; f 500`)
	assert.Equal(t, "bottom\n", string(resp.Stdout), string(resp.Stderr))
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, c).State)
}

// fixtureConfig is fixture with cfg (its Clock and StateDir are set here).
func fixtureConfig(t *testing.T, cfg Config) *Runtime {
	t.Helper()
	cfg.Clock, cfg.StateDir = clocktesting.NewFakeClock(t0), t.TempDir()
	r, err := NewRuntime(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	for _, img := range []string{"busybox:1.36", "polinux/stress"} {
		_, err = r.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img}})
		require.NoError(t, err)
	}
	return r
}

// waitGoroutines waits, bounded, until at most n goroutines run (besides
// the two of the wait itself). A thousand goroutines take seconds to end
// under the race detector on a busy machine.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	assert.Eventually(t, func() bool { return runtime.NumGoroutine() <= n+2 }, 60*time.Second, 10*time.Millisecond,
		"goroutines back to %d (now %d)", n, runtime.NumGoroutine())
}

func TestPodPidsLimitBoundsBackgroundJobs(t *testing.T) {
	r := fixtureConfig(t, Config{PodPidsLimit: 8})
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "app", "sleep", "3600") // 2 processes: the script and its sleep
	startContainer(t, r, c)
	waitRunningUtility(t, r, c, "sleep", 1)
	base := runtime.NumGoroutine()

	// Jobs of builtins only: the exec is the third process, five jobs
	// fit, the other 2,995 fail to fork, and the exec goes on.
	resp := execIn(t, r, c, "sh", "-c", `i=0; while [ $i -lt 3000 ]; do { while :; do :; done; } & i=$((i+1)); done
true & wait $!; echo "wait=$?"`)
	assert.Equal(t, "wait=1\n", string(resp.Stdout))
	// How many fail to fork depends on the machine: a job that had not
	// started when the exec ended never ran, nor printed. pidsPeak below
	// says that no more than the limit ever ran at once.
	assert.Positive(t, strings.Count(string(resp.Stderr), sandboxproc.ErrForkFailed+"\n"), "the jobs past the limit")
	assert.Equal(t, int32(0), resp.ExitCode)
	waitGoroutines(t, base)
	r.mu.Lock()
	table := &r.containers[c].running
	r.mu.Unlock()
	assert.Equal(t, int64(8), table.PidsPeak.Load(), "never more than the limit at once")
	// waitGoroutines leaves two goroutines of slack: a job may still be
	// ending (each burns on an OS thread of its own, which a loaded
	// machine schedules late).
	assert.Eventually(t, func() bool { return table.Pids.Load() == 2 }, 60*time.Second, 10*time.Millisecond,
		"the jobs gave their slots back when the exec ended")

	// A utility past the limit fails too; the container goes on.
	r = fixtureConfig(t, Config{PodPidsLimit: 3})
	sb = runSandbox(t, r, "web", "uid-1", nil)
	c = createContainer(t, r, sb, "app", "sleep", "3600")
	startContainer(t, r, c)
	waitRunningUtility(t, r, c, "sleep", 1)
	resp = execIn(t, r, c, "sh", "-c", `hostname; echo "status=$?"`) // the exec is the third
	assert.Equal(t, sandboxproc.ErrForkFailed+"\n", string(resp.Stderr))
	assert.Equal(t, "status=1\n", string(resp.Stdout))
	resp = execIn(t, r, c, "sh", "-c", `true`)
	assert.Equal(t, int32(0), resp.ExitCode)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, c).State)
}

func TestDefaultPodPidsLimit(t *testing.T) {
	var peak atomic.Int64
	hook := func(name string) {
		if name == "hostname" {
			peak.Store(int64(runtime.NumGoroutine()))
		}
	}
	sandboxproc.TestHookExec.Store(&hook)
	t.Cleanup(func() { sandboxproc.TestHookExec.Store(nil) })
	r := fixtureConfig(t, Config{})
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "app", "sleep", "3600")
	startContainer(t, r, c)
	waitRunningUtility(t, r, c, "sleep", 1)
	base := runtime.NumGoroutine()
	// hostname may fail to fork as well: the table is full of sleeps.
	resp := execIn(t, r, c, "sh", "-c", `i=0; while [ $i -lt 3000 ]; do sleep 60 & i=$((i+1)); done; hostname >/dev/null`)
	assert.Positive(t, strings.Count(string(resp.Stderr), sandboxproc.ErrForkFailed))
	assert.Less(t, int(peak.Load())-base, DefaultPodPidsLimit+64, "no more jobs than the limit ran at once")
	waitGoroutines(t, base)
}

// createLimited creates a container of image running cmd with a memory
// limit, as the kubelet sends it.
func createLimited(t *testing.T, r *Runtime, sandboxID, name, image string, memory int64, cmd ...string) string {
	t.Helper()
	resp, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: image},
		Command:  cmd,
		Linux:    &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: memory}},
	}})
	require.NoError(t, err)
	return resp.ContainerId
}

// The Kubernetes docs' task "Assign Memory Resources to Containers and
// Pods": memory-demo (150M under 200Mi) runs, memory-demo-2 (250M under
// 100Mi) is OOMKilled.
// startMemoryDemos starts the pods of the Kubernetes docs' task "Assign
// Memory Resources to Containers and Pods": memory-demo (150M under a
// 200Mi limit) and memory-demo-2 (250M under 100Mi), and waits until
// memory-demo-2 ended, which it checks was OOMKilled.
func startMemoryDemos(t *testing.T, r *Runtime) (demo, demo2 string) {
	t.Helper()
	sb := runSandbox(t, r, "memory-demo", "uid-1", nil)
	demo = createLimited(t, r, sb, "memory-demo-ctr", "polinux/stress", 200<<20, "stress", "--vm", "1", "--vm-bytes", "150M", "--vm-hang", "1")
	startContainer(t, r, demo)
	sb2 := runSandbox(t, r, "memory-demo-2", "uid-2", nil)
	demo2 = createLimited(t, r, sb2, "memory-demo-2-ctr", "polinux/stress", 100<<20, "stress", "--vm", "1", "--vm-bytes", "250M", "--vm-hang", "1")
	startContainer(t, r, demo2)
	waitDone(t, r, demo2)
	st := containerStatus(t, r, demo2)
	assert.Equal(t, int32(ExitCodeSIGKILL), st.ExitCode)
	assert.Equal(t, ReasonOOMKilled, st.Reason)
	return demo, demo2
}

func TestStressAsInTheMemoryDocs(t *testing.T) {
	r := fixtureConfig(t, Config{})
	demo, _ := startMemoryDemos(t, r)

	waitRunningUtility(t, r, demo, "stress", 1)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, demo).State)
	resp := execIn(t, r, demo, "stress", "--io", "1")
	assert.Equal(t, int32(1), resp.ExitCode, "the hogs it does not have (io, hdd) answer a usage error")
	// An exec over the limit kills the whole container, as memory.oom.group does.
	resp = execIn(t, r, demo, "stress", "--vm", "1", "--vm-bytes", "60M")
	assert.Equal(t, int32(ExitCodeSIGKILL), resp.ExitCode)
	waitDone(t, r, demo)
	assert.Equal(t, ReasonOOMKilled, containerStatus(t, r, demo).Reason)
}

func TestMemoryLimitOOMKillsADoublingVariable(t *testing.T) {
	r := fixtureConfig(t, Config{})
	sb := runSandbox(t, r, "web", "uid-1", nil)
	const limit = 64 << 20
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	c := createLimited(t, r, sb, "app", "busybox:1.36", limit, "sh", "-c", `x=a; while :; do x=$x$x; done`)
	startContainer(t, r, c)
	waitDone(t, r, c)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	st := containerStatus(t, r, c)
	assert.Equal(t, int32(ExitCodeSIGKILL), st.ExitCode)
	assert.Equal(t, ReasonOOMKilled, st.Reason)
	r.mu.Lock()
	peak := r.containers[c].running.Peak.Load()
	r.mu.Unlock()
	assert.Greater(t, peak, int64(limit))
	assert.LessOrEqual(t, peak, int64(2*limit+1<<20), "killed within a factor 2 of the limit")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(8*limit), "the heap never grew far past the limit")

	assert.Equal(t, int64(DefaultContainerMemory), (&sandboxproc.Limits{}).MemoryMax(), "without a limit, the default one")
}

// TestMemoryLimitChargesDefinitionsAndBraceCopies: what a script keeps
// outside its variables is charged with them. Each of these grew the
// runtime's heap by gigabytes in a 64 MiB container, never killed: 64 KiB
// aliases, functions defined by eval or in a sourced file, and a brace
// expansion's 16000 copies of a 64 KiB word. Each is OOM-killed now (here
// in an 8 MiB container: fewer turns of the loops, under -race too), with
// the runtime's heap far below where it went.
func TestMemoryLimitChargesDefinitionsAndBraceCopies(t *testing.T) {
	const x64k = `x=a; i=0; while [ $i -lt 16 ]; do x=$x$x; i=$((i+1)); done; i=0; `
	for name, script := range map[string]string{
		"aliases":        x64k + `while :; do alias a$i="$x"; i=$((i+1)); done`,
		"eval functions": x64k + `while :; do eval "f$i() { : $x; }"; i=$((i+1)); done`,
		// The file is rewritten, not grown: it is the functions that grow.
		"sourced functions": x64k + `while :; do echo "f$i() { : $x; }" > /tmp/f; . /tmp/f; i=$((i+1)); done`,
		"brace copies":      x64k + `eval ': {1..16000}'$x`,
	} {
		t.Run(name, func(t *testing.T) {
			st, peak := runUnderHeapBound(t, script, 0)
			assert.Equal(t, int32(ExitCodeSIGKILL), st.ExitCode)
			assert.Equal(t, ReasonOOMKilled, st.Reason)
			t.Logf("heap at most %d MiB above its start", peak>>20)
		})
	}
	// What the charges leave as it was: a word of braces and a variable
	// (now with its check), an alias, a function of an eval, unset -f.
	r := fixtureConfig(t, Config{})
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "app", "sleep", "3600")
	startContainer(t, r, c)
	resp := execIn(t, r, c, "sh", "-c", `x=1; echo {a,b}$x {1..3} "{a,b}"; alias hi='echo hi'; eval 'f() { echo f$1; }'; f 2; unset -f f; f 3 || echo gone`)
	assert.Equal(t, "a1 b1 1 2 3 {a,b}\nf2\ngone\n", string(resp.Stdout), string(resp.Stderr))
}

// heapBound is how far the runtime's heap may grow while one script runs
// in a container of heapTestLimit: far below the gigabytes the vectors of
// TestMemoryLimitChargesDefinitionsAndBraceCopies reached, far above what
// the limit lets live (with its garbage).
const heapTestLimit, heapBound = 8 << 20, 256 << 20

// runUnderHeapBound runs script in a container of heapTestLimit, on a
// runtime of its own, sampling the heap until the container ends (or, if
// stopAfter is not 0, until it is stopped then), and fails the test,
// stopping the container, if the heap grows past heapBound. It returns the
// container's status and the heap's peak above its start.
func runUnderHeapBound(t *testing.T, script string, stopAfter time.Duration) (*runtimeapi.ContainerStatus, uint64) {
	t.Helper()
	r := fixtureConfig(t, Config{})
	sb := runSandbox(t, r, "web", "uid-1", nil)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	c := createLimited(t, r, sb, "app", "busybox:1.36", heapTestLimit, "sh", "-c", script)
	startContainer(t, r, c)
	r.mu.Lock()
	done := r.containers[c].done
	r.mu.Unlock()
	stop := func() {
		_, _ = r.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: c, Timeout: 0})
	}
	var deadline <-chan time.Time
	if stopAfter > 0 {
		deadline = time.After(stopAfter)
	}
	var peak uint64
	for ended := false; !ended; {
		select {
		case <-done:
			ended = true
		case <-deadline:
			stop()
			deadline = nil
		case <-time.After(20 * time.Millisecond):
		}
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		peak = max(peak, m.HeapAlloc)
		if peak > before.HeapAlloc+heapBound {
			stop()
			require.Fail(t, "the heap grew past its bound with the container still running", "%d MiB, script %q", (peak-before.HeapAlloc)>>20, script)
		}
	}
	return containerStatus(t, r, c), peak - min(peak, before.HeapAlloc)
}

// FuzzMemoryStaysUnderTheLimit: whatever a script keeps (variables,
// aliases, functions, buffers, a word's copies), the runtime's heap stays
// within heapBound while it runs in a container of heapTestLimit, for at
// most a second: a script past its limit is OOM-killed before the heap
// gets there. Its seeds are the doubling variable and a brace expansion's
// copies (the other vectors: TestMemoryLimitChargesDefinitionsAndBraceCopies).
//
//	go test -run '^$' -fuzz FuzzMemoryStaysUnderTheLimit -fuzztime 5m ./mylib/fakeruntime/
func FuzzMemoryStaysUnderTheLimit(f *testing.F) {
	f.Add(`x=a; while :; do x=$x$x; done`)
	f.Add(`x=$(printf '%65536s' a); eval ': {1..16000}'$x`)
	f.Fuzz(func(t *testing.T, script string) {
		if len(script) > 4096 {
			return // a script's own size is bounded elsewhere (MaxScriptBytes)
		}
		runUnderHeapBound(t, script, time.Second)
	})
}

func TestMemoryLimitCountsTheWritableLayer(t *testing.T) {
	r := fixtureConfig(t, Config{})
	sb := runSandbox(t, r, "web", "uid-1", nil)
	const limit = 8 << 20
	c := createLimited(t, r, sb, "app", "busybox:1.36", limit, "sh", "-c",
		`echo 0123456789abcdef > /tmp/f; while :; do cat /tmp/f /tmp/f > /tmp/g; cat /tmp/g > /tmp/f; done`)
	startContainer(t, r, c)
	waitDone(t, r, c)
	st := containerStatus(t, r, c)
	assert.Equal(t, ReasonOOMKilled, st.Reason)
	r.mu.Lock()
	rootfs := filepath.Join(r.containers[c].dir, "rootfs")
	r.mu.Unlock()
	var size int64
	for _, f := range []string{"tmp/f", "tmp/g"} {
		if fi, err := os.Stat(filepath.Join(rootfs, f)); err == nil {
			size += fi.Size()
		}
	}
	assert.LessOrEqual(t, size, int64(2*limit), "the files stopped growing at the limit")

	// Removing files gives the memory back.
	c = createLimited(t, r, sb, "tidy", "busybox:1.36", limit, "sh", "-c",
		`i=0; x=0123456789abcdef; while [ ${#x} -lt 1048576 ]; do x=$x$x; done
while [ $i -lt 40 ]; do echo $x > /tmp/f$i; rm /tmp/f$i; i=$((i+1)); done`)
	startContainer(t, r, c)
	waitDone(t, r, c)
	assert.Equal(t, ReasonCompleted, containerStatus(t, r, c).Reason, "40 MiB written, never more than 3 MiB at once")
}

// createWith creates a busybox container running sleep with env and a
// working directory.
func createWith(t *testing.T, r *Runtime, sandboxID, name, workDir string, env map[string]string) string {
	t.Helper()
	cfg := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		Command: []string{"sleep", "3600"}, WorkingDir: workDir}
	for k, v := range env {
		cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: k, Value: []byte(v)})
	}
	resp, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID, Config: cfg})
	require.NoError(t, err)
	startContainer(t, r, resp.ContainerId)
	return resp.ContainerId
}

func TestHostFactsStayHidden(t *testing.T) {
	host := t.TempDir()
	t.Setenv("HOME", host)
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createWith(t, r, sb, "app", "/srv/app", nil)
	r.mu.Lock()
	rootfs := filepath.Join(r.containers[c].dir, "rootfs")
	r.mu.Unlock()
	require.NoError(t, os.Symlink("srv/app", filepath.Join(rootfs, "data"))) // a link of the container's, absent on the host

	for _, tc := range []struct{ script, out string }{
		{`pwd; pwd -P; cd /data && pwd && pwd -P`, "/srv/app\n/srv/app\n/data\n/srv/app\n"},
		{`PWD=/proc/self/cwd pwd -P`, "/srv/app\n"},
		{`echo ~ ~root ~nobody ~bin/x "$HOME" "$UID" "$EUID" "$GID"`, "/root /root ~nobody ~bin/x /root 0 0 0\n"},
	} {
		resp := execIn(t, r, c, "sh", "-c", tc.script)
		assert.Equal(t, tc.out, string(resp.Stdout), "%s: %s", tc.script, resp.Stderr)
		assert.Equal(t, int32(0), resp.ExitCode, tc.script)
	}
	require.NoError(t, os.WriteFile(filepath.Join(rootfs, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n"), 0o644))
	resp := execIn(t, r, c, "sh", "-c", `echo ~app ~root ~nobody`)
	assert.Equal(t, "/home/app /root ~nobody\n", string(resp.Stdout), "as the container's /etc/passwd says")

	// . and source look in the container only, never in the host's PATH.
	require.NoError(t, os.WriteFile(filepath.Join(host, "lib.sh"), []byte("echo from the host\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(rootfs, "usr/lib/sh"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(rootfs, "usr/lib/sh/lib.sh"), []byte("echo from the container; sleep 60 &\n"), 0o644))
	resp = execIn(t, r, c, "sh", "-c", `PATH=`+host+`; . lib.sh`)
	assert.NotZero(t, resp.ExitCode)
	assert.NotContains(t, string(resp.Stdout)+string(resp.Stderr), "host")
	resp = execIn(t, r, c, "sh", "-c", `PATH=/nowhere:/usr/lib/sh; . lib.sh; source /usr/lib/sh/lib.sh`)
	assert.Equal(t, "from the container\nfrom the container\n", string(resp.Stdout), string(resp.Stderr))
	require.NoError(t, os.WriteFile(filepath.Join(rootfs, "tmp/bash.sh"), []byte("cat <(echo x)\n"), 0o644))
	resp = execIn(t, r, c, "sh", "-c", `. /tmp/bash.sh; eval 'cat <(echo x)'; trap 'cat <(echo x)' EXIT`)
	assert.Empty(t, resp.Stdout, "no bash-only syntax, which would make a FIFO on the host")
	assert.Equal(t, 3, strings.Count(string(resp.Stderr), "\n"), string(resp.Stderr))
}

func TestTMPDIROpensNothingOnTheHost(t *testing.T) {
	canary := t.TempDir()
	t.Setenv("TMPDIR", canary) // the runtime's own temporary directory
	require.NoError(t, os.WriteFile(filepath.Join(canary, "sh-interp-z"), []byte("host secret\n"), 0o600))
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	for _, env := range []map[string]string{nil, {"TMPDIR": "/etc"}, {"TMPDIR": canary}} {
		c := createWith(t, r, sb, fmt.Sprintf("app-%d", len(env["TMPDIR"])), "", env)
		resp := execIn(t, r, c, "sh", "-c", `echo "[$TMPDIR]"; for d in /etc "$TMPDIR" `+canary+`; do
  echo x > $d/sh-interp-y; cat < $d/sh-interp-z; cat < $d/sh-interp-y
done 2>/dev/null; true`)
		assert.Equal(t, "["+env["TMPDIR"]+"]\n", strings.SplitAfter(string(resp.Stdout), "\n")[0], "the script sees its own TMPDIR")
		assert.NotContains(t, string(resp.Stdout), "host secret")
		_, err := os.Stat(filepath.Join(canary, "sh-interp-y"))
		assert.ErrorIs(t, err, fs.ErrNotExist, "nothing written on the host (TMPDIR %q)", env["TMPDIR"])
		_, err = os.Stat("/etc/sh-interp-y")
		assert.ErrorIs(t, err, fs.ErrNotExist)
	}
}

func TestMemoryLimitChecksAssignmentsWithoutCommands(t *testing.T) {
	r := fixtureConfig(t, Config{})
	sb := runSandbox(t, r, "web", "uid-1", nil)
	// 16 MiB in 24 doublings and no command at all, under a 1 MiB limit.
	c := createLimited(t, r, sb, "chain", "busybox:1.36", 1<<20, "sh", "-c", "x=a; x=$x$x"+strings.Repeat(" && x=$x$x", 23))
	startContainer(t, r, c)
	waitDone(t, r, c)
	assert.Equal(t, ReasonOOMKilled, containerStatus(t, r, c).Reason)
	c = createLimited(t, r, sb, "loop", "busybox:1.36", 1<<20, "sh", "-c", `x=a; while x=$x$x; do x=$x$x; done`)
	startContainer(t, r, c)
	waitDone(t, r, c)
	assert.Equal(t, ReasonOOMKilled, containerStatus(t, r, c).Reason)

	// The checks keep $? and set -e as they were.
	c = createContainer(t, r, sb, "app", "sleep", "3600")
	startContainer(t, r, c)
	resp := execIn(t, r, c, "sh", "-c", `x=$(false); echo $?; ! y=1; echo $?; set -e; if z=$(false); then echo no; else echo yes; fi; w=$(exit 3); echo never`)
	assert.Equal(t, "1\n1\nyes\n", string(resp.Stdout), string(resp.Stderr))
	assert.Equal(t, int32(3), resp.ExitCode)
}

func TestDeeplyNestedScriptsAreRefusedNotParsed(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	nested := strings.Repeat("(", 1<<20) + "true" + strings.Repeat(")", 1<<20) // would take the parser ~2 GB of stack
	c := createWith(t, r, sb, "app", "", map[string]string{"S": nested})
	for _, cmd := range [][]string{{"sh", "-c", nested}, {"sh", "-c", `eval "$S"; echo "eval=$?"`}} {
		resp := execIn(t, r, c, cmd...)
		assert.Contains(t, string(resp.Stderr), "Argument list too long")
	}
	resp := execIn(t, r, c, "sh", "-c", `eval "$S"; echo "eval=$?"`)
	assert.Equal(t, "eval=1\n", string(resp.Stdout), "eval fails, the shell goes on")
	resp = execIn(t, r, c, "sh", "-c", strings.Repeat("(", 1000)+"echo deep"+strings.Repeat(")", 1000))
	assert.Equal(t, "deep\n", string(resp.Stdout), string(resp.Stderr))
}

func TestInteractiveShellRefusesADeeplyNestedCommand(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "app", "sleep", "3600")
	startContainer(t, r, c)
	in := "echo first\n" + strings.Repeat("(", 1<<20) + "true" + strings.Repeat(")", 1<<20) + "\necho never\n"
	var out, errOut lockedBuffer
	code, err := r.execStreams(context.Background(), c, []string{"sh"}, strings.NewReader(in), &out, &errOut, false)
	require.NoError(t, err)
	assert.Equal(t, 2, code)
	assert.Equal(t, "first\n", string(out.Bytes()))
	assert.Equal(t, "sh: script nested too deep\n", string(errOut.Bytes()), "refused by its depth before its length")
}

// makeParens is a script prefix that leaves in $p a script longer than
// 128 KiB, and inputs of less than 128 KiB that nest the parser past
// maxParseFrames: "(" for an arithmetic expression in $a, "$(" in $d,
// "( " in $t. The script builds them: one argument that long does not
// fit in a request to the sandbox process.
//
// In the sandbox process (full), $p is the 327,680 "(" (which
// through `builtin eval "$p"` overflowed its 256 MB stack: the
// interpreter's eval parses bash, where "((" opens an arithmetic
// expression) and the others are 40,960 long, as deep as 128 KiB nest (a
// million frames and more). In the test binary, where an overflow would
// end every test, even a 1 GB stack does not hold them: $p is 204,800
// bytes of "true;", and the others are shorter (5,120 arithmetic "(",
// 10,240 "$(", 2,560 "( "), still refused by the same bounds, but a
// regression parses them in under 200 MB of stack and fails the test
// instead of crashing it.
func makeParens(full bool) string {
	script := `p='(((((((((('; `
	n := map[string]int{"p": 15, "a": 12, "d": 12, "t": 12} // doublings of ten
	if !full {
		script = `p='true;true;true;true;true;true;true;true;true;true;'; `
		n = map[string]int{"p": 12, "a": 9, "d": 10, "t": 8}
	}
	script += `a='(((((((((('; d='$($($($($($($($($($('; t='( ( ( ( ( ( ( ( ( ( '; `
	for _, v := range []string{"p", "a", "d", "t"} {
		script += fmt.Sprintf(`i=0; while [ $i -lt %d ]; do %s=$%s$%s; i=$((i+1)); done; `, n[v], v, v, v)
	}
	return script
}

// parserVectors are the ways into the interpreter's parser that a script
// can take, each with what its refusal prints.
var parserVectors = []struct{ name, script, stderr string }{
	{"eval", `eval "$p"`, "sh: eval: script too long"},
	{"builtin eval", `builtin eval "$p"`, "sh: eval: script too long"},
	{"command eval", `command eval "$p"`, "sh: eval: script too long"},
	{"command -- eval", `command -- eval "$p"`, "sh: eval: script too long"},
	{"nested wrappers", `builtin command builtin eval "$p"`, "sh: eval: script too long"},
	{"builtin source", `printf %s "$p" > /tmp/p; builtin source /tmp/p`, "script too long"},
	{"command .", `printf %s "$p" > /tmp/p; command . /tmp/p`, "script too long"},
	{"builtin trap", `builtin trap "$p" EXIT`, "sh: trap: script too long"},
	{"trap --", `trap -- "$p" EXIT`, "sh: trap: script too long"},
	{"trap -", `trap - "$p" EXIT`, "sh: trap: script too long"},
	{"sh -c", `sh -c "$p"`, "sh: script too long"},
	{"here-document", `sh -c "$(printf 'cat <<E\n%s\nE\n' "$p")"`, "sh: script too long"},
	{"deep eval", `builtin eval "echo \$(($a))"`, "sh: eval: script nested too deep"},
	{"deep trap", `command trap "echo \$(($a))" EXIT`, "sh: trap: script nested too deep"},
	{"deep sh -c", `sh -c "echo \$(($a))"`, "sh: script nested too deep"},
	{"deep source", `printf 'echo %s' "$d" > /tmp/d; builtin . /tmp/d`, "script nested too deep"},
	{"deep here-document", `sh -c "$(printf 'cat <<E\n%s\nE\n' "$d")"`, "sh: script nested too deep"},
	{"deep alias", `builtin alias x="$d"`, "sh: alias: script nested too deep"},
	{"deep unset", `read -a arr <<E
x
E
builtin unset "arr[$a]"`, "sh: unset: script nested too deep"},
	{"deep test", `builtin test $t`, "sh: test: expression nested too deep"},
	{"deep export option", `export "-$d"`, `declare: invalid option "-$"`},
	{"exec eval", `exec eval "$p"`, "eval: command not found"},
}

// TestEveryParserEntryIsBounded: the attack and a deep one
// through each way into the parser fail that command alone, with one
// clear line; the shell goes on, the container runs on, and so does a
// bystander. Before the bound applied to every entry, `builtin eval
// "$p"` parsed every level (in the sandbox process: a fatal stack
// overflow; here, with makeParens's smaller inputs and a 1 GB stack, a
// parse error, not the bound's).
func TestEveryParserEntryIsBounded(t *testing.T) {
	r, _ := fixture(t)
	by := runSandbox(t, r, "bystander", "uid-bystander", nil)
	bystander := createContainer(t, r, by, "bystander", "sleep", "3600")
	startContainer(t, r, bystander)
	sb := runSandbox(t, r, "attacker", "uid-attacker", nil)
	c := createContainer(t, r, sb, "app", "sleep", "3600")
	startContainer(t, r, c)
	for _, v := range parserVectors {
		t.Run(v.name, func(t *testing.T) {
			resp := execIn(t, r, c, "sh", "-c", makeParens(false)+v.script+"\necho after=$?")
			assert.Contains(t, string(resp.Stderr), v.stderr)
			assert.Equal(t, 1, strings.Count(string(resp.Stderr), "\n"), "one line: %q", resp.Stderr)
			if v.name != "exec eval" { // exec ends the shell
				assert.Regexp(t, `^after=[12]\n$`, string(resp.Stdout), "the command failed, the shell went on")
			}
		})
	}
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, c).State)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, bystander).State)
	// What is within the bounds still runs behind the wrappers.
	resp := execIn(t, r, c, "sh", "-c", `builtin eval 'echo one'; command eval 'echo two'; echo 'echo three' > /tmp/s; builtin source /tmp/s; builtin trap 'echo four' EXIT`)
	assert.Equal(t, "one\ntwo\nthree\nfour\n", string(resp.Stdout), string(resp.Stderr))
	resp = execIn(t, r, c, "sh", "-c", `builtin eval "$(i=0; while [ $i -lt 500 ]; do printf '('; i=$((i+1)); done)echo deep$(i=0; while [ $i -lt 500 ]; do printf ')'; i=$((i+1)); done)"`)
	assert.Equal(t, "deep\n", string(resp.Stdout), string(resp.Stderr))
}

// TestAParserAttackInTheSandboxProcessKillsNoContainer runs the vectors in
// the sandbox process, whose stack is 256 MB: a parse that escaped its
// bound there would end the process (every container of every pod: exit
// 137) instead of crashing this test binary. Only the attacker's exec
// fails; the bystander keeps its container ID and runs on.
func TestAParserAttackInTheSandboxProcessKillsNoContainer(t *testing.T) {
	r := sandboxRuntime(t)
	by := runSandbox(t, r, "bystander", "uid-bystander", nil)
	bystander := createContainer(t, r, by, "bystander", "sh", "-c", "while true; do sleep 1; done")
	startContainer(t, r, bystander)
	sb := runSandbox(t, r, "attacker", "uid-attacker", nil)
	c := createContainer(t, r, sb, "app", "sleep", "3600")
	startContainer(t, r, c)
	pid, byPID := sandboxPID(t, r, sb), sandboxPID(t, r, by)
	for _, v := range parserVectors {
		resp, err := r.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: c, Cmd: []string{"sh", "-c", makeParens(true) + v.script}, Timeout: 60})
		require.NoError(t, err, v.name)
		assert.NotZero(t, resp.ExitCode, v.name)
		assert.Contains(t, string(resp.Stderr), v.stderr, v.name)
	}
	require.Equal(t, pid, sandboxPID(t, r, sb), "the attacker's sandbox process did not die")
	require.Equal(t, byPID, sandboxPID(t, r, by), "nor the bystander's")
	st := containerStatus(t, r, bystander)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, st.State)
	assert.Equal(t, bystander, st.Id, "the bystander keeps its container")
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, c).State)
}

// TestBuiltinPwdPResolvesInTheContainer: pwd -P behind builtin or command
// resolves the shell's directory in the container, as pwd -P does, not a
// PWD the script chose on the host (the sandbox process's chroot holds
// every container's files: an oracle of other pods' paths).
func TestBuiltinPwdPResolvesInTheContainer(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "app", "sleep", "3600")
	startContainer(t, r, c)
	resp := execIn(t, r, c, "sh", "-c", `cd /tmp; PWD=/proc/self/cwd builtin pwd -P; PWD=/proc/self/cwd command pwd -P; PWD=/proc/self/cwd builtin command -- pwd -L -P`)
	assert.Equal(t, "/tmp\n/tmp\n/tmp\n", string(resp.Stdout), string(resp.Stderr))
}
