package fakeruntime_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/kubetypes"
)

// runPod creates and starts a pod with one busybox container running
// script, through the CRI client the chapters use.
func runPod(t *testing.T, m *kuberuntime.Manager, name, script string) (sandboxID, containerID string) {
	t.Helper()
	ctx := context.Background()
	rs, is := m.RuntimeService(), m.ImageService()
	_, err := is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}})
	require.NoError(t, err)
	labels := map[string]string{kubetypes.KubernetesPodNameLabel: name, kubetypes.KubernetesPodNamespaceLabel: "default", kubetypes.KubernetesPodUIDLabel: "uid-" + name}
	sb, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name}, Labels: labels}})
	require.NoError(t, err)
	cl := map[string]string{kubetypes.KubernetesContainerNameLabel: "c"}
	for k, v := range labels {
		cl[k] = v
	}
	c, err := rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		Labels: cl, Command: []string{"sh", "-c", script}}})
	require.NoError(t, err)
	_, err = rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId})
	require.NoError(t, err)
	return sb.PodSandboxId, c.ContainerId
}

// TestPathologicalScriptsDoNotWedgeTheRuntime runs scripts that never
// yield (a busy loop, a loop of tiny sleeps, a loop that floods its log)
// and checks, over the socket with the chapters' CRI client, that every
// other call still answers: each is bounded by a context deadline, so a
// wedged runtime fails the test instead of hanging it. Scripts never run
// under the runtime's lock, so there is nothing for them to hold.
func TestPathologicalScriptsDoNotWedgeTheRuntime(t *testing.T) {
	rt, err := fakeruntime.NewRuntime(fakeruntime.Config{StateDir: t.TempDir()})
	require.NoError(t, err)
	sock := fakeruntimetest.Serve(t, rt)
	m, err := kuberuntime.Connect(context.Background(), "unix://"+sock, clock.RealClock{})
	require.NoError(t, err)
	defer m.Close()

	runPod(t, m, "busy", "while true; do :; done")
	runPod(t, m, "tiny-sleeps", "while true; do sleep 0.000001; done")
	runPod(t, m, "flood", "while true; do echo flood; done")
	_, exits := runPod(t, m, "exits", "exit 3")

	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		pods, err := m.GetPods(ctx, true)
		require.NoError(t, err, "GetPods while the scripts spin")
		require.Len(t, pods, 4)
		status, err := m.GetPodStatus(ctx, pods[0])
		require.NoError(t, err)
		require.NotEmpty(t, status.ContainerStatuses)
		_, err = m.RuntimeService().ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{})
		require.NoError(t, err)
		cancel()
	}
	// Every spinning container still stops: a trap-less script is killed
	// at the end of its (here 0 s) grace period.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := m.GetPods(ctx, true)
	require.NoError(t, err)
	for _, p := range pods {
		for _, c := range p.Containers {
			_, err := m.RuntimeService().StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.ID.ID, Timeout: 0})
			require.NoError(t, err)
		}
	}
	st, err := m.RuntimeService().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: exits})
	require.NoError(t, err)
	assert.Equal(t, int32(3), st.Status.ExitCode, "the script's own exit code")
	pods, err = m.GetPods(ctx, true)
	require.NoError(t, err)
	for _, p := range pods {
		for _, c := range p.Containers {
			assert.Equal(t, kubecontainer.ContainerStateExited, c.State, "%s", p.Name)
		}
	}
}

// TestServeReturnsWithAStuckCall: a StopContainer waiting out an hour's
// grace period does not keep Serve from returning once its context ends.
func TestServeReturnsWithAStuckCall(t *testing.T) {
	rt, err := fakeruntime.NewRuntime(fakeruntime.Config{StateDir: t.TempDir(), ShutdownGrace: 100 * time.Millisecond})
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "crt")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "rt.sock")
	lis, err := fakeruntime.ListenUnix(sock)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- rt.Serve(ctx, lis) }()

	m, err := kuberuntime.Connect(context.Background(), "unix://"+sock, clock.RealClock{})
	require.NoError(t, err)
	defer m.Close()
	_, c := runPod(t, m, "stubborn", "while true; do sleep 1; done") // no trap: ignores SIGTERM
	stopped := make(chan error, 1)
	go func() {
		_, err := m.RuntimeService().StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: c, Timeout: 3600})
		stopped <- err
	}()
	// Wait until the stop is in flight: the container is still running
	// and the call has not returned.
	waitCtx, waitCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer waitCancel()
	select {
	case err := <-stopped:
		t.Fatalf("StopContainer returned early: %v", err)
	case <-time.After(200 * time.Millisecond):
	case <-waitCtx.Done():
	}

	cancel()
	select {
	case err := <-served:
		assert.NoError(t, err)
	case <-waitCtx.Done():
		t.Fatal("Serve did not return: a stuck call holds the shutdown")
	}
	select {
	case err := <-stopped:
		assert.Error(t, err, "the stuck call was cut")
	case <-waitCtx.Done():
		t.Fatal("the stuck call never ended")
	}
	_, err = net.Dial("unix", sock)
	assert.Error(t, err, "nothing listens any more")
}
