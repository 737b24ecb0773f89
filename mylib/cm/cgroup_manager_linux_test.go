package cm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

func TestParseMountInfo(t *testing.T) {
	hybrid := `25 30 0:23 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
27 25 0:25 / /sys/fs/cgroup/systemd rw,nosuid shared:11 - cgroup cgroup rw,xattr,name=systemd
30 25 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:14 - cgroup cgroup rw,cpu,cpuacct
31 25 0:29 / /sys/fs/cgroup/memory rw,nosuid shared:15 - cgroup cgroup rw,memory
32 25 0:30 / /sys/fs/cgroup/pids rw,nosuid shared:16 - cgroup cgroup rw,pids
`
	cs, err := parseMountInfo(strings.NewReader(hybrid), "/sys/fs/cgroup")
	require.NoError(t, err)
	assert.Equal(t, 1, cs.Version(), "cgroup v2 beside v1 (hybrid) is v1 for the kubelet")
	assert.Equal(t, map[string]string{"systemd": "/sys/fs/cgroup/systemd", "cpu": "/sys/fs/cgroup/cpu,cpuacct",
		"cpuacct": "/sys/fs/cgroup/cpu,cpuacct", "memory": "/sys/fs/cgroup/memory", "pids": "/sys/fs/cgroup/pids",
		"unified": "/sys/fs/cgroup/unified"}, cs.MountPoints, "runc makes the containers' cgroups in the hybrid cgroup2 mount too")

	unified := `25 30 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
	cs, err = parseMountInfo(strings.NewReader(unified), "/sys/fs/cgroup")
	require.NoError(t, err)
	assert.Equal(t, 2, cs.Version())
	assert.Equal(t, "/sys/fs/cgroup", cs.Unified)

	_, err = parseMountInfo(strings.NewReader("22 1 0:21 / /proc rw - proc proc rw\n"), "/sys/fs/cgroup")
	assert.ErrorContains(t, err, "no cgroup filesystem is mounted")
}

func TestNewCgroupManagerRefusesSystemd(t *testing.T) {
	_, err := NewCgroupManager(&CgroupSubsystems{Unified: "/x"}, "systemd")
	assert.EqualError(t, err, `cgroupDriver "systemd" is not supported by this kubelet: only "cgroupfs"`)
}

// fakeV1 is a cgroup v1 layout in a directory: one hierarchy per
// controller, cpuset's root with CPUs and memory nodes.
func fakeV1(t *testing.T) *CgroupSubsystems {
	dir := t.TempDir()
	cs := &CgroupSubsystems{MountPoints: map[string]string{}}
	for _, c := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "systemd"} {
		p := filepath.Join(dir, c)
		require.NoError(t, os.MkdirAll(p, 0o755))
		cs.MountPoints[c] = p
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cpuset", "cpuset.cpus"), []byte("0-1\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cpuset", "cpuset.mems"), []byte("0\n"), 0o644))
	return cs
}

// fakeV2 is a cgroup v2 layout in a directory, whose root offers the
// usual controllers.
func fakeV2(t *testing.T) *CgroupSubsystems {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte("cpuset cpu io memory hugetlb pids rdma misc\n"), 0o644))
	return &CgroupSubsystems{Unified: dir}
}

func read(t *testing.T, path ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(path...))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

func startedManager(t *testing.T, cs *CgroupSubsystems, pods ...*v1.Pod) ContainerManager {
	capacity := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi"), ResourcePID: resource.MustParse("32768")}
	m, err := NewContainerManager(cs, capacity, NodeConfig{CgroupsPerQOS: true, CgroupDriver: "cgroupfs", EnforceNodeAllocatable: []string{"pods"},
		SystemReserved: rl("", "1Gi"), EnforceCPULimits: true})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, m.Start(ctx, func() []*v1.Pod { return pods }))
	return m
}

func guaranteedPod() *v1.Pod {
	return pod("g-uid", container("c", rl("500m", "64Mi"), rl("500m", "64Mi")))
}

func burstablePod() *v1.Pod {
	return pod("b-uid", container("c", rl("250m", "16Mi"), nil))
}

func TestContainerManagerV1Layout(t *testing.T) {
	cs := fakeV1(t)
	g, b, be := guaranteedPod(), burstablePod(), pod("be-uid", container("c", nil, nil))
	m := startedManager(t, cs, g, b, be)
	cpu, mem, pids, cpuset := cs.MountPoints["cpu"], cs.MountPoints["memory"], cs.MountPoints["pids"], cs.MountPoints["cpuset"]

	// Node allocatable on kubepods: 4Gi less 1Gi system-reserved, 2 CPUs.
	assert.Equal(t, "3221225472", read(t, mem, "kubepods", "memory.limit_in_bytes"))
	assert.Equal(t, "2048", read(t, cpu, "kubepods", "cpu.shares"))
	assert.Equal(t, "32768", read(t, pids, "kubepods", "pids.max"))
	assert.Equal(t, "0-1", read(t, cpuset, "kubepods", "cpuset.cpus"), "a new cpuset cgroup gets its parent's CPUs")
	assert.Equal(t, "2", read(t, cpu, "kubepods", "besteffort", "cpu.shares"))
	assert.DirExists(t, filepath.Join(cs.MountPoints["systemd"], "kubepods", "burstable"))

	pcm := m.NewPodContainerManager()
	for _, p := range []*v1.Pod{g, b, be} {
		require.NoError(t, pcm.EnsureExists(p))
		assert.True(t, pcm.Exists(p))
	}
	_, name := pcm.GetPodContainerName(g)
	assert.Equal(t, "/kubepods/podg-uid", name)
	assert.Equal(t, "512", read(t, cpu, "kubepods", "podg-uid", "cpu.shares"))
	assert.Equal(t, "100000", read(t, cpu, "kubepods", "podg-uid", "cpu.cfs_period_us"))
	assert.Equal(t, "50000", read(t, cpu, "kubepods", "podg-uid", "cpu.cfs_quota_us"))
	assert.Equal(t, "67108864", read(t, mem, "kubepods", "podg-uid", "memory.limit_in_bytes"))

	_, name = pcm.GetPodContainerName(b)
	assert.Equal(t, "/kubepods/burstable/podb-uid", name)
	assert.Equal(t, "256", read(t, cpu, "kubepods", "burstable", "podb-uid", "cpu.shares"))
	assert.NoFileExists(t, filepath.Join(cpu, "kubepods", "burstable", "podb-uid", "cpu.cfs_quota_us"), "no CPU limit: no quota")
	assert.NoFileExists(t, filepath.Join(mem, "kubepods", "burstable", "podb-uid", "memory.limit_in_bytes"), "no memory limit")

	_, name = pcm.GetPodContainerName(be)
	assert.Equal(t, "/kubepods/besteffort/podbe-uid", name)
	assert.Equal(t, "2", read(t, cpu, "kubepods", "besteffort", "podbe-uid", "cpu.shares"))

	// The QoS manager: Burstable's weight is its pods' requests.
	require.NoError(t, m.UpdateQOSCgroups())
	assert.Equal(t, "256", read(t, cpu, "kubepods", "burstable", "cpu.shares"))

	found, err := pcm.GetAllPodsFromCgroups()
	require.NoError(t, err)
	assert.Equal(t, map[types.UID]CgroupName{
		"g-uid": {"kubepods", "podg-uid"}, "b-uid": {"kubepods", "burstable", "podb-uid"}, "be-uid": {"kubepods", "besteffort", "podbe-uid"},
	}, found)
	ok, uid := pcm.IsPodCgroup("/kubepods/burstable/podb-uid")
	assert.True(t, ok)
	assert.Equal(t, types.UID("b-uid"), uid)
	ok, _ = pcm.IsPodCgroup("/kubepods/burstable")
	assert.False(t, ok)

	// A container's cgroup under the pod's (the runtime's) goes with it.
	require.NoError(t, os.MkdirAll(filepath.Join(cpu, "kubepods", "podg-uid", "container-1"), 0o755))
	require.NoError(t, pcm.Destroy(found["g-uid"]))
	assert.False(t, pcm.Exists(g))
	for _, mp := range cs.MountPoints {
		assert.NoDirExists(t, filepath.Join(mp, "kubepods", "podg-uid"))
	}
	require.NoError(t, pcm.Destroy(found["g-uid"]), "destroying what is gone is no error")
}

func TestContainerManagerV2Layout(t *testing.T) {
	cs := fakeV2(t)
	g, b := guaranteedPod(), burstablePod()
	m := startedManager(t, cs, g, b)
	root := cs.Unified

	assert.Equal(t, "+cpu +cpuset +memory +hugetlb +pids +io", read(t, root, "cgroup.subtree_control"))
	assert.Equal(t, "+cpu +cpuset +memory +hugetlb +pids +io", read(t, root, "kubepods", "cgroup.subtree_control"))
	assert.Equal(t, "3221225472", read(t, root, "kubepods", "memory.max"))
	assert.Equal(t, "79", read(t, root, "kubepods", "cpu.weight"), "2048 shares")
	assert.Equal(t, "32768", read(t, root, "kubepods", "pids.max"))
	assert.Equal(t, "1", read(t, root, "kubepods", "besteffort", "cpu.weight"))

	pcm := m.NewPodContainerManager()
	require.NoError(t, pcm.EnsureExists(g))
	require.NoError(t, pcm.EnsureExists(b))
	assert.Equal(t, "20", read(t, root, "kubepods", "podg-uid", "cpu.weight"), "512 shares")
	assert.Equal(t, "50000 100000", read(t, root, "kubepods", "podg-uid", "cpu.max"))
	assert.Equal(t, "67108864", read(t, root, "kubepods", "podg-uid", "memory.max"))
	assert.Equal(t, "10", read(t, root, "kubepods", "burstable", "podb-uid", "cpu.weight"), "256 shares")
	assert.NoFileExists(t, filepath.Join(root, "kubepods", "burstable", "podb-uid", "cpu.max"))
	assert.NoFileExists(t, filepath.Join(root, "kubepods", "burstable", "podb-uid", "memory.max"))
	assert.Equal(t, "+cpu +cpuset +memory +hugetlb +pids +io", read(t, root, "kubepods", "burstable", "cgroup.subtree_control"))

	found, err := pcm.GetAllPodsFromCgroups()
	require.NoError(t, err)
	assert.Len(t, found, 2)
	require.NoError(t, pcm.Destroy(found["b-uid"]))
	assert.NoDirExists(t, filepath.Join(root, "kubepods", "burstable", "podb-uid"))
	assert.DirExists(t, filepath.Join(root, "kubepods", "podg-uid"))
}

func TestCPUMaxWithoutQuota(t *testing.T) {
	q, p := int64(-1), uint64(100000)
	v, ok := cpuMax(&ResourceConfig{CPUQuota: &q, CPUPeriod: &p})
	assert.True(t, ok)
	assert.Equal(t, "max 100000", v)
	_, ok = cpuMax(&ResourceConfig{})
	assert.False(t, ok)
	assert.Equal(t, "max", pidsMax(-1))
}

func TestNewContainerManagerChecks(t *testing.T) {
	cs := fakeV1(t)
	_, err := NewContainerManager(cs, nil, NodeConfig{CgroupsPerQOS: true, CgroupRoot: "/absent"})
	assert.EqualError(t, err, `invalid configuration: cgroup-root "/absent" doesn't exist`)
	_, err = NewContainerManager(cs, nil, NodeConfig{CgroupsPerQOS: true, EnforceNodeAllocatable: []string{"system-reserved"}})
	assert.ErrorContains(t, err, `enforceNodeAllocatable "system-reserved" is not supported`)
	m, err := NewContainerManager(cs, nil, NodeConfig{CgroupsPerQOS: false})
	require.NoError(t, err)
	assert.False(t, m.CgroupsPerQOS())
	_, parent := m.NewPodContainerManager().GetPodContainerName(guaranteedPod())
	assert.Equal(t, "", parent, "without pod cgroups the runtime chooses")
}

// On cgroup v2, kubepods needs cpu and memory enabled below its root: a
// root where the kernel will not enable them (processes of its own) turns
// the manager off.
func TestControllersBelow(t *testing.T) {
	cs := fakeV2(t)
	require.NoError(t, controllersBelow(cs, RootCgroupName))
	assert.Equal(t, "+cpu +cpuset +memory +hugetlb +pids +io", read(t, cs.Unified, "cgroup.subtree_control"))

	// A root that offers no memory controller (and cannot enable one).
	require.NoError(t, os.WriteFile(filepath.Join(cs.Unified, "cgroup.controllers"), []byte("cpu pids\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(cs.Unified, "cgroup.subtree_control"), nil, 0o644))
	err := controllersBelow(cs, RootCgroupName)
	assert.EqualError(t, err, "cgroup v2: the memory controller cannot be enabled below / (a cgroup with processes of its own, as a container's root?)")
	assert.NoError(t, controllersBelow(cs, CgroupName{"absent"}), "NewContainerManager says that one")
}
