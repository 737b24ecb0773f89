package chaptertest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
)

// script is a stand-in for a chapter: it prints its HOME and KUBECONFIG,
// three numbered lines, then runs until Ctrl-C, on which it says bye and
// exits 3. The trap comes first, so a Ctrl-C sent as soon as the first line
// shows always finds it in place.
const script = `trap 'echo bye; exit 3' INT
echo "HOME=$HOME KUBECONFIG=${KUBECONFIG-unset}"
echo line 1; echo line 2; echo line 3
echo to stderr >&2
while :; do sleep 0.05; done`

func TestStartGivesACleanEnvironmentAndStopReturnsTheExitCode(t *testing.T) {
	t.Setenv("KUBECONFIG", "/from/the/test")
	p := Start(t, "sh", "-c", script)
	line := p.WaitForOutput(`HOME=\S+ KUBECONFIG=\S+`, 10*time.Second)
	assert.Regexp(t, `^HOME=`+regexp.QuoteMeta(os.TempDir())+`\S+ KUBECONFIG=unset$`, line)
	p.WaitForLog("to stderr", 10*time.Second)
	assert.True(t, p.Running())
	assert.Equal(t, 3, p.Stop())
	assert.False(t, p.Running())
	assert.Contains(t, p.Stdout(), "bye\n")
	assert.Equal(t, "to stderr\n", p.Stderr())
}

func TestStartWithEnvUsesTheGivenEnvironment(t *testing.T) {
	p := StartWithEnv(t, []string{"PATH=" + os.Getenv("PATH"), "HOME=/home/learner", "KUBECONFIG=/admin.kubeconfig"}, "sh", "-c", script)
	assert.Equal(t, "HOME=/home/learner KUBECONFIG=/admin.kubeconfig", p.WaitForOutput(`HOME=.*`, 10*time.Second))
	assert.Equal(t, 3, p.Stop())
}

func TestWaitForSubmatchReturnsTheNthMatchAndItsGroups(t *testing.T) {
	p := Start(t, "sh", "-c", script)
	assert.Equal(t, []string{"line 1", "1"}, p.WaitForSubmatch(`line (\d)`, 0, 10*time.Second))
	assert.Equal(t, []string{"line 3", "3"}, p.WaitForSubmatch(`line (\d)`, 2, 10*time.Second))
	assert.Equal(t, "line 1", p.WaitForOutput(`line \d`, 10*time.Second))
	assert.Equal(t, 3, p.Stop())
}

func TestWaitReturnsTheExitCode(t *testing.T) {
	p := Start(t, "sh", "-c", "echo done; exit 4")
	assert.Equal(t, 4, p.Wait(10*time.Second))
	assert.Equal(t, "done\n", p.Stdout())
}

func TestRun(t *testing.T) {
	t.Setenv("KUBECONFIG", "/from/the/test")
	stdout, stderr, code := Run(t, "sh", "-c", `echo "out ${KUBECONFIG-unset}"; echo err >&2; exit 5`)
	assert.Equal(t, "out unset\n", stdout)
	assert.Equal(t, "err\n", stderr)
	assert.Equal(t, 5, code)

	stdout, _, code = Run(t, "sh", "-c", "echo ok")
	assert.Equal(t, "ok\n", stdout)
	assert.Equal(t, 0, code)
}

func TestRunOKFailsOnANonZeroExit(t *testing.T) {
	stdout, stderr := RunOK(t, "sh", "-c", "echo ok; echo log >&2")
	assert.Equal(t, "ok\n", stdout)
	assert.Equal(t, "log\n", stderr)

	got := failures(t, func(tb testing.TB) { RunOK(tb, "sh", "-c", "echo out; echo err >&2; exit 1") })
	assert.Equal(t, []string{"sh -c echo out; echo err >&2; exit 1: exit code 1\nstdout:\nout\n\nstderr:\nerr\n"}, got)
}

// recorder is a testing.TB whose Fatalf and Errorf are recorded; Fatalf
// and FailNow end the goroutine, as the real ones do.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) FailNow() { runtime.Goexit() } // what testify's require calls

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}

// failures runs f with a recorder in its own goroutine, as a test would,
// and returns what it failed with.
func failures(t *testing.T, f func(tb testing.TB)) []string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); f(r) }()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func TestWaitForFailsWhenTheProcessExitsFirst(t *testing.T) {
	got := failures(t, func(tb testing.TB) {
		p := Start(tb, "sh", "-c", "echo line 1; exit 1")
		p.WaitForSubmatch(`line (\d)`, 1, 10*time.Second)
	})
	require.Len(t, got, 1)
	assert.Equal(t, `process exited (exit status 1) before its stdout matched "line (\\d)" (match 1)`, got[0])
}

func TestWaitForFailsAfterTheTimeout(t *testing.T) {
	got := failures(t, func(tb testing.TB) {
		p := Start(tb, "sh", "-c", script)
		p.WaitForLog("never", 200*time.Millisecond)
	})
	require.Len(t, got, 1)
	assert.Equal(t, `stderr did not match "never" (match 0) within 200ms`, got[0])
}

func TestWaitKillsAfterTheTimeout(t *testing.T) {
	var code int
	got := failures(t, func(tb testing.TB) {
		code = Start(tb, "sh", "-c", script).Wait(200 * time.Millisecond)
	})
	assert.Equal(t, -1, code)
	assert.Equal(t, []string{"process did not exit within 200ms"}, got)
}

func TestAddStaticPodCopiesTheManifest(t *testing.T) {
	state := t.TempDir()
	path := AddStaticPod(t, state, "yaml/static/static-web.yaml")
	assert.Equal(t, filepath.Join(state, "manifests", "static-web.yaml"), path)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	want, err := os.ReadFile("../../../yaml/static/static-web.yaml")
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
}

func TestMatchSectionLeavesOutCommandLines(t *testing.T) {
	readme := filepath.Join(t.TempDir(), "README.md")
	require.NoError(t, os.WriteFile(readme, []byte("# X\n\n## Run it\n\n```\n$ go run .\nstarted <node>\n…\nstopped\n```\n"), 0o600))
	MatchSection(t, readme, "Run it", "started n1\nworking\nstopped\n")

	got := failures(t, func(tb testing.TB) { MatchSection(tb, readme, "Run it", "started n1\n") })
	require.Len(t, got, 1)
	assert.True(t, strings.HasPrefix(got[0], `README section "Run it": `), got[0])
}

func TestCheckReadyConditions(t *testing.T) {
	cond := func(typ v1.NodeConditionType, status v1.ConditionStatus, reason string) v1.NodeCondition {
		return v1.NodeCondition{Type: typ, Status: status, Reason: reason}
	}
	healthy := &v1.Node{Status: v1.NodeStatus{Conditions: []v1.NodeCondition{
		cond(v1.NodeMemoryPressure, v1.ConditionFalse, "KubeletHasSufficientMemory"),
		cond(v1.NodeDiskPressure, v1.ConditionFalse, "KubeletHasNoDiskPressure"),
		cond(v1.NodePIDPressure, v1.ConditionFalse, "KubeletHasSufficientPID"),
		cond(v1.NodeReady, v1.ConditionTrue, "KubeletReady"),
	}}}
	assert.Equal(t, v1.NodeReady, CheckReadyConditions(t, healthy).Type)

	pressure := healthy.DeepCopy()
	pressure.Status.Conditions[1].Status = v1.ConditionTrue
	got := failures(t, func(tb testing.TB) { CheckReadyConditions(tb, pressure) })
	require.Len(t, got, 1)
	assert.Contains(t, got[0], "DiskPressure")

	noReady := healthy.DeepCopy()
	noReady.Status.Conditions = noReady.Status.Conditions[:3]
	assert.Len(t, failures(t, func(tb testing.TB) { CheckReadyConditions(tb, noReady) }), 1)
}

func TestReadTranscriptsKeepsEachRunAndTheStarts(t *testing.T) {
	readme := filepath.Join(t.TempDir(), "README.md")
	md := "<!-- walk: background name=k ready=\"^up\" -->\n```sh\ngo run ./chapters/x --a\n```\n\n" +
		"<!-- walk: run -->\n```console\n$ echo one\none\n```\n\n" +
		"<!-- walk: run -->\n```console\n$ echo one\ntwo\n$ true\n```\n"
	require.NoError(t, os.WriteFile(readme, []byte(md), 0o600))
	tr := ReadTranscripts(t, readme)
	assert.Equal(t, []string{"go run ./chapters/x --a"}, tr.Starts)
	assert.Equal(t, [][]string{{"one"}, {"two"}}, tr.Commands["echo one"])
	assert.Contains(t, tr.Commands, "true")
}

func TestFreePortCanBeListenedOn(t *testing.T) {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", FreePort(t)))
	require.NoError(t, err)
	l.Close()
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	took := Eventually(t, 10*time.Second, 10*time.Millisecond, "three calls", func() (bool, string) {
		calls++
		return calls == 3, fmt.Sprint(calls)
	})
	assert.Equal(t, 3, calls, "the first call at once, then one every interval")
	assert.Less(t, took, 5*time.Second)
	assert.Zero(t, EventuallyTrue(t, time.Second, time.Hour, "at once", func() bool { return true }).Round(time.Second))
}

func TestEventuallyFailsWithWhatItSawLast(t *testing.T) {
	calls := 0
	got := failures(t, func(tb testing.TB) {
		Eventually(tb, 100*time.Millisecond, 30*time.Millisecond, "the pod is Ready", func() (bool, string) {
			calls++
			return false, fmt.Sprintf("phase Pending (call %d)", calls)
		})
	})
	require.Len(t, got, 1)
	assert.Equal(t, fmt.Sprintf("the pod is Ready: not within 100ms; last seen: phase Pending (call %d)", calls), got[0])
	assert.GreaterOrEqual(t, calls, 3, "every interval until the timeout")
}
