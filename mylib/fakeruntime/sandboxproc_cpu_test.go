package fakeruntime

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cpuSeconds is the CPU time (user and system, every thread) process pid
// has used, from /proc/<pid>/stat (clock ticks of 1/100 s).
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	// The fields after the command's closing parenthesis: state is the
	// first (field 3), utime and stime are fields 14 and 15.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, err := strconv.ParseFloat(f[11], 64)
	require.NoError(t, err)
	stime, err := strconv.ParseFloat(f[12], 64)
	require.NoError(t, err)
	return (utime + stime) / 100
}

// TestACPULimitHoldsThePodToItsQuota: a pod whose cgroup has 100m of CPU
// (a quota of 10 ms every 100 ms, as the container manager writes for
// limits.cpu: 100m) and a container in a busy loop: its sandbox process,
// in that cgroup, uses at most about 0.15 core, however many cores the
// machine has free. (A busy loop in the runtime's shared process, in no
// cgroup, used a whole core.) A busy machine can only give it less, so the
// bound holds under load.
func TestACPULimitHoldsThePodToItsQuota(t *testing.T) {
	r := sandboxRuntime(t)
	parent := testCgroup(t, r, 0)
	v2, v1, err := cgroupHierarchies()
	require.NoError(t, err)
	if v2 != "" {
		require.NoError(t, os.WriteFile(filepath.Join(v2, parent, "cpu.max"), []byte("10000 100000"), 0))
	} else {
		mp, ok := v1["cpu"]
		if !ok {
			t.Skip("no cpu hierarchy")
		}
		require.NoError(t, os.WriteFile(filepath.Join(mp, parent, "cpu.cfs_period_us"), []byte("100000"), 0))
		require.NoError(t, os.WriteFile(filepath.Join(mp, parent, "cpu.cfs_quota_us"), []byte("10000"), 0))
	}
	sb := runSandboxIn(t, r, "spinner", parent)
	c := createContainer(t, r, sb, "app", "sh", "-c", "while :; do :; done")
	startContainer(t, r, c)
	pid := sandboxPID(t, r, sb)

	time.Sleep(time.Second) // past the start
	const window = 5 * time.Second
	before, start := cpuSeconds(t, pid), time.Now()
	time.Sleep(window)
	used, wall := cpuSeconds(t, pid)-before, time.Since(start).Seconds()
	t.Logf("the 100m pod used %.2f s of CPU in %.2f s", used, wall)
	assert.Greater(t, used, 0.0, "the busy loop ran")
	assert.LessOrEqual(t, used, 0.15*wall, "at most ~0.15 core with a 100m quota")
}
