package fakeruntime

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/fakeruntime/sandboxproc"
)

func TestTailPrintsTheLastLines(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "app", "sleep", "3600")
	startContainer(t, r, c)
	require.Equal(t, int32(0), execIn(t, r, c, "sh", "-c", "printf 'a\\nb\\nc\\nd\\n' > /tmp/f").ExitCode)

	for cmd, want := range map[string]string{
		"tail -n 2 /tmp/f":                "c\nd\n",
		"tail -n2 /tmp/f":                 "c\nd\n",
		"tail -3 /tmp/f":                  "b\nc\nd\n",
		"tail /tmp/f":                     "a\nb\nc\nd\n",
		"tail -n 0 /tmp/f":                "",
		"printf 'x\\ny' | tail -n 1":      "y",
		"tail -n 1 /tmp/f /tmp/f":         "==> /tmp/f <==\nd\n\n==> /tmp/f <==\nd\n",
		"tail -n 1 /tmp/missing; echo $?": "1\n",
	} {
		resp := execIn(t, r, c, "sh", "-c", cmd)
		assert.Equal(t, want, string(resp.Stdout), cmd)
	}
	resp := execIn(t, r, c, "tail", "/tmp/missing")
	assert.Equal(t, int32(1), resp.ExitCode)
	assert.Equal(t, "tail: cannot open '/tmp/missing' for reading: No such file or directory\n", string(resp.Stderr))
	resp = execIn(t, r, c, "tail", "-n", "x", "/tmp/f")
	assert.Equal(t, int32(1), resp.ExitCode)
	assert.Contains(t, string(resp.Stderr), "invalid number of lines")
}

// TestTailFollowsByNameAsTheDocsSidecar is the logshipper of the
// documentation's "Sidecar Containers" Job: `tail -F /opt/logs.txt` on a
// file that does not exist yet, printing what is appended once it does.
func TestTailFollowsByNameAsTheDocsSidecar(t *testing.T) {
	r, clk := fixture(t)
	sb, err := r.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "myjob", Namespace: "default", Uid: "u"}, LogDirectory: t.TempDir()}})
	require.NoError(t, err)
	created, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "logshipper"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		LogPath: "logshipper/0.log", Command: []string{"sh", "-c", "tail -F /tmp/logs.txt"}}})
	require.NoError(t, err)
	c := created.ContainerId
	startContainer(t, r, c)
	waitRunningUtility(t, r, c, "tail", 1)

	// Each poll steps the clock by the poll interval, so that tail's next
	// timer fires whenever it is set. A minute: CI's two busy cores once
	// took more than 10 s to show even tail's first line.
	logs := func(want string) {
		t.Helper()
		var last atomic.Value // the log the last poll read, for the failure
		last.Store("")
		if !assert.Eventually(t, func() bool {
			clk.Step(sandboxproc.TailPollInterval)
			got := logOf(t, r, c)
			last.Store(got)
			return got == want
		}, time.Minute, 10*time.Millisecond) {
			t.Fatalf("log: %q, want %q", last.Load(), want)
		}
	}
	require.Equal(t, int32(0), execIn(t, r, c, "sh", "-c", "echo logging > /tmp/logs.txt").ExitCode)
	logs("tail: cannot open '/tmp/logs.txt' for reading: No such file or directory\n" +
		"tail: '/tmp/logs.txt' has appeared;  following new file\nlogging\n")

	require.Equal(t, int32(0), execIn(t, r, c, "sh", "-c", "echo more >> /tmp/logs.txt").ExitCode)
	logs("tail: cannot open '/tmp/logs.txt' for reading: No such file or directory\n" +
		"tail: '/tmp/logs.txt' has appeared;  following new file\nlogging\nmore\n")

	// Truncated and written again: followed from the start of the new file.
	require.Equal(t, int32(0), execIn(t, r, c, "sh", "-c", "echo new > /tmp/logs.txt").ExitCode)
	logs("tail: cannot open '/tmp/logs.txt' for reading: No such file or directory\n" +
		"tail: '/tmp/logs.txt' has appeared;  following new file\nlogging\nmore\n" +
		"tail: /tmp/logs.txt: file truncated\nnew\n")
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, c).State)
}

// TestTailReadsTheEndOfALargeFile: tail -n 1 of a 600 MB file prints its
// last line (it read the first 128 KiB, and printed their last line); a
// pipe's last line comes after its first 128 KiB too.
func TestTailReadsTheEndOfALargeFile(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createLimited(t, r, sb, "app", "busybox:1.36", 2<<30, "sleep", "3600")
	startContainer(t, r, c)
	// Sparse: 600 MB that take no disk, written in the container's view
	// from here (a script would take minutes to write them).
	r.mu.Lock()
	view := r.containers[c].fs
	r.mu.Unlock()
	f, _, err := view.OpenFile("big.log", os.O_CREATE|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte(strings.Repeat("first lines\n", 20000)), 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("\nsecond to last\nlast line\n"), 600<<20)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	resp := execIn(t, r, c, "tail", "-n", "1", "/big.log")
	assert.Equal(t, "last line\n", string(resp.Stdout), string(resp.Stderr))
	resp = execIn(t, r, c, "tail", "-n", "2", "/big.log")
	assert.Equal(t, "second to last\nlast line\n", string(resp.Stdout), string(resp.Stderr))

	resp = execIn(t, r, c, "sh", "-c", `x=yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy; i=0; while [ $i -lt 5000 ]; do echo $x; i=$((i+1)); done | { cat; echo end; } | tail -n 1`)
	assert.Equal(t, "end\n", string(resp.Stdout), string(resp.Stderr))
	assert.Equal(t, "abc", string(sandboxproc.LastLinesOf(strings.NewReader(strings.Repeat("x", 3*sandboxproc.MaxTailBytes)+"\nabc"), 1)))
	assert.Len(t, sandboxproc.LastLinesOf(strings.NewReader(strings.Repeat("x", 3*sandboxproc.MaxTailBytes)), 1), sandboxproc.MaxTailBytes, "a line longer than what tail keeps: its end")
}
