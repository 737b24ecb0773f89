package fakeruntime

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// waitAttached waits, bounded, until container id has n attached sessions.
func waitAttached(t *testing.T, r *Runtime, id string, n int) {
	t.Helper()
	r.mu.Lock()
	c, err := r.findContainer(id)
	r.mu.Unlock()
	require.NoError(t, err)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.io.mu.Lock()
		got := len(c.io.sessions)
		c.io.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions attached, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// stdioContainer creates and starts a busybox container with no command
// (its default: sh) and the stdin, stdinOnce and tty given, as the kubelet
// asks for `kubectl run -it` or `kubectl debug -it` (stdin, stdinOnce, tty).
func stdioContainer(t *testing.T, r *Runtime, sandboxID, name string, stdin, once, tty bool, logDir string) string {
	t.Helper()
	resp, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
			Stdin: stdin, StdinOnce: once, Tty: tty, LogPath: name + "/0.log"},
		SandboxConfig: &runtimeapi.PodSandboxConfig{LogDirectory: logDir}})
	require.NoError(t, err)
	startContainer(t, r, resp.ContainerId)
	return resp.ContainerId
}

func logSandbox(t *testing.T, r *Runtime, logDir string) string {
	t.Helper()
	resp, err := r.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1"}, LogDirectory: logDir}})
	require.NoError(t, err)
	return resp.PodSandboxId
}

// attach runs one attach session with stdin as the client's input and
// returns what it got on stdout and stderr.
func attach(t *testing.T, r *Runtime, id, stdin string, tty bool) (string, string) {
	t.Helper()
	resp, err := r.Attach(context.Background(), &runtimeapi.AttachRequest{ContainerId: id, Stdin: true, Stdout: true, Stderr: !tty, Tty: tty})
	require.NoError(t, err)
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", mustParse(t, resp.Url))
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	// The input is sent only once the session is attached, so that none
	// of the output it causes is missed.
	pr, pw := io.Pipe()
	opts := remotecommand.StreamOptions{Stdin: pr, Stdout: &out, Tty: tty}
	if !tty {
		opts.Stderr = &errOut
	}
	done := make(chan error, 1)
	go func() { done <- ex.StreamWithContext(context.Background(), opts) }()
	waitAttached(t, r, id, 1)
	_, err = pw.Write([]byte(stdin))
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	require.NoError(t, <-done)
	return out.String(), errOut.String()
}

func TestAttachToAShellWithStdinRunsWhatIsTyped(t *testing.T) {
	r, _ := fixture(t)
	logDir := t.TempDir()
	c := stdioContainer(t, r, logSandbox(t, r, logDir), "shell", true, false, false, logDir)

	out, errOut := attach(t, r, c, "x=5; echo hi\necho oops >&2\n", false)
	assert.Equal(t, "hi\n", out, "the session ends once the shell has read and run all of its input")
	assert.Equal(t, "oops\n", errOut)

	// Stdin stays open between sessions: the same shell, its variables kept.
	out, _ = attach(t, r, c, "echo $x\n", false)
	assert.Equal(t, "5\n", out)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, c).State)

	out, _ = attach(t, r, c, "exit 3\n", false)
	assert.Empty(t, out)
	st := containerStatus(t, r, c)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.State, "exit ends the container's main process")
	assert.EqualValues(t, 3, st.ExitCode)

	log, err := os.ReadFile(filepath.Join(logDir, "shell", "0.log"))
	require.NoError(t, err)
	assert.Contains(t, string(log), " stdout F hi\n")
	assert.Contains(t, string(log), " stderr F oops\n")
}

func TestAttachStdinOnceClosesStdinAfterTheFirstSession(t *testing.T) {
	r, _ := fixture(t)
	logDir := t.TempDir()
	c := stdioContainer(t, r, logSandbox(t, r, logDir), "once", true, true, false, logDir)

	out, _ := attach(t, r, c, "echo bye\n", false)
	assert.Equal(t, "bye\n", out)
	st := containerStatus(t, r, c)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.State, "the shell read EOF and exited; the session lasted until then")
	assert.EqualValues(t, 0, st.ExitCode)
}

func TestAttachWithATTYEchoesPromptsAndEndsLinesWithCRLF(t *testing.T) {
	r, _ := fixture(t)
	logDir := t.TempDir()
	c := stdioContainer(t, r, logSandbox(t, r, logDir), "debugger", true, false, true, logDir)

	// The first prompt is written when the shell starts, usually before
	// anyone attaches, as with `kubectl attach -it` ("If you don't see a
	// command prompt, try pressing enter."); an attach that comes first
	// sees it too (CI on a busy machine did).
	out, _ := attach(t, r, c, "\recho hx\x7fi\r", true)
	assert.Equal(t, "\r\n# echo hx\b \bi\r\nhi\r\n# ", strings.TrimPrefix(out, "# "))

	log, err := os.ReadFile(filepath.Join(logDir, "debugger", "0.log"))
	require.NoError(t, err)
	assert.Contains(t, string(log), " stdout F # echo hx\b \bi\n", "the log has what the terminal showed, with plain line ends")
}

func TestWithoutStdinAShellExitsAtOnceAndAttachedInputIsDropped(t *testing.T) {
	r, _ := fixture(t)
	logDir := t.TempDir()
	sb := logSandbox(t, r, logDir)
	c := stdioContainer(t, r, sb, "nostdin", false, false, false, logDir)
	require.Eventually(t, func() bool {
		return containerStatus(t, r, c).State == runtimeapi.ContainerState_CONTAINER_EXITED
	}, 10*time.Second, time.Millisecond)
	assert.EqualValues(t, 0, containerStatus(t, r, c).ExitCode, "busybox's sh with an empty stdin")

	// A command that is not a lone shell runs as it is, stdin or not.
	resp, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "sleeper"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
			Command: []string{"sh", "-c", "sleep 1000"}, Stdin: true}})
	require.NoError(t, err)
	r.mu.Lock()
	interactive := r.containers[resp.ContainerId].interactive
	r.mu.Unlock()
	assert.False(t, interactive)
}

func TestIsLoneShell(t *testing.T) {
	busybox := &image{def: busyboxSh}
	nginx := &image{def: ImageDefault{Script: "nginx"}}
	withEntrypoint := &image{def: busyboxSh, entrypoint: []string{"/docker-entrypoint.sh"}}
	for _, tc := range []struct {
		command, args []string
		img           *image
		want          bool
	}{
		{nil, nil, busybox, true},               // kubectl debug -it --image=busybox
		{nil, []string{"sh"}, busybox, true},    // kubectl run -it --image=busybox -- sh
		{[]string{"/bin/sh"}, nil, nginx, true}, // a shell in any image
		{[]string{"sh", "-c", "ls"}, nil, busybox, false},
		{nil, nil, nginx, false},
		{nil, []string{"sh"}, withEntrypoint, false}, // the args go to the entrypoint
	} {
		assert.Equal(t, tc.want, isLoneShell(tc.command, tc.args, tc.img), "%v %v", tc.command, tc.args)
	}
}

// TestTargetPIDNamespaceSharesTheProcessView: a container created with
// NamespaceMode TARGET (an ephemeral container of `kubectl debug
// --target`) sees its target's processes in ps and pgrep; another does not.
func TestTargetPIDNamespaceSharesTheProcessView(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	app := createContainer(t, r, sb, "app", "sh", "-c", "sleep 1000")
	startContainer(t, r, app)
	waitSleeping(t, r)
	other := createContainer(t, r, sb, "other", "sh", "-c", "top")
	startContainer(t, r, other)

	create := func(name, target string) (string, error) {
		resp, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb,
			Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
				Command: []string{"sh", "-c", "top"},
				Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
					NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: target}}}}})
		return resp.GetContainerId(), err
	}
	dbg, err := create("debugger", app)
	require.NoError(t, err)
	startContainer(t, r, dbg)

	assert.Equal(t, "PID   USER     TIME  COMMAND\n    1 root      0:00 sh -c sleep 1000\n    2 root      0:00 sleep 1000\n    3 root      0:00 sh -c top\n    4 root      0:00 top\n    5 root      0:00 ps\n",
		psIn(t, r, dbg, "top"), "the target's shell and sleep, and the debugger's own top and ps, in one PID namespace")
	assert.Equal(t, "PID   USER     TIME  COMMAND\n    1 root      0:00 sh -c sleep 1000\n    2 root      0:00 sleep 1000\n    3 root      0:00 sh -c top\n    4 root      0:00 top\n    6 root      0:00 ps\n",
		psIn(t, r, app), "and the target sees the debugger's")
	// other's top was started before the debugger, but nothing above waited
	// for it to be running: on a busy machine ps could come first.
	assert.Equal(t, "PID   USER     TIME  COMMAND\n    1 root      0:00 sh -c top\n    2 root      0:00 top\n    3 root      0:00 ps\n",
		psIn(t, r, other, "top"), "another container sees only its own")

	_, err = create("lost", "nope")
	assert.Equal(t, codes.NotFound, status.Code(err), "%v", err)
}
