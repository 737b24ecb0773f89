package fakeruntime

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
)

// TestAnExecWhoseClientWentAwayEnds: `kubectl exec -i … 'while :; do :;
// done'` whose client is killed: the streaming session's connection
// closes, and the exec's run is ended, as containerd kills an exec whose
// stream is gone; the container runs on. Before, the busy loop ran until
// the pod was deleted. In this process (its processes counted in the
// container's table), and in the sandbox process (its runs there).
func TestAnExecWhoseClientWentAwayEnds(t *testing.T) {
	t.Run("in the runtime's process", func(t *testing.T) {
		r, _ := fixture(t)
		c := createContainer(t, r, runSandbox(t, r, "web", "uid-1", nil), "app", "sh", "-c", "while true; do sleep 1000; done")
		startContainer(t, r, c)
		r.mu.Lock()
		table := &r.containers[c].running
		r.mu.Unlock()
		require.Eventually(t, func() bool { return table.Pids.Load() == 2 }, 10*time.Second, 10*time.Millisecond, "the main script and its sleep")
		abandonBusyExec(t, r, c, func() int { return int(table.Pids.Load()) - 2 })
	})
	t.Run("in the sandbox process", func(t *testing.T) {
		r := sandboxRuntime(t)
		sb := runSandbox(t, r, "web", "uid-1", nil)
		c := createContainer(t, r, sb, "app", "sh", "-c", "while true; do sleep 1000; done")
		startContainer(t, r, c)
		abandonBusyExec(t, r, c, func() int {
			r.sandbox.mu.Lock()
			pod := r.sandbox.pods[sb]
			r.sandbox.mu.Unlock()
			pod.mu.Lock()
			child := pod.child
			pod.mu.Unlock()
			child.mu.Lock()
			defer child.mu.Unlock()
			return len(child.runs) - 1 // the container's main script
		})
	})
}

// abandonBusyExec runs a busy loop in container c through the streaming
// server with stdin open, as kubectl exec -i does, then drops the
// client's connection, and checks that execs (how many of the container's
// execs run) comes back to 0 while the container runs on.
func abandonBusyExec(t *testing.T, r *Runtime, c string, execs func() int) {
	t.Helper()
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", mustParse(t, execURL(t, r, c, true, false, "sh", "-c", "echo looping; while :; do :; done")))
	require.NoError(t, err)
	stdin, _ := io.Pipe() // never closed: the client keeps its stdin open
	ctx, kill := context.WithCancel(context.Background())
	out := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: out, Stderr: io.Discard})
	}()
	require.Eventually(t, func() bool { return bytes.Contains(out.Bytes(), []byte("looping")) }, 30*time.Second, 10*time.Millisecond)
	assert.Equal(t, 1, execs(), "the exec runs")

	kill() // the client goes away: its connection closes
	<-done
	assert.Eventually(t, func() bool { return execs() == 0 }, 30*time.Second, 10*time.Millisecond, "the exec's run ended with its connection")
	assert.Equal(t, "CONTAINER_RUNNING", containerStatus(t, r, c).State.String(), "the container runs on")
}
