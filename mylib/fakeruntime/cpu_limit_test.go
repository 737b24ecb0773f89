package fakeruntime

// limits.cpu where no cgroup holds a container's scripts: the
// interpreter's meter throttles them to their CFS quota (sandboxproc's
// shell_usage.go). Each test runs a container with the quota beside one
// without, on the same loaded machine, so that it proves the throttle is
// what holds the first. (The pod cgroup's case: sandboxproc_cpu_test.go.)

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/fakeruntime/sandboxproc"
)

// createCPULimited creates a container of image running cmd with a CPU
// limit of quota µs every 100 ms, as the kubelet sets limits.cpu
// (quota = milliCPU*100000/1000); quota 0: no limit.
func createCPULimited(t *testing.T, r *Runtime, sandboxID, name, image string, quota int64, cmd ...string) string {
	t.Helper()
	res := &runtimeapi.LinuxContainerResources{}
	if quota > 0 {
		res.CpuQuota, res.CpuPeriod = quota, 100000
	}
	resp, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: image},
		Command:  cmd,
		Linux:    &runtimeapi.LinuxContainerConfig{Resources: res},
	}})
	require.NoError(t, err)
	return resp.ContainerId
}

// cpuWindow is the CPU that each of containers ids used in window of wall
// time, by the meter's count (their stats), in cores; with the CPU time of
// process pid (0: none) in that window, in cores too.
func cpuWindow(t *testing.T, r *Runtime, window time.Duration, pid int, ids ...string) (cores []float64, process float64) {
	t.Helper()
	before := make([]time.Duration, len(ids))
	for i, id := range ids {
		before[i] = cpuOf(t, r, id)
	}
	var p0 float64
	if pid != 0 {
		p0 = cpuSeconds(t, pid)
	}
	start := time.Now()
	time.Sleep(window)
	wall := time.Since(start).Seconds()
	if pid != 0 {
		process = (cpuSeconds(t, pid) - p0) / wall
	}
	for i, id := range ids {
		cores = append(cores, (cpuOf(t, r, id)-before[i]).Seconds()/wall)
	}
	return cores, process
}

// cpuStatOf is how often container id, run in the runtime's process, was
// throttled.
func cpuStatOf(r *Runtime, id string) sandboxproc.CPUStat {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.containers[id].running.CPUStat()
}

// TestACPULimitThrottlesTheInterpreter: in a runtime that keeps the
// scripts in its own process (a fake clock), a container with 100m of CPU
// (a quota of 10 ms every 100 ms) in a busy loop uses at most about 0.15
// core, by its meter and by the process's own CPU time; the same loop
// with no limit, beside it, uses more. The loop of redirections only,
// which runs no command, is held too (each turn of a loop passes the call
// handler). Without the throttle, the limited loop used a whole core.
func TestACPULimitThrottlesTheInterpreter(t *testing.T) {
	for _, script := range []string{"while :; do :; done", "while 2>&1; do 2>&1; done"} {
		t.Run(script, func(t *testing.T) {
			r, _ := fixture(t)
			limited := createCPULimited(t, r, runSandbox(t, r, "limited", "uid-limited", nil), "limited", "busybox:1.36", 10000, "sh", "-c", script)
			startContainer(t, r, limited)
			waitCPU(t, r, limited, 0)

			const window = 3 * time.Second
			cores, process := cpuWindow(t, r, window, os.Getpid(), limited)
			t.Logf("the 100m container used %.3f core (the runtime's process %.3f)", cores[0], process)
			assert.Greater(t, cores[0], 0.0, "the busy loop ran")
			assert.LessOrEqual(t, cores[0], 0.15, "at most ~0.15 core with a 100m quota, by the meter")
			assert.LessOrEqual(t, process, 0.3, "and by the runtime's process, which does little else")

			free := createCPULimited(t, r, runSandbox(t, r, "free", "uid-free", nil), "free", "busybox:1.36", 0, "sh", "-c", script)
			startContainer(t, r, free)
			waitCPU(t, r, free, 0)
			cores, _ = cpuWindow(t, r, window, 0, limited, free)
			t.Logf("beside one with no limit: %.3f core, and it %.3f core", cores[0], cores[1])
			assert.LessOrEqual(t, cores[0], 0.15, "still held")
			// No limit: the loop takes what the machine gives it, more than
			// the limited one's, but how much depends on what else runs
			// (0.30 core in a CI run at load 8).
			assert.Greater(t, cores[1], cores[0], "more than the limited one")
			assert.Positive(t, cpuStatOf(r, limited).NrThrottled, "the limited one was throttled")
			assert.Zero(t, cpuStatOf(r, free).NrThrottled)
		})
	}
}

// TestACPULimitHoldsStressCPU: stress --cpu 2 in a container with 200m
// uses at most about 0.3 core, two spinning hogs together; with no limit,
// beside it, more.
func TestACPULimitHoldsStressCPU(t *testing.T) {
	r := fixtureConfig(t, Config{})
	limited := createCPULimited(t, r, runSandbox(t, r, "limited", "uid-limited", nil), "limited", "polinux/stress", 20000, "stress", "--cpu", "2")
	free := createCPULimited(t, r, runSandbox(t, r, "free", "uid-free", nil), "free", "polinux/stress", 0, "stress", "--cpu", "2")
	for _, c := range []string{limited, free} {
		startContainer(t, r, c)
		waitCPU(t, r, c, 0)
	}
	cores, _ := cpuWindow(t, r, 3*time.Second, 0, limited, free)
	t.Logf("stress --cpu 2 with 200m used %.3f core; with no limit %.3f core", cores[0], cores[1])
	assert.Greater(t, cores[0], 0.0, "its hogs ran")
	assert.LessOrEqual(t, cores[0], 0.3, "at most ~0.3 core with a 200m quota")
	// How much more the free one gets depends on what else the machine
	// runs (0.56 core beside 0.20, in a run of the package at load 3 to 5): more, and never
	// throttled, is what the limit's absence promises.
	assert.Greater(t, cores[1], cores[0], "more with no limit")
	assert.Positive(t, cpuStatOf(r, limited).NrThrottled, "the limited one was throttled")
	assert.Zero(t, cpuStatOf(r, free).NrThrottled)
}

// TestACPULimitHoldsASandboxProcessWithNoCgroup: a pod with no
// CgroupParent (a runtime driven by crictl) gets no cgroup, so its sandbox
// process is sent the container's quota and its interpreter throttles
// the container: a 100m busy loop uses at most about 0.15 core, by the
// meter and by the process's CPU time; a pod with no limit, beside it,
// more.
func TestACPULimitHoldsASandboxProcessWithNoCgroup(t *testing.T) {
	r := sandboxRuntime(t)
	sb := runSandboxIn(t, r, "limited", "")
	limited := createCPULimited(t, r, sb, "limited", "busybox:1.36", 10000, "sh", "-c", "while :; do :; done")
	startContainer(t, r, limited)
	require.Nil(t, r.sandbox.lookup(sb).cgroup, "no cgroup: the interpreter enforces the limit")
	waitCPU(t, r, limited, 0)

	freeSB := runSandboxIn(t, r, "free", "")
	free := createCPULimited(t, r, freeSB, "free", "busybox:1.36", 0, "sh", "-c", "while :; do :; done")
	startContainer(t, r, free)
	waitCPU(t, r, free, 0)

	const window = 5 * time.Second
	pid, freePID := sandboxPID(t, r, sb), sandboxPID(t, r, freeSB)
	p0, f0, start := cpuSeconds(t, pid), cpuSeconds(t, freePID), time.Now()
	cores, _ := cpuWindow(t, r, window, 0, limited, free)
	wall := time.Since(start).Seconds()
	process, freeProcess := (cpuSeconds(t, pid)-p0)/wall, (cpuSeconds(t, freePID)-f0)/wall
	t.Logf("the 100m pod's process used %.3f core (its meter %.3f); the pod with no limit %.3f core (its meter %.3f)", process, cores[0], freeProcess, cores[1])
	assert.Greater(t, cores[0], 0.0, "the busy loop ran")
	assert.LessOrEqual(t, cores[0], 0.15, "at most ~0.15 core with a 100m quota, by the meter")
	assert.LessOrEqual(t, process, 0.15, "and by its process's CPU time")
	// How much more depends on what else the machine runs (0.34 core in
	// a CI run at load 8).
	assert.Greater(t, freeProcess, process, "more with no limit")
}

// TestBlockedJobsOfOneContainerLeaveTheOthersTheirMeter: two containers
// each run 300 jobs blocked in a read, `{ sleep 100000 | read v; } &`,
// each holding a metered thread while it waits. Before, they took all 512
// of the process's, and another pod's 100m busy loop then ran unmetered,
// at 0.9 core, throttled 0 times. Each container holds its share at most
// now (sandboxproc's maxMeteredPerContainer), and the 100m loop is held
// to its quota.
func TestBlockedJobsOfOneContainerLeaveTheOthersTheirMeter(t *testing.T) {
	r, _ := fixture(t)
	const jobs = 300
	for _, name := range []string{"hog1", "hog2"} {
		c := createCPULimited(t, r, runSandbox(t, r, name, "uid-"+name, nil), name, "busybox:1.36", 0, "sh", "-c",
			`i=0; while [ $i -lt 300 ]; do { sleep 100000 | read v; } & i=$((i+1)); done; wait`)
		startContainer(t, r, c)
		require.Eventually(t, func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.containers[c].running.Count("sleep") == jobs
		}, time.Minute, 20*time.Millisecond, "%s started its %d jobs", name, jobs)
	}
	time.Sleep(200 * time.Millisecond) // each job's read is blocked by now (its sleep is)
	limited := createCPULimited(t, r, runSandbox(t, r, "limited", "uid-limited", nil), "limited", "busybox:1.36", 10000, "sh", "-c", "while :; do :; done")
	startContainer(t, r, limited)
	cores, process := cpuWindow(t, r, 3*time.Second, os.Getpid(), limited)
	t.Logf("the 100m container beside 600 blocked jobs: %.3f core by its meter, the runtime's process %.3f core; %+v", cores[0], process, cpuStatOf(r, limited))
	assert.Greater(t, cores[0], 0.0, "it is metered")
	assert.LessOrEqual(t, cores[0], 0.15, "at most ~0.15 core with a 100m quota, by the meter")
	assert.LessOrEqual(t, process, 0.3, "and by the runtime's process, whose other containers wait")
	assert.Positive(t, cpuStatOf(r, limited).NrThrottled, "it was throttled")
}
