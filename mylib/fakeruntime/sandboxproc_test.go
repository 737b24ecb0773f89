package fakeruntime

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// sandboxRuntime is a runtime whose scripts run in the sandbox process:
// root, on the real clock. It skips the test when not root.
func sandboxRuntime(t *testing.T) *Runtime {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the sandbox process needs root")
	}
	r, err := NewRuntime(Config{Clock: clock.RealClock{}, StateDir: t.TempDir()})
	require.NoError(t, err)
	require.NotNil(t, r.sandbox, "a root runtime on the real clock runs its scripts in the sandbox process")
	t.Cleanup(func() { _ = r.Close() })
	for _, img := range []string{"busybox:1.36", "registry.k8s.io/pause:3.10"} {
		_, err = r.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img}})
		require.NoError(t, err)
	}
	return r
}

// logOf returns what container id wrote to its log.
func logOf(t *testing.T, r *Runtime, id string) string {
	t.Helper()
	r.mu.Lock()
	path := r.containers[id].logPath
	r.mu.Unlock()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	entries, err := ReadLog(f)
	require.NoError(t, err)
	out := ""
	for _, e := range entries {
		out += e.Text + "\n"
	}
	return out
}

// runLogged runs script in a new busybox container with a log, and returns
// its status once it ended and what it wrote.
func runLogged(t *testing.T, r *Runtime, pod, script string) (*runtimeapi.ContainerStatus, string) {
	t.Helper()
	ctx := context.Background()
	sb, err := r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod, Namespace: "default", Uid: "uid-" + pod},
		LogDirectory: t.TempDir(),
	}})
	require.NoError(t, err)
	c, err := r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		Command: []string{"sh", "-c", script}, LogPath: "app/0.log"}})
	require.NoError(t, err)
	startContainer(t, r, c.ContainerId)
	waitDone(t, r, c.ContainerId)
	return containerStatus(t, r, c.ContainerId), logOf(t, r, c.ContainerId)
}

func TestSandboxProcessSmoke(t *testing.T) {
	r := sandboxRuntime(t)
	st, out := runLogged(t, r, "smoke", `echo hi $$; ls /; pwd -P; echo x > /tmp/f; cat /tmp/f; exit 3`)
	t.Log(out)
	require.EqualValues(t, 3, st.ExitCode)
	_ = time.Second
}
