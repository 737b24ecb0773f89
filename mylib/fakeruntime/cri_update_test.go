package fakeruntime

// UpdateContainerResources, which in-place pod resize calls: the new
// limits hold for the running container, in this process and in a
// sandbox process, and ContainerStatus reports them.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func updateResources(r *Runtime, id string, res *runtimeapi.LinuxContainerResources) error {
	_, err := r.UpdateContainerResources(context.Background(), &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: res})
	return err
}

// execWithin runs cmd in container id, bounded: an exec the new limit
// does not stop would otherwise hold the test until its timeout (and
// its end by the bound is a 137 too: the container's state tells).
func execWithin(t *testing.T, r *Runtime, id string, cmd ...string) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := r.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd})
	require.NoError(t, err)
	return resp.ExitCode
}

// memoryResizeSuite: a container holding 50M under 200Mi is refused a
// limit of 20Mi (EBUSY: it uses more) and keeps 200Mi; given 80Mi, it
// runs on, the same container; an exec of 40M more then passes the new
// limit (not the old one), and the container is OOMKilled.
func memoryResizeSuite(t *testing.T, r *Runtime, sb string) {
	c := createLimited(t, r, sb, "app", "polinux/stress", 200<<20, "stress", "--vm", "1", "--vm-bytes", "50M", "--vm-hang", "1")
	startContainer(t, r, c)
	require.Eventually(t, func() bool {
		return containerStatsOf(t, r, c).Memory.WorkingSetBytes.Value >= 50<<20
	}, 30*time.Second, 10*time.Millisecond, "stress holds its 50M")
	before := containerStatus(t, r, c)
	assert.Equal(t, int64(200<<20), before.GetResources().GetLinux().GetMemoryLimitInBytes(), "ContainerStatus reports the limit it was created with")

	err := updateResources(r, c, &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 20 << 20})
	require.Error(t, err, "a limit under what the container uses")
	assert.Equal(t, codes.Unknown, status.Code(err), "containerd returns the runtime's error as is")
	assert.Contains(t, err.Error(), "unable to set memory limit to 20971520")
	assert.Contains(t, err.Error(), "device or resource busy")
	assert.Equal(t, int64(200<<20), containerStatus(t, r, c).GetResources().GetLinux().GetMemoryLimitInBytes(), "the refused limit is not recorded")

	require.NoError(t, updateResources(r, c, &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 80 << 20}))
	after := containerStatus(t, r, c)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, after.State, "resized in place, not restarted")
	assert.Equal(t, before.Id, after.Id)
	assert.Equal(t, before.Metadata.Attempt, after.Metadata.Attempt, "its restart count")
	assert.Equal(t, before.StartedAt, after.StartedAt)
	assert.Equal(t, int64(80<<20), after.GetResources().GetLinux().GetMemoryLimitInBytes())

	// 50M + 40M fits 200Mi, not 80Mi.
	assert.Equal(t, int32(ExitCodeSIGKILL), execWithin(t, r, c, "stress", "--vm", "1", "--vm-bytes", "40M"), "the exec passed the new limit")
	require.Eventually(t, func() bool { return containerStatus(t, r, c).State == runtimeapi.ContainerState_CONTAINER_EXITED },
		10*time.Second, 10*time.Millisecond, "the whole container was killed")
	assert.Equal(t, ReasonOOMKilled, containerStatus(t, r, c).Reason)
}

func TestUpdateContainerResourcesLowersAMemoryLimit(t *testing.T) {
	r := fixtureConfig(t, Config{})
	memoryResizeSuite(t, r, runSandbox(t, r, "web", "uid-1", nil))
}

// TestUpdateContainerResourcesLowersAMemoryLimitInASandboxProcess: the
// same, with the container's scripts in its pod's sandbox process (no
// cgroup: the interpreter there holds the limit), which is told the new
// one.
func TestUpdateContainerResourcesLowersAMemoryLimitInASandboxProcess(t *testing.T) {
	r := sandboxRuntime(t)
	_, err := r.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "polinux/stress"}})
	require.NoError(t, err)
	memoryResizeSuite(t, r, runSandboxIn(t, r, "web", ""))
}

// TestUpdateContainerResourcesSetsACPULimit: a busy loop with no CPU limit
// is never throttled; given 100m (a quota of 10 ms every 100 ms) while it
// runs, the meter throttles it, and ContainerStatus reports the quota,
// the period and the shares.
func TestUpdateContainerResourcesSetsACPULimit(t *testing.T) {
	r, _ := fixture(t)
	c := createCPULimited(t, r, runSandbox(t, r, "busy", "uid-busy", nil), "busy", "busybox:1.36", 0, "sh", "-c", "while :; do :; done")
	startContainer(t, r, c)
	waitCPU(t, r, c, 0)
	assert.Zero(t, cpuStatOf(r, c).NrThrottled, "no limit: never throttled")

	require.NoError(t, updateResources(r, c, &runtimeapi.LinuxContainerResources{CpuQuota: 10000, CpuPeriod: 100000, CpuShares: 102}))
	require.Eventually(t, func() bool { return cpuStatOf(r, c).NrThrottled > 0 }, 30*time.Second, 10*time.Millisecond,
		"the meter throttles the loop to its new quota")
	res := containerStatus(t, r, c).GetResources().GetLinux()
	assert.Equal(t, int64(10000), res.GetCpuQuota())
	assert.Equal(t, int64(100000), res.GetCpuPeriod())
	assert.Equal(t, int64(102), res.GetCpuShares())
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, c).State)
}

// TestUpdateContainerResourcesKeepsWhatItIsNotGiven: a field left 0 keeps
// its value, as containerd's; a container not yet started is updated too,
// and starts with the new limit.
func TestUpdateContainerResourcesKeepsWhatItIsNotGiven(t *testing.T) {
	r, _ := fixture(t)
	c := createCPULimited(t, r, runSandbox(t, r, "web", "uid-1", nil), "app", "busybox:1.36", 20000, "sleep", "3600")
	require.NoError(t, updateResources(r, c, &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 64 << 20}))
	res := containerStatus(t, r, c).GetResources().GetLinux()
	assert.Equal(t, int64(64<<20), res.GetMemoryLimitInBytes())
	assert.Equal(t, int64(20000), res.GetCpuQuota(), "the quota it was created with")
	assert.Equal(t, int64(100000), res.GetCpuPeriod())

	startContainer(t, r, c)
	r.mu.Lock()
	memory := r.containers[c].running.MemoryMax()
	r.mu.Unlock()
	assert.Equal(t, int64(64<<20), memory, "it runs held to the new limit")
}

func TestUpdateContainerResourcesOfAnUnknownContainerIsNotFound(t *testing.T) {
	r, _ := fixture(t)
	err := updateResources(r, "no-such-container", &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 64 << 20})
	assert.Equal(t, codes.NotFound, status.Code(err), "%v", err)
}
