package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
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
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	kubepod "mykubelet/mylib/pod"
)

// TestAttachToAnEphemeralContainer: `kubectl debug -i` attaches to the
// ephemeral container the kubelet started, found by its status among the
// pod's ephemeral container statuses; what the client sends is run by the
// container's shell (busybox's default command, with a stdin) and the
// output comes back.
func TestAttachToAnEphemeralContainer(t *testing.T) {
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
	sbConfig := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "uid-p"}, LogDirectory: logDir}
	sb, err := cri.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbConfig})
	require.NoError(t, err)
	start := func(name string, once bool) string {
		c, err := cri.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: sbConfig,
			Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
				Stdin: true, StdinOnce: once, LogPath: name + "/0.log"}})
		require.NoError(t, err)
		_, err = cri.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId})
		require.NoError(t, err)
		return c.ContainerId
	}
	once, open := start("debugger", true), start("shell", false)

	pods := kubepod.NewBasicPodManager()
	pods.SetPods([]*v1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}},
			EphemeralContainers: []v1.EphemeralContainer{
				{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger", Stdin: true, StdinOnce: true}},
				{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "shell", Stdin: true}}}},
		Status: v1.PodStatus{EphemeralContainerStatuses: []v1.ContainerStatus{
			{Name: "debugger", ContainerID: "mykubelet-fake://" + once, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}},
			{Name: "shell", ContainerID: "mykubelet-fake://" + open, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}},
		}},
	}})
	s, err := NewServer(Config{NodeName: "n1", Pods: pods, Runtime: cri, Authenticator: allowAll{}, Authorizer: allowAll{}})
	require.NoError(t, err)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	attach := func(container, input string) (string, string) {
		u, err := url.Parse(srv.URL + "/attach/default/p/" + container + "?input=1&output=1&error=1")
		require.NoError(t, err)
		ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
		require.NoError(t, err)
		var out, errOut bytes.Buffer
		require.NoError(t, ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader(input), Stdout: &out, Stderr: &errOut}))
		return out.String(), errOut.String()
	}

	// stdin stays open: each session ends once the shell has read and run
	// what it sent (in the sandbox process, which says so: the runtime
	// runs scripts there as root), with all of its output.
	for i := range 5 {
		out, errOut := attach("shell", fmt.Sprintf("n=$((n+1)); echo %d $n\n", i))
		assert.Equal(t, fmt.Sprintf("%d %d\n", i, i+1), out, "one shell, its variables kept")
		assert.Empty(t, errOut)
	}

	// stdinOnce: the end of the input closes the shell's stdin, it exits,
	// and the session, which lasts until then, has all of its output.
	out, errOut := attach("debugger", "echo hi from $HOSTNAME\necho oops >&2\n")
	assert.Equal(t, "hi from p\n", out)
	assert.Equal(t, "oops\n", errOut)
	st, err := cri.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: once})
	require.NoError(t, err)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.Status.State)
}
