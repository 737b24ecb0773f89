package fakeruntime

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
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
	"k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// stream connects to a URL of the streaming server as the kubelet's
// client would (client-go's SPDY executor, v4.channel.k8s.io) and returns
// stdout, stderr and the exit code.
func stream(t *testing.T, rawURL, stdin string, tty bool) (string, string, int) {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	opts := remotecommand.StreamOptions{Stdout: &out, Tty: tty}
	if !tty {
		opts.Stderr = &errOut
	}
	if stdin != "" {
		opts.Stdin = strings.NewReader(stdin)
	}
	err = ex.StreamWithContext(context.Background(), opts)
	code := 0
	var ce exec.CodeExitError
	if errors.As(err, &ce) {
		code = ce.Code
	} else {
		require.NoError(t, err)
	}
	return out.String(), errOut.String(), code
}

func execURL(t *testing.T, r *Runtime, id string, stdin, tty bool, cmd ...string) string {
	t.Helper()
	resp, err := r.Exec(context.Background(), &runtimeapi.ExecRequest{ContainerId: id, Cmd: cmd, Stdin: stdin, Stdout: true, Stderr: !tty, Tty: tty})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(resp.Url, "http://127.0.0.1:"), resp.Url)
	return resp.Url
}

func TestExecStreamsOutputAndTheExitCode(t *testing.T) {
	r, _ := fixture(t)
	c := createContainer(t, r, runSandbox(t, r, "web", "uid-1", nil), "app", "sh", "-c", "while true; do sleep 1000; done")
	startContainer(t, r, c)

	out, errOut, code := stream(t, execURL(t, r, c, false, false, "sh", "-c", "echo hi; echo oops >&2; exit 3"), "", false)
	assert.Equal(t, "hi\n", out)
	assert.Equal(t, "oops\n", errOut)
	assert.Equal(t, 3, code, "the exit code comes back through the error stream")

	_, _, code = stream(t, execURL(t, r, c, false, false, "true"), "", false)
	assert.Equal(t, 0, code)
}

func TestExecWithStdinIsAShellThatKeepsItsState(t *testing.T) {
	r, _ := fixture(t)
	c := createContainer(t, r, runSandbox(t, r, "web", "uid-1", nil), "app", "sh", "-c", "while true; do sleep 1000; done")
	startContainer(t, r, c)

	out, _, code := stream(t, execURL(t, r, c, true, false, "sh"), "x=5\ncd /tmp\necho $x $PWD\nexit 4\necho never\n", false)
	assert.Equal(t, "5 /tmp\n", out)
	assert.Equal(t, 4, code)

	out, _, code = stream(t, execURL(t, r, c, true, false, "cat"), "piped\n", false)
	assert.Equal(t, "piped\n", out, "cat reads the session's stdin")
	assert.Equal(t, 0, code)

	out, _, code = stream(t, execURL(t, r, c, true, false, "sh"), "echo last\n", false)
	assert.Equal(t, "last\n", out, "the end of stdin ends the shell")
	assert.Equal(t, 0, code)
}

func TestExecWithATTYEchoesAndPrompts(t *testing.T) {
	r, _ := fixture(t)
	c := createContainer(t, r, runSandbox(t, r, "web", "uid-1", nil), "app", "sh", "-c", "while true; do sleep 1000; done")
	startContainer(t, r, c)

	out, _, code := stream(t, execURL(t, r, c, true, true, "sh"), "echo hx\x7fi\rexit 2\r", true)
	assert.Equal(t, "# echo hx\b \bi\r\nhi\r\n# exit 2\r\n", out, "echo, erase, CR as Enter, CRLF output")
	assert.Equal(t, 2, code)
}

func TestExecAndAttachRefuseWhatTheyCannotServe(t *testing.T) {
	r, _ := fixture(t)
	c := createContainer(t, r, runSandbox(t, r, "web", "uid-1", nil), "app", "sh", "-c", "sleep 1000")
	_, err := r.Exec(context.Background(), &runtimeapi.ExecRequest{ContainerId: c, Cmd: []string{"true"}, Stdout: true})
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "not started yet")
	startContainer(t, r, c)
	_, err = r.Exec(context.Background(), &runtimeapi.ExecRequest{ContainerId: c, Cmd: []string{"true"}})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "no stream")
	_, err = r.Exec(context.Background(), &runtimeapi.ExecRequest{ContainerId: c, Stdout: true})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "no command")
	_, err = r.Exec(context.Background(), &runtimeapi.ExecRequest{ContainerId: "nope", Cmd: []string{"true"}, Stdout: true})
	assert.Equal(t, codes.NotFound, status.Code(err))
	_, err = r.PortForward(context.Background(), &runtimeapi.PortForwardRequest{PodSandboxId: "x"})
	assert.Equal(t, codes.NotFound, status.Code(err)) // served: streaming_portforward.go

	// A URL is good once.
	u := execURL(t, r, c, false, false, "true")
	_, _, code := stream(t, u, "", false)
	assert.Equal(t, 0, code)
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", mustParse(t, u))
	require.NoError(t, err)
	err = ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: &bytes.Buffer{}})
	assert.Error(t, err, "a used token is gone")
}

func mustParse(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

// TestAttachStreamsWhatTheContainerWritesUntilItExits: attached while the
// container sleeps, the session gets what it writes next, stdout and
// stderr apart, and ends when the container does.
func TestAttachStreamsWhatTheContainerWritesUntilItExits(t *testing.T) {
	r, clk := fixture(t)
	logDir := t.TempDir()
	sbResp, err := r.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1"}, LogDirectory: logDir}})
	require.NoError(t, err)
	resp, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sbResp.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		Command: []string{"sh", "-c", "echo before; sleep 5; echo out; echo err >&2"}, LogPath: "app/0.log"},
		SandboxConfig: &runtimeapi.PodSandboxConfig{LogDirectory: logDir}})
	require.NoError(t, err)
	c := resp.ContainerId
	startContainer(t, r, c)
	waitSleeping(t, r)

	att, err := r.Attach(context.Background(), &runtimeapi.AttachRequest{ContainerId: c, Stdout: true, Stderr: true})
	require.NoError(t, err)
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", mustParse(t, att.Url))
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	}()
	waitAttached(t, r, c, 1)
	for {
		clk.Step(time.Second)
		select {
		case err := <-done:
			require.NoError(t, err)
			assert.Equal(t, "out\n", out.String(), "only what was written after attaching")
			assert.Equal(t, "err\n", errOut.String())
			_, err = os.Stat(filepath.Join(logDir, "app", "0.log"))
			assert.NoError(t, err, "the log is in the sandbox's log directory")
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestASessionEndsWithItsLastBytes: a session's connection, hijacked as
// the streaming server hijacks it (endWithConnection), whose client still
// sent stdin when the command had ended (kubectl cp without tar). The
// client reads the session's last bytes, then the end, not a reset: a
// reset lets the kubelet's proxy drop the exit code (package linger).
func TestASessionEndsWithItsLastBytes(t *testing.T) {
	sent, closed := make(chan struct{}), make(chan error, 1)
	srv := httptest.NewServer(endWithConnection(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		c, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			closed <- err
			return
		}
		<-sent                                    // the client's stdin is there,
		_, _ = io.WriteString(c, "exit code 127") // and the session never reads it
		closed <- c.Close()
	})))
	defer srv.Close()

	client, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer client.Close()
	_, err = io.WriteString(client, "POST /exec/x HTTP/1.1\r\nHost: runtime\r\nContent-Length: 65536\r\n\r\n"+strings.Repeat("x", 64<<10))
	require.NoError(t, err)
	close(sent)

	got, err := io.ReadAll(client)
	assert.NoError(t, err, "the end of the connection, not a reset")
	assert.Equal(t, "exit code 127", string(got))
	require.NoError(t, client.Close())
	assert.NoError(t, <-closed)
}
