package fakeruntime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

const agnhost = "registry.k8s.io/e2e-test-images/agnhost:2.53"

// createArgs creates a container of image with args only (the image's
// entrypoint runs them, as a pod's args do) and a memory limit (0: none).
func createArgs(t *testing.T, r *Runtime, sandboxID, name, image string, memory int64, args ...string) string {
	t.Helper()
	return createArgsLogged(t, r, sandboxID, "", name, image, memory, args...)
}

// createArgsLogged is createArgs with a log path (in its sandbox's log
// directory; "" for none).
func createArgsLogged(t *testing.T, r *Runtime, sandboxID, logPath, name, image string, memory int64, args ...string) string {
	t.Helper()
	_, err := r.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	require.NoError(t, err)
	resp, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: image},
		Args:     args,
		LogPath:  logPath,
		Linux:    &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: memory}},
	}})
	require.NoError(t, err)
	return resp.ContainerId
}

// TestAgnhostStressGrowsItsWorkingSetStepByStep: the e2e eviction tests'
// memory hog (agnhost stress) takes one more step every --mem-alloc-sleep
// of the runtime's clock, and the working set over CRI follows; at
// --mem-total it holds.
func TestAgnhostStressGrowsItsWorkingSetStepByStep(t *testing.T) {
	r, clk := fixture(t)
	logDir := t.TempDir()
	resp, err := r.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "memory-hog", Namespace: "default", Uid: "uid-hog"}, LogDirectory: logDir}})
	require.NoError(t, err)
	c := createArgsLogged(t, r, resp.PodSandboxId, "hog/0.log", "hog", agnhost, 0,
		"stress", "--mem-alloc-size", "10Mi", "--mem-alloc-sleep", "10s", "--mem-total", "30Mi")
	startContainer(t, r, c)

	// wsIs waits for the working set to be want, and the hog to wait for
	// its next step (growing) or for ever (not: no timer).
	wsIs := func(want uint64, growing bool) {
		t.Helper()
		var ws uint64
		require.Eventually(t, func() bool {
			ws = containerStatsOf(t, r, c).Memory.WorkingSetBytes.Value
			return ws >= want && (!growing || clk.HasWaiters())
		}, 30*time.Second, time.Millisecond, "working set %d, want %d", ws, want)
		assert.Less(t, ws, want+1<<20, "the steps, its variables and few files")
	}
	for step := uint64(1); step <= 3; step++ {
		wsIs(step*10<<20, true)
		clk.Step(10 * time.Second)
	}
	wsIs(30<<20, false) // holds --mem-total
	clk.Step(time.Hour)
	wsIs(30<<20, false)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, c).State)

	// The sandbox's figures (the pod's, as the summary reads them) follow.
	sst, err := r.ListPodSandboxStats(context.Background(), &runtimeapi.ListPodSandboxStatsRequest{})
	require.NoError(t, err)
	require.Len(t, sst.Stats, 1)
	assert.GreaterOrEqual(t, sst.Stats[0].Linux.Memory.WorkingSetBytes.Value, uint64(30<<20))

	// The last line follows the last step's memory: wait for it.
	var logs string
	require.Eventually(t, func() bool {
		raw, err := os.ReadFile(filepath.Join(logDir, "hog", "0.log"))
		logs = string(raw)
		return err == nil && strings.Contains(logs, `Allocated "30Mi" memory`)
	}, 30*time.Second, 10*time.Millisecond, "the hog's log: %s", logs)
	assert.Contains(t, logs, `Allocating "30Mi" memory, in "10Mi" chunks, with a 10s sleep between allocations`)

	// It is stopped as a Go program is: SIGTERM ends it.
	_, err = r.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: c, Timeout: 30})
	require.NoError(t, err)
	st := containerStatus(t, r, c)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.State)
	assert.Equal(t, int32(ExitCodeSIGTERM), st.ExitCode)
	assert.Zero(t, containerStatsOf(t, r, c).Memory.WorkingSetBytes.Value, "a dead container holds no memory")
}

// TestAgnhostStressIsOOMKilledAtItsLimit: the step that passes the limit
// kills the container.
func TestAgnhostStressIsOOMKilledAtItsLimit(t *testing.T) {
	r, clk := fixture(t)
	sb := runSandbox(t, r, "memory-hog", "uid-hog", nil)
	c := createArgs(t, r, sb, "hog", agnhost, 25<<20, "stress", "--mem-alloc-size=10Mi", "--mem-alloc-sleep=1s", "--mem-total=1Gi")
	startContainer(t, r, c)
	for range 2 {
		require.Eventually(t, clk.HasWaiters, 30*time.Second, time.Millisecond)
		clk.Step(time.Second)
	}
	waitDone(t, r, c)
	st := containerStatus(t, r, c)
	assert.Equal(t, ReasonOOMKilled, st.Reason)
	assert.Equal(t, int32(137), st.ExitCode)
}

func TestAgnhostStressRefusesWhatTheMockCannotDo(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "bad", "uid-bad", nil)
	for i, args := range [][]string{
		{"stress", "--cpus", "2"},
		{"stress", "--mem-total", "lots"},
		{"stress", "--mem-alloc-sleep", "soon"},
		{"stress", "--vm", "1"},
		{"stress", "--mem-total"},
	} {
		c := createArgs(t, r, sb, "bad-"+string(rune('a'+i)), agnhost, 0, args...)
		startContainer(t, r, c)
		waitDone(t, r, c)
		assert.Equal(t, int32(1), containerStatus(t, r, c).ExitCode, "%v", args)
	}
}

// TestTheNodesMemoryBoundsAContainerWithoutALimit: with the node's memory
// known, a container with no limit may grow past DefaultContainerMemory up
// to it, and no further.
func TestTheNodesMemoryBoundsAContainerWithoutALimit(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	r, err := NewRuntime(Config{Clock: clk, StateDir: t.TempDir(), MemoryCapacity: 1 << 30})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	sb := runSandbox(t, r, "big", "uid-big", nil)

	// polinux/stress has no entrypoint: its args are the command.
	within := createArgs(t, r, sb, "within", "polinux/stress", 0, "stress", "--vm", "1", "--vm-bytes", "600M")
	c := createArgs(t, r, sb, "past", "polinux/stress", 0, "stress", "--vm", "1", "--vm-bytes", "1100M")
	startContainer(t, r, within)
	require.Eventually(t, func() bool {
		return containerStatsOf(t, r, within).Memory.WorkingSetBytes.Value >= 600<<20
	}, 30*time.Second, time.Millisecond)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, within).State, "600M > DefaultContainerMemory, < the node's 1 GiB")

	startContainer(t, r, c)
	waitDone(t, r, c)
	assert.Equal(t, ReasonOOMKilled, containerStatus(t, r, c).Reason, "1100M > the node's 1 GiB")
}

// TestADeadContainersWritableLayerCountsUntilItIsRemoved: the layer's
// bytes stay in the stats (ListContainerStats and the sandbox's) while
// the dead container is there, and leave with it.
func TestADeadContainersWritableLayerCountsUntilItIsRemoved(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "writer", "uid-writer", nil)
	c := createContainer(t, r, sb, "writer", "sh", "-c", `i=0; while [ $i -lt 100 ]; do echo 0123456789012345678901234567890123456789 >> /data; i=$((i+1)); done`)
	startContainer(t, r, c)
	waitDone(t, r, c)
	require.Equal(t, int32(0), containerStatus(t, r, c).ExitCode)

	layer := func() (uint64, bool) {
		resp, err := r.ListPodSandboxStats(context.Background(), &runtimeapi.ListPodSandboxStatsRequest{})
		require.NoError(t, err)
		for _, s := range resp.Stats {
			for _, cs := range s.Linux.Containers {
				if cs.Attributes.Id == c {
					return cs.WritableLayer.UsedBytes.Value, true
				}
			}
		}
		return 0, false
	}
	used, listed := layer()
	assert.True(t, listed, "the dead container is listed")
	assert.GreaterOrEqual(t, used, uint64(4100), "its 100 lines of 41 bytes")

	_, err := r.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: c})
	require.NoError(t, err)
	_, listed = layer()
	assert.False(t, listed, "removed: its layer is gone")
}

// TestImagesHaveTheirRepositorysSize: a tag the catalogue does not list
// has its repository's size within 5%; the image filesystem is their sum,
// and removing an image frees its size.
func TestImagesHaveTheirRepositorysSize(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	r, err := NewRuntime(Config{Clock: clk, StateDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	ctx := context.Background()
	sizes := map[string]uint64{}
	for _, ref := range []string{"nginx:1.27", "nginx:1.26", "docker.io/library/httpd:2.4", "busybox:1.36", agnhost, "registry.k8s.io/pause:3.9"} {
		resp, err := r.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		require.NoError(t, err)
		st, err := r.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: resp.ImageRef}})
		require.NoError(t, err)
		sizes[ref] = st.Image.Size
	}
	inRange := func(ref string, typical uint64) {
		t.Helper()
		assert.GreaterOrEqual(t, sizes[ref], typical/100*95, ref)
		assert.LessOrEqual(t, sizes[ref], typical/100*105, ref)
	}
	inRange("nginx:1.27", 72_000_000)
	inRange("nginx:1.26", 72_000_000)
	inRange("docker.io/library/httpd:2.4", 58_000_000)
	inRange("busybox:1.36", 2_200_000)
	inRange(agnhost, 51_000_000)
	assert.Equal(t, uint64(321_520), sizes["registry.k8s.io/pause:3.9"], "a listed tag keeps its recorded size")

	fsUsed := func() uint64 {
		resp, err := r.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
		require.NoError(t, err)
		return resp.ImageFilesystems[0].UsedBytes.Value
	}
	var sum uint64
	for _, s := range sizes {
		sum += s
	}
	assert.Equal(t, sum, fsUsed())
	_, err = r.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: "nginx:1.27"}})
	require.NoError(t, err)
	assert.Equal(t, sum-sizes["nginx:1.27"], fsUsed(), "removing an image frees its size")
}

// TestAgnhostStressGrowsInTheSandboxProcess: the same hog, run where a
// root runtime on the real clock runs it; its figures come over the
// sandbox process's usage requests.
func TestAgnhostStressGrowsInTheSandboxProcess(t *testing.T) {
	r := sandboxRuntime(t)
	sb := runSandbox(t, r, "memory-hog", "uid-hog", nil)
	c := createArgs(t, r, sb, "hog", agnhost, 0, "stress", "--mem-alloc-size", "10Mi", "--mem-alloc-sleep", "50ms", "--mem-total", "30Mi")
	startContainer(t, r, c)
	seen := map[uint64]bool{}
	require.Eventually(t, func() bool {
		ws := containerStatsOf(t, r, c).Memory.WorkingSetBytes.Value
		seen[ws>>20/10] = true // the steps seen, in 10 MiB
		return ws >= 30<<20
	}, 30*time.Second, 5*time.Millisecond)
	assert.True(t, seen[1] || seen[2], "a step before the last was seen: %v", seen)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, c).State)
}
