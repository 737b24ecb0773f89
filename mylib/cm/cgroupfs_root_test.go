package cm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// realCgroups is this machine's cgroup filesystem and a cgroup root of
// the test's own (/mykubelet-test-<random>, made in every hierarchy and
// removed, with all under it, when the test ends); the test is skipped
// unless it runs as root on a writable cgroup filesystem.
func realCgroups(t *testing.T) (*CgroupSubsystems, CgroupName) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it makes cgroups on this machine")
	}
	cs, err := GetCgroupSubsystems()
	if err != nil {
		t.Skipf("no cgroup filesystem: %v", err)
	}
	if err := unix.Access(cs.writableRoot(), unix.W_OK); err != nil {
		t.Skipf("cgroup filesystem %s not writable: %v", cs.writableRoot(), err)
	}
	cgm, err := NewCgroupManager(cs, CgroupfsDriver)
	require.NoError(t, err)
	root := CgroupName{fmt.Sprintf("mykubelet-test-%08x", rand.Uint32())}
	t.Cleanup(func() {
		assert.NoError(t, cgm.Destroy(&CgroupConfig{Name: root}), "the test's cgroups are removed")
		assert.False(t, cgm.Exists(root))
	})
	require.NoError(t, cgm.Create(&CgroupConfig{Name: root, ResourceParameters: &ResourceConfig{}}))
	return cs, root
}

// A BestEffort and a Guaranteed pod's cgroups on this machine, their
// limits read back from the cgroup filesystem, then removed.
func TestRealCgroupsBestEffortAndGuaranteed(t *testing.T) {
	cs, root := realCgroups(t)
	capacity, err := MachineCapacity()
	require.NoError(t, err)
	g := pod("guaranteed-"+root[0], container("c", rl("500m", "64Mi"), rl("500m", "64Mi")))
	be := pod("besteffort-"+root[0], container("c", nil, nil))
	m, err := NewContainerManager(cs, capacity, NodeConfig{CgroupsPerQOS: true, CgroupRoot: root.ToCgroupfs(), CgroupDriver: CgroupfsDriver,
		EnforceNodeAllocatable: []string{NodeAllocatableEnforcementKey}, EnforceCPULimits: true})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, m.Start(ctx, func() []*v1.Pod { return []*v1.Pod{g, be} }))
	pcm := m.NewPodContainerManager()
	require.NoError(t, pcm.EnsureExists(g))
	require.NoError(t, pcm.EnsureExists(be))

	gName, gParent := pcm.GetPodContainerName(g)
	beName, beParent := pcm.GetPodContainerName(be)
	assert.Equal(t, root.ToCgroupfs()+"/kubepods/pod"+string(g.UID), gParent)
	assert.Equal(t, root.ToCgroupfs()+"/kubepods/besteffort/pod"+string(be.UID), beParent)

	mem := capacity[v1.ResourceMemory]
	if cs.Version() == 1 {
		cpu, memory := cs.MountPoints["cpu"], cs.MountPoints["memory"]
		limit, err := strconv.ParseInt(read(t, memory, root.ToCgroupfs(), "kubepods", "memory.limit_in_bytes"), 10, 64)
		require.NoError(t, err)
		assert.InDelta(t, mem.Value(), limit, 4096, "node allocatable: the machine's memory (the kernel rounds to a page)")
		assert.Equal(t, "512", read(t, cpu, gParent, "cpu.shares"))
		assert.Equal(t, "100000", read(t, cpu, gParent, "cpu.cfs_period_us"))
		assert.Equal(t, "50000", read(t, cpu, gParent, "cpu.cfs_quota_us"))
		assert.Equal(t, "67108864", read(t, memory, gParent, "memory.limit_in_bytes"))
		assert.Equal(t, "2", read(t, cpu, beParent, "cpu.shares"))
		assert.Equal(t, "-1", read(t, cpu, beParent, "cpu.cfs_quota_us"), "BestEffort: no quota")
		assert.Equal(t, read(t, cs.MountPoints["cpuset"], "cpuset.cpus"), read(t, cs.MountPoints["cpuset"], beParent, "cpuset.cpus"))
	} else {
		assert.Equal(t, "20", read(t, cs.Unified, gParent, "cpu.weight"), "512 shares")
		assert.Equal(t, "50000 100000", read(t, cs.Unified, gParent, "cpu.max"))
		assert.Equal(t, "67108864", read(t, cs.Unified, gParent, "memory.max"))
		assert.Equal(t, "1", read(t, cs.Unified, beParent, "cpu.weight"))
		assert.Equal(t, "max", read(t, cs.Unified, beParent, "memory.max"))
	}

	found, err := pcm.GetAllPodsFromCgroups()
	require.NoError(t, err)
	assert.Equal(t, map[string]CgroupName{string(g.UID): gName, string(be.UID): beName},
		map[string]CgroupName{string(g.UID): found[g.UID], string(be.UID): found[be.UID]})
	require.NoError(t, pcm.Destroy(gName))
	require.NoError(t, pcm.Destroy(beName))
	assert.False(t, pcm.Exists(g))
	assert.False(t, pcm.Exists(be))
	for _, d := range (&cgroupManager{subsystems: cs}).dirs(beName) {
		assert.NoDirExists(t, d)
	}
	assert.DirExists(t, filepath.Join(cs.writableRoot(), root.ToCgroupfs(), "kubepods", "besteffort"))
}

// A process left in a pod's cgroup (in a cgroup under it, as a sandbox's):
// RemoveIfEmpty leaves the cgroup and the process be; Destroy kills the
// process and removes the cgroup, as upstream's Destroy does.
func TestRealCgroupsDestroyKillsWhatIsLeftInThePodCgroup(t *testing.T) {
	cs, root := realCgroups(t)
	capacity, err := MachineCapacity()
	require.NoError(t, err)
	be := pod("left-"+root[0], container("c", nil, nil))
	m, err := NewContainerManager(cs, capacity, NodeConfig{CgroupsPerQOS: true, CgroupRoot: root.ToCgroupfs(), CgroupDriver: CgroupfsDriver})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, m.Start(ctx, func() []*v1.Pod { return []*v1.Pod{be} }))
	pcm := m.NewPodContainerManager()
	require.NoError(t, pcm.EnsureExists(be))
	name, _ := pcm.GetPodContainerName(be)
	cgm := &cgroupManager{subsystems: cs}
	sandbox := append(append(CgroupName{}, name...), "sandbox")
	require.NoError(t, cgm.Create(&CgroupConfig{Name: sandbox, ResourceParameters: &ResourceConfig{}}))

	cmd := exec.Command("sleep", "300")
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	for _, d := range cgm.dirs(sandbox) {
		require.NoError(t, os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0))
	}
	require.Equal(t, []int{cmd.Process.Pid}, cgm.Pids(name))

	assert.Error(t, pcm.RemoveIfEmpty(name), "a cgroup with a process in it stays")
	assert.True(t, pcm.Exists(be))
	select {
	case err := <-exited:
		t.Fatalf("RemoveIfEmpty ended the process: %v", err)
	default:
	}

	require.NoError(t, pcm.Destroy(name))
	assert.False(t, pcm.Exists(be))
	select {
	case err := <-exited:
		assert.EqualError(t, err, "signal: killed")
	case <-time.After(10 * time.Second):
		t.Fatal("the process in the pod's cgroup still runs after Destroy")
	}
}
