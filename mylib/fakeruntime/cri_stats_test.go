package fakeruntime

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"mykubelet/mylib/fakeruntime/sandboxproc"
)

// containerStatsOf reads container id's stats.
func containerStatsOf(t *testing.T, r *Runtime, id string) *runtimeapi.ContainerStats {
	t.Helper()
	resp, err := r.ContainerStats(context.Background(), &runtimeapi.ContainerStatsRequest{ContainerId: id})
	require.NoError(t, err)
	return resp.Stats
}

// cpuOf is container id's CPU time.
func cpuOf(t *testing.T, r *Runtime, id string) time.Duration {
	t.Helper()
	return time.Duration(containerStatsOf(t, r, id).Cpu.UsageCoreNanoSeconds.Value)
}

// waitCPU waits, bounded, until container id has used more than d of CPU.
// The bound is generous: two cores shared with other work under -race.
func waitCPU(t *testing.T, r *Runtime, id string, d time.Duration) {
	t.Helper()
	var last time.Duration
	require.Eventually(t, func() bool {
		last = cpuOf(t, r, id)
		return last > d
	}, 90*time.Second, 20*time.Millisecond, "container %s used more than %v of CPU (it used %v)", short(id), d, last)
}

// cpuSuite: a busy loop burns CPU, a sleep does not, a busy loop in a
// background job counts too; the rate comes on the second read; an exited
// container keeps its total and has no working set.
func cpuSuite(t *testing.T, r *Runtime) {
	ctx := context.Background()
	busySB := runSandbox(t, r, "burner", "uid-burner", nil)
	busy := createContainer(t, r, busySB, "burner", "sh", "-c", "while :; do :; done")
	sleeper := createContainer(t, r, runSandbox(t, r, "sleeper", "uid-sleeper", nil), "sleeper", "sleep", "3600")
	job := createContainer(t, r, runSandbox(t, r, "job", "uid-job", nil), "job", "sh", "-c", "while :; do :; done & sleep 3600")
	for _, c := range []string{busy, sleeper, job} {
		startContainer(t, r, c)
	}
	first := containerStatsOf(t, r, busy)
	assert.Nil(t, first.Cpu.UsageNanoCores, "no rate on the first read: nothing to compare with")

	waitCPU(t, r, busy, 100*time.Millisecond)
	waitCPU(t, r, job, 100*time.Millisecond)
	assert.Less(t, cpuOf(t, r, sleeper), 20*time.Millisecond, "a sleep burns nothing")

	before := containerStatsOf(t, r, busy)
	time.Sleep(300 * time.Millisecond)
	after := containerStatsOf(t, r, busy)
	require.NotNil(t, after.Cpu.UsageNanoCores, "a rate from the second read on")
	rate := after.Cpu.UsageNanoCores.Value
	want := float64(after.Cpu.UsageCoreNanoSeconds.Value-before.Cpu.UsageCoreNanoSeconds.Value) / float64(after.Cpu.Timestamp-before.Cpu.Timestamp) * 1e9
	assert.InDelta(t, want, float64(rate), want*0.01+1, "the rate since the previous read")
	assert.Greater(t, rate, uint64(0), "a busy loop burns")
	assert.LessOrEqual(t, rate, uint64(1_200_000_000), "one loop, one core at most")

	ps, err := r.PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: busySB})
	require.NoError(t, err)
	require.Len(t, ps.Stats.Linux.Containers, 1)
	assert.Equal(t, ps.Stats.Linux.Containers[0].Cpu.UsageCoreNanoSeconds.Value, ps.Stats.Linux.Cpu.UsageCoreNanoSeconds.Value, "the sandbox is its containers' sum")
	assert.GreaterOrEqual(t, ps.Stats.Linux.Cpu.UsageCoreNanoSeconds.Value, after.Cpu.UsageCoreNanoSeconds.Value)

	_, err = r.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: busy})
	require.NoError(t, err)
	waitDone(t, r, busy)
	time.Sleep(50 * time.Millisecond) // the sandbox process's exit message, if any, is in
	end := containerStatsOf(t, r, busy)
	assert.GreaterOrEqual(t, end.Cpu.UsageCoreNanoSeconds.Value, after.Cpu.UsageCoreNanoSeconds.Value, "an exited container keeps its total")
	assert.Zero(t, end.Memory.WorkingSetBytes.Value, "no working set once it exited")
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, end.Cpu.UsageCoreNanoSeconds.Value, containerStatsOf(t, r, busy).Cpu.UsageCoreNanoSeconds.Value, "and it grows no more")
}

func TestStatsCPUInProcess(t *testing.T) {
	r, err := NewRuntime(Config{Clock: clock.RealClock{}, StateDir: t.TempDir(), Isolation: IsolationInProcess})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	for _, img := range []string{"busybox:1.36", "registry.k8s.io/pause:3.10"} {
		_, err = r.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img}})
		require.NoError(t, err)
	}
	cpuSuite(t, r)
}

func TestStatsCPUInTheSandboxProcess(t *testing.T) {
	cpuSuite(t, sandboxRuntime(t))
}

// memorySuite: stress --vm's bytes are the working set, as the limits
// charge them.
func memorySuite(t *testing.T, r *Runtime) {
	_, err := r.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "polinux/stress"}})
	require.NoError(t, err)
	sb := runSandbox(t, r, "memory-demo", "uid-memory", nil)
	c := createLimited(t, r, sb, "memory-demo-ctr", "polinux/stress", 200<<20, "stress", "--vm", "1", "--vm-bytes", "50M", "--vm-hang", "1")
	startContainer(t, r, c)
	var ws uint64
	require.Eventually(t, func() bool {
		ws = containerStatsOf(t, r, c).Memory.WorkingSetBytes.Value
		return ws >= 50<<20
	}, 30*time.Second, 10*time.Millisecond, "stress holds 50M (working set %d)", ws)
	st := containerStatsOf(t, r, c)
	assert.Less(t, st.Memory.WorkingSetBytes.Value, uint64(51<<20), "50M, its variables and its few files")
	assert.Equal(t, st.Memory.WorkingSetBytes.Value, st.Memory.UsageBytes.Value)
	assert.Equal(t, st.Memory.WorkingSetBytes.Value, st.Memory.RssBytes.Value+st.WritableLayer.UsedBytes.Value)
	assert.Less(t, time.Duration(st.Cpu.UsageCoreNanoSeconds.Value), 20*time.Millisecond, "a vm hog of the mock only holds its bytes")
}

func TestStatsMemoryInProcess(t *testing.T) {
	memorySuite(t, fixtureConfig(t, Config{}))
}

func TestStatsMemoryInTheSandboxProcess(t *testing.T) {
	memorySuite(t, sandboxRuntime(t))
}

// TestStressCPUBurnsUntilItsTimeout: stress --cpu 2 burns on two threads
// until its timeout (on the runtime's clock), then exits 0 and burns no
// more.
func TestStressCPUBurnsUntilItsTimeout(t *testing.T) {
	r, clk := fixture(t)
	c := createContainer(t, r, runSandbox(t, r, "stress", "uid-stress", nil), "stress", "stress", "--cpu", "2", "--timeout", "5s")
	startContainer(t, r, c)
	waitCPU(t, r, c, 100*time.Millisecond)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, c).State)
	clk.Step(5 * time.Second)
	waitDone(t, r, c)
	st := containerStatus(t, r, c)
	assert.Equal(t, int32(0), st.ExitCode, "a run that completed")
	total := cpuOf(t, r, c)
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, total, cpuOf(t, r, c), "its hogs stopped")
}

// TestCPURateIsSinceThePreviousRead: containerd's UsageNanoCores.
func TestCPURateIsSinceThePreviousRead(t *testing.T) {
	var c cpuRate
	assert.Nil(t, c.update(1_000, 1_000_000_000), "first read")
	v := c.update(500_001_000, 2_000_000_000) // half a second of CPU in a second
	require.NotNil(t, v)
	assert.Equal(t, uint64(500_000_000), v.Value)
	v = c.update(500_001_000, 2_000_000_000)
	require.NotNil(t, v, "no time passed: the last rate again")
	assert.Equal(t, uint64(500_000_000), v.Value)
	v = c.update(500_001_000, 4_000_000_000)
	require.NotNil(t, v)
	assert.Zero(t, v.Value, "idle for two seconds")
}

// TestPodNetworkStats: a sandbox's network bytes are what its servers
// read and wrote, in this process (fake clock) and in the sandbox process.
func TestPodNetworkStats(t *testing.T) {
	for name, clk := range map[string]clock.Clock{"in-process": clocktesting.NewFakeClock(t0), "sandbox-process": clock.RealClock{}} {
		t.Run(name, func(t *testing.T) {
			r := networkRuntime(t, clk)
			ip, id := serverContainer(t, r, "web", "nginx:1.27", nil)
			code, body := get(t, "http://"+net.JoinHostPort(ip, "80")+"/")
			require.Equal(t, http.StatusOK, code)
			r.mu.Lock()
			sb := r.containers[id].sandboxID
			r.mu.Unlock()
			// The server counts a write once it returned, which may be
			// after the client read it: wait for the count.
			var eth0 *runtimeapi.NetworkInterfaceUsage
			require.Eventually(t, func() bool {
				resp, err := r.PodSandboxStats(context.Background(), &runtimeapi.PodSandboxStatsRequest{PodSandboxId: sb})
				require.NoError(t, err)
				eth0 = resp.Stats.Linux.Network.DefaultInterface
				return eth0.TxBytes.Value > 0
			}, 10*time.Second, 10*time.Millisecond, "the response counted")
			assert.Equal(t, "eth0", eth0.Name)
			assert.Greater(t, eth0.RxBytes.Value, uint64(len("GET / HTTP/1.1\r\n")), "the request")
			assert.Greater(t, eth0.TxBytes.Value, uint64(len(body)), "the welcome page and its headers")
		})
	}
}

// TestSandboxUsageAnswersInParts: the sandbox process answers a usage
// request for more containers than one message holds in parts, all of
// which the runtime gathers.
func TestSandboxUsageAnswersInParts(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "usage")
		defer f.Close()
		c, err := net.FileConn(f)
		require.NoError(t, err)
		return c.(*net.UnixConn)
	}
	runtimeEnd, childEnd := conn(fds[0]), conn(fds[1])
	const n = 2*sandboxproc.UsagesPerMessage + 17
	srv := &sandboxproc.SandboxServer{Conn: childEnd, Runs: map[string]*sandboxproc.ChildRun{}, Containers: map[string]*sandboxproc.ChildContainer{}}
	for i := range n {
		c := srv.Container(fmt.Sprintf("c%03d", i))
		c.Running.Traffic.Rx.Store(int64(i))
	}
	go srv.Serve()
	cmd := exec.Command("true") // readExits waits for it once the socket closes
	require.NoError(t, cmd.Start())
	child := &sandboxChild{cmd: cmd, conn: runtimeEnd, stderr: &tailBuffer{max: 64}, runs: map[string]*remoteRun{}, queries: map[string]chan sandboxproc.RunExit{}, closing: true, exited: make(chan struct{})}
	go child.readExits()
	t.Cleanup(func() { runtimeEnd.Close(); childEnd.Close() })
	got, err := child.usage(context.Background())
	require.NoError(t, err)
	require.Len(t, got, n)
	assert.Equal(t, int64(n-1), got[fmt.Sprintf("c%03d", n-1)].Rx)
}
