package cm

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// GetPodCgroupConfig reads back what EnsureExists wrote; SetPodCgroupConfig
// writes only the fields it is given; GetPodCgroupMemoryUsage reads the
// usage file, on cgroup v1 and v2 (in a test's directory).
func TestPodCgroupConfigV1AndV2(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cs        *CgroupSubsystems
		usageFile string
	}{
		{"v1", fakeV1(t), "memory.usage_in_bytes"},
		{"v2", fakeV2(t), "memory.current"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := guaranteedPod()
			pcm := startedManager(t, tc.cs, g).NewPodContainerManager()
			require.NoError(t, pcm.EnsureExists(g))

			cpu, err := pcm.GetPodCgroupConfig(g, v1.ResourceCPU)
			require.NoError(t, err)
			shares := uint64(512)
			if tc.cs.Version() == 2 {
				shares = 500 // cpu.weight 20 back to shares: the weight's rounding
			}
			assert.Equal(t, &ResourceConfig{CPUShares: &shares, CPUQuota: ptr.To(int64(50000)), CPUPeriod: ptr.To(uint64(100000))}, cpu)
			mem, err := pcm.GetPodCgroupConfig(g, v1.ResourceMemory)
			require.NoError(t, err)
			assert.Equal(t, &ResourceConfig{Memory: ptr.To(int64(64 << 20))}, mem)

			require.NoError(t, pcm.SetPodCgroupConfig(g, &ResourceConfig{Memory: ptr.To(int64(128 << 20))}))
			require.NoError(t, pcm.SetPodCgroupConfig(g, &ResourceConfig{CPUQuota: ptr.To(int64(100000)), CPUPeriod: ptr.To(uint64(100000))}))
			mem, err = pcm.GetPodCgroupConfig(g, v1.ResourceMemory)
			require.NoError(t, err)
			assert.Equal(t, int64(128<<20), *mem.Memory)
			cpu, err = pcm.GetPodCgroupConfig(g, v1.ResourceCPU)
			require.NoError(t, err)
			assert.Equal(t, int64(100000), *cpu.CPUQuota)
			assert.Equal(t, shares, *cpu.CPUShares, "the shares were not given: left as they were")

			name, _ := pcm.GetPodContainerName(g)
			dir := filepath.Join(tc.cs.Unified, name.ToCgroupfs())
			if tc.cs.Version() == 1 {
				dir = filepath.Join(tc.cs.MountPoints["memory"], name.ToCgroupfs())
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, tc.usageFile), []byte("4096\n"), 0o644))
			usage, err := pcm.GetPodCgroupMemoryUsage(g)
			require.NoError(t, err)
			assert.Equal(t, uint64(4096), usage)
		})
	}
}

// cgroup v2 without limits: cpu.max "max", memory.max "max".
func TestGetCgroupConfigV2Unlimited(t *testing.T) {
	cs := fakeV2(t)
	dir := filepath.Join(cs.Unified, "x")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for f, v := range map[string]string{"cpu.max": "max 100000\n", "cpu.weight": "100\n", "memory.max": "max\n"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644))
	}
	cgm := &cgroupManager{subsystems: cs}
	cpu, err := cgm.GetCgroupConfig(CgroupName{"x"}, v1.ResourceCPU)
	require.NoError(t, err)
	assert.Equal(t, int64(-1), *cpu.CPUQuota)
	assert.Equal(t, uint64(100000), *cpu.CPUPeriod)
	assert.Equal(t, uint64(2597), *cpu.CPUShares, "weight 100")
	mem, err := cgm.GetCgroupConfig(CgroupName{"x"}, v1.ResourceMemory)
	require.NoError(t, err)
	assert.Equal(t, int64(1<<63-1), *mem.Memory)
}

// Without pod cgroups there is nothing to read or set.
func TestPodCgroupConfigWithoutPodCgroups(t *testing.T) {
	pcm := NewStubContainerManager().NewPodContainerManager()
	cfg, err := pcm.GetPodCgroupConfig(guaranteedPod(), v1.ResourceMemory)
	assert.NoError(t, err)
	assert.Nil(t, cfg)
	assert.NoError(t, pcm.SetPodCgroupConfig(guaranteedPod(), &ResourceConfig{Memory: ptr.To(int64(1))}))
}

// On this machine's cgroups (as root): a pod cgroup given new CPU and
// memory holds them, read from the files and by GetPodCgroupConfig; its
// memory usage is read from the kernel.
func TestRealCgroupsSetPodCgroupConfig(t *testing.T) {
	cs, root := realCgroups(t)
	capacity, err := MachineCapacity()
	require.NoError(t, err)
	g := pod("resize-"+root[0], container("c", rl("500m", "64Mi"), rl("500m", "64Mi")))
	m, err := NewContainerManager(cs, capacity, NodeConfig{CgroupsPerQOS: true, CgroupRoot: root.ToCgroupfs(), CgroupDriver: CgroupfsDriver, EnforceCPULimits: true})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, m.Start(ctx, func() []*v1.Pod { return []*v1.Pod{g} }))
	pcm := m.NewPodContainerManager()
	require.NoError(t, pcm.EnsureExists(g))
	name, parent := pcm.GetPodContainerName(g)
	t.Cleanup(func() { assert.NoError(t, pcm.Destroy(name)) })

	resized := g.DeepCopy()
	resized.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: rl("1", "128Mi"), Limits: rl("1", "128Mi")}
	require.NoError(t, pcm.SetPodCgroupConfig(g, ResourceConfigForPod(resized, true, QuotaPeriod)))

	mem, err := pcm.GetPodCgroupConfig(g, v1.ResourceMemory)
	require.NoError(t, err)
	assert.Equal(t, int64(128<<20), *mem.Memory)
	cpu, err := pcm.GetPodCgroupConfig(g, v1.ResourceCPU)
	require.NoError(t, err)
	assert.Equal(t, int64(100000), *cpu.CPUQuota)
	if cs.Version() == 1 {
		assert.Equal(t, strconv.Itoa(128<<20), read(t, cs.MountPoints["memory"], parent, "memory.limit_in_bytes"))
		assert.Equal(t, "100000", read(t, cs.MountPoints["cpu"], parent, "cpu.cfs_quota_us"))
		assert.Equal(t, "1024", read(t, cs.MountPoints["cpu"], parent, "cpu.shares"))
		assert.Equal(t, uint64(1024), *cpu.CPUShares)
	} else {
		assert.Equal(t, strconv.Itoa(128<<20), read(t, cs.Unified, parent, "memory.max"))
		assert.Equal(t, "100000 100000", read(t, cs.Unified, parent, "cpu.max"))
	}
	_, err = pcm.GetPodCgroupMemoryUsage(g)
	assert.NoError(t, err)
}
