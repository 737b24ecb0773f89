package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	kubepod "mykubelet/mylib/pod"
)

type allowAll struct{}

func (allowAll) AuthenticateRequest(*http.Request) (User, bool, error) {
	return User{Name: "admin"}, true, nil
}
func (allowAll) Authorize(context.Context, Attributes) (bool, string, error) { return true, "", nil }

// kubeletWithAPod serves the kubelet API over a mock runtime in which pod
// default/p's container c has written three lines and runs on, and its
// ephemeral container debugger (`kubectl debug`) has written one.
func kubeletWithAPod(t *testing.T) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	rt, err := fakeruntime.NewRuntime(fakeruntime.Config{StateDir: t.TempDir()})
	require.NoError(t, err)
	conn, err := grpc.NewClient("unix://"+fakeruntimetest.Serve(t, rt), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	cri := runtimeapi.NewRuntimeServiceClient(conn)
	_, err = runtimeapi.NewImageServiceClient(conn).PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}})
	require.NoError(t, err)
	logDir := t.TempDir()
	sb, err := cri.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "uid-p"}, LogDirectory: logDir}})
	require.NoError(t, err)
	start := func(name, script string, lines int) string {
		c, err := cri.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId,
			SandboxConfig: &runtimeapi.PodSandboxConfig{LogDirectory: logDir},
			Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
				Command: []string{"sh", "-c", script}, LogPath: name + "/0.log"}})
		require.NoError(t, err)
		_, err = cri.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId})
		require.NoError(t, err)
		for { // until the script has written its lines (it then sleeps an hour)
			b, _ := os.ReadFile(filepath.Join(logDir, name+"/0.log"))
			if bytes.Count(b, []byte("\n")) == lines {
				break
			}
			time.Sleep(time.Millisecond)
		}
		return c.ContainerId
	}
	c := start("c", "echo one; echo two; echo three; sleep 3600", 3)
	debugger := start("debugger", "echo hello from debugger; sleep 3600", 1)

	pods := kubepod.NewBasicPodManager()
	pods.SetPods([]*v1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}, {Name: "waiting"}},
			EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger"}}}},
		Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{
			{Name: "c", ContainerID: "mykubelet-fake://" + c, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}},
			{Name: "waiting", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
		}, EphemeralContainerStatuses: []v1.ContainerStatus{
			{Name: "debugger", ContainerID: "mykubelet-fake://" + debugger, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}},
		}},
	}})
	s, err := NewServer(Config{NodeName: "n1", Pods: pods, Runtime: cri, Authenticator: allowAll{}, Authorizer: allowAll{}})
	require.NoError(t, err)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestContainerLogsAndTheirErrors(t *testing.T) {
	srv := kubeletWithAPod(t)
	for path, want := range map[string]struct {
		code int
		body string
	}{
		"/containerLogs/default/p/c":                {200, "one\ntwo\nthree\n"},
		"/containerLogs/default/p/c?tailLines=2":    {200, "two\nthree\n"},
		"/containerLogs/default/p/c?tail=all":       {200, "one\ntwo\nthree\n"},
		"/containerLogs/default/p/c?limitBytes=5":   {200, "one\nt"},
		"/containerLogs/default/p/debugger":         {200, "hello from debugger\n"}, // an ephemeral container
		"/containerLogs/default/p/c?previous=true":  {400, `previous terminated container "c" in pod "p" not found` + "\n"},
		"/containerLogs/default/p/waiting":          {400, `container "waiting" in pod "p" is waiting to start: ContainerCreating` + "\n"},
		"/containerLogs/default/p/nope":             {404, `container "nope" not found in pod "p"` + "\n"},
		"/containerLogs/default/q/c":                {404, `pod "q" does not exist` + "\n"},
		"/containerLogs/default/p/c?sinceSeconds=x": {400, `{"message": "Unable to decode query."}: sinceSeconds="x": want a whole number` + "\n"},
		"/containerLogs/default/p/c?limitBytes=0":   {422, `{"message": "Invalid request."}: limitBytes: must be greater than 0` + "\n"},
		"/healthz": {200, "ok"},
		"/nope":    {404, "404 page not found\n"},
	} {
		code, body := get(t, srv.URL+path)
		assert.Equal(t, want.code, code, path)
		assert.Equal(t, want.body, body, path)
	}
	code, body := get(t, srv.URL+"/containerLogs/default/p/c?timestamps=true&tailLines=1")
	assert.Equal(t, 200, code)
	assert.Regexp(t, `^\d{4}-\d\d-\d\dT\S+Z three\n$`, body)
}

// TestExecIsProxiedToTheRuntimesStreamingServer: the kubelet asks the
// runtime for a URL and hands the upgraded connection there; the client
// gets the output and the exit code.
func TestExecIsProxiedToTheRuntimesStreamingServer(t *testing.T) {
	srv := kubeletWithAPod(t)
	u, err := url.Parse(srv.URL + "/exec/default/p/c?command=sh&command=-c&command=" + url.QueryEscape("cat; echo hi; exit 3") + "&input=1&output=1&error=1")
	require.NoError(t, err)
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
	require.NoError(t, err)
	var out bytes.Buffer
	err = ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: bytes.NewBufferString("from stdin\n"), Stdout: &out, Stderr: io.Discard})
	var ce exec.CodeExitError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Equal(t, 3, ce.Code)
	assert.Equal(t, "from stdin\nhi\n", out.String())

	for path, want := range map[string]struct {
		code int
		body string
	}{
		"/exec/default/p/c?command=true":                {400, "you must specify at least 1 of stdin, stdout, stderr\n"},
		"/exec/default/p/c?output=1":                    {400, "you must specify a command (the query parameter command, once per argument)\n"},
		"/exec/default/p/waiting?command=true&output=1": {500, `container not found ("waiting")` + "\n"},
		"/exec/default/q/c?command=true&output=1":       {404, "pod does not exist\n"},
		"/exec/default/p/c?command=true&output=1":       {500, "Upgrade request required\n"}, // as upstream's responder
	} {
		resp, err := http.Post(srv.URL+path, "", nil)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, want.code, resp.StatusCode, path)
		assert.Equal(t, want.body, string(b), path)
	}
}

// TestParseStreamOptionsReadsWhatTheAPIServerSends: the API server's
// streamParams send input, output, error and tty as "1".
func TestParseStreamOptionsReadsWhatTheAPIServerSends(t *testing.T) {
	o, err := ParseStreamOptions(url.Values{"input": {"1"}, "output": {"1"}, "error": {"1"}})
	require.NoError(t, err)
	assert.Equal(t, StreamOptions{Stdin: true, Stdout: true, Stderr: true}, o)
	o, err = ParseStreamOptions(url.Values{"input": {"1"}, "output": {"1"}, "error": {"1"}, "tty": {"1"}})
	require.NoError(t, err)
	assert.Equal(t, StreamOptions{Stdin: true, Stdout: true, TTY: true}, o, "stderr goes to the terminal")
	_, err = ParseStreamOptions(url.Values{"stdout": {"1"}, "output": {"true"}})
	assert.EqualError(t, err, "you must specify at least 1 of stdin, stdout, stderr", `only "1", and only upstream's names`)
}
