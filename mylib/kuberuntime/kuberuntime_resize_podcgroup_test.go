package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/cm"
	kubecontainer "mykubelet/mylib/container"
)

// resizeLog is what a resize did, in order, to the pod's cgroup and to
// the containers.
type resizeLog []string

// loggingRuntime is a runtime whose UpdateContainerResources logs the
// container's new memory limit and CPU quota (and, with update, applies
// them); nothing else of it is called by a resize.
type loggingRuntime struct {
	runtimeapi.RuntimeServiceClient
	log    *resizeLog
	update func(id string, r *runtimeapi.LinuxContainerResources) error
}

func (r loggingRuntime) UpdateContainerResources(_ context.Context, req *runtimeapi.UpdateContainerResourcesRequest, _ ...grpc.CallOption) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	l := req.GetLinux()
	*r.log = append(*r.log, fmt.Sprintf("container %s memory=%dMi quota=%d", req.ContainerId, l.MemoryLimitInBytes>>20, l.CpuQuota))
	if r.update != nil {
		if err := r.update(req.ContainerId, l); err != nil {
			return nil, err
		}
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// fakePodCgroup is a pod cgroup's CPU and memory, kept by a fake
// PodContainerManager that logs what is set (the rest of the interface is
// not called by a resize).
type fakePodCgroup struct {
	cm.PodContainerManager
	log                  *resizeLog
	memory, usage, quota int64
	shares               uint64
	setErr               error
}

func (f *fakePodCgroup) GetPodCgroupConfig(_ *v1.Pod, r v1.ResourceName) (*cm.ResourceConfig, error) {
	memory, quota, shares, period := f.memory, f.quota, f.shares, uint64(100000)
	if r == v1.ResourceMemory {
		return &cm.ResourceConfig{Memory: &memory}, nil
	}
	return &cm.ResourceConfig{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period}, nil
}

func (f *fakePodCgroup) SetPodCgroupConfig(_ *v1.Pod, c *cm.ResourceConfig) error {
	if f.setErr != nil {
		return f.setErr
	}
	switch {
	case c.Memory != nil:
		f.memory = *c.Memory
		*f.log = append(*f.log, fmt.Sprintf("pod memory=%dMi", f.memory>>20))
	case c.CPUQuota != nil:
		f.quota = *c.CPUQuota
		*f.log = append(*f.log, fmt.Sprintf("pod quota=%d", f.quota))
	case c.CPUShares != nil:
		f.shares = *c.CPUShares
		*f.log = append(*f.log, fmt.Sprintf("pod shares=%d", f.shares))
	}
	return nil
}

func (f *fakePodCgroup) GetPodCgroupMemoryUsage(*v1.Pod) (uint64, error) { return uint64(f.usage), nil }

// fakeContainerManager hands out one pod cgroup manager, CFS quota on.
type fakeContainerManager struct{ pcm cm.PodContainerManager }

func (f fakeContainerManager) NewPodContainerManager() cm.PodContainerManager { return f.pcm }
func (f fakeContainerManager) GetNodeConfig() cm.NodeConfig {
	return cm.NodeConfig{EnforceCPULimits: true, CPUCFSQuotaPeriod: 100 * time.Millisecond}
}

// twoContainerPod is a Guaranteed pod: a with cpu and memory, b with
// 100m and 64Mi.
func twoContainerPod(cpu, memory string) *v1.Pod {
	p := testPod(v1.RestartPolicyAlways, nil, "a", "b")
	p.Spec.Containers[0].Resources = cpuMemory(cpu, memory)
	p.Spec.Containers[1].Resources = cpuMemory("100m", "64Mi")
	return p
}

// resizeA resizes container a of the pod (ID "a"), whose cgroup was made
// for a with 200m and 128Mi, to cpu and memory: the log of what was done.
func resizeA(t *testing.T, containerManager ContainerManager, cpu, memory string) (resizeLog, *kubecontainer.SyncResult, actuatedRecord) {
	var log resizeLog
	if f, ok := containerManager.(fakeContainerManager); ok {
		if pc, ok := f.pcm.(*fakePodCgroup); ok {
			pc.log = &log
		}
	}
	pod := twoContainerPod(cpu, memory)
	actuated := actuatedRecord{}
	m := &Manager{rs: loggingRuntime{log: &log}, allocationManager: actuated, containerManager: containerManager}
	changes := podActions{ContainersToUpdate: []containerToUpdateInfo{{container: &pod.Spec.Containers[0], kubeContainerID: kubecontainer.ContainerID{Type: "fake", ID: "a"}}}}
	r := m.doPodResizeAction(context.Background(), pod, changes)
	return log, r, actuated
}

// podCgroupOf200m128Mi is the cgroup of twoContainerPod("200m", "128Mi"):
// 300m (307 shares, quota 30000) and 192Mi.
func podCgroupOf200m128Mi() *fakePodCgroup {
	return &fakePodCgroup{memory: 192 << 20, usage: 100 << 20, quota: 30000, shares: 307}
}

func TestDoPodResizeActionResizesThePodCgroupInUpstreamsOrder(t *testing.T) {
	for _, tc := range []struct {
		name        string
		cpu, memory string
		want        resizeLog
	}{
		{name: "grown: the pod cgroup first (limits before requests), then the containers", cpu: "500m", memory: "256Mi",
			want: resizeLog{"pod memory=320Mi", "pod quota=60000", "pod shares=614", "container a memory=256Mi quota=50000"}},
		{name: "shrunk: the containers first, then the pod cgroup (requests before limits)", cpu: "100m", memory: "64Mi",
			want: resizeLog{"container a memory=64Mi quota=10000", "pod shares=204", "pod quota=20000", "pod memory=128Mi"}},
		{name: "memory grown, CPU shrunk: each in its own order", cpu: "100m", memory: "256Mi",
			want: resizeLog{"pod memory=320Mi", "container a memory=256Mi quota=10000", "pod shares=204", "pod quota=20000"}},
		{name: "unchanged pod total: the containers only", cpu: "200m", memory: "128Mi",
			want: resizeLog{"container a memory=128Mi quota=20000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := podCgroupOf200m128Mi()
			log, r, actuated := resizeA(t, fakeContainerManager{pc}, tc.cpu, tc.memory)
			require.NoError(t, r.Error)
			assert.Equal(t, tc.want, log)
			assert.Contains(t, actuated, "a", "recorded as actuated")
		})
	}
}

// The pod's memory limit is not lowered below what the pod uses now:
// the resize fails before anything changes, and nothing is actuated.
func TestDoPodResizeActionRefusesAPodMemoryLimitBelowUsage(t *testing.T) {
	pc := podCgroupOf200m128Mi()
	pc.usage = 150 << 20
	log, r, actuated := resizeA(t, fakeContainerManager{pc}, "200m", "64Mi") // the pod's limit to 128Mi
	assert.ErrorIs(t, r.Error, kubecontainer.ErrResizePodInPlace)
	assert.Equal(t, fmt.Sprintf("attempting to set pod memory limit (%d) below current usage (%d)", 128<<20, 150<<20), r.Message, "upstream's words")
	assert.Empty(t, log, "nothing changed")
	assert.Empty(t, actuated)
}

// A pod cgroup that refuses its shrink (after the containers shrank)
// leaves the resize in progress: the containers are not recorded as
// actuated, so the next sync redoes it all.
func TestDoPodResizeActionFailingPodCgroupShrinkIsNotActuated(t *testing.T) {
	pc := podCgroupOf200m128Mi()
	pc.setErr = errors.New("device or resource busy")
	log, r, actuated := resizeA(t, fakeContainerManager{pc}, "100m", "64Mi")
	assert.ErrorIs(t, r.Error, kubecontainer.ErrResizePodInPlace)
	assert.Contains(t, r.Message, "resize the cgroup of pod")
	assert.Equal(t, resizeLog{"container a memory=64Mi quota=10000"}, log)
	assert.Empty(t, actuated)
}

// Without a pod cgroup (no container manager, or one without pod cgroups,
// as the mock runtime's kubelet without root) only the containers are
// resized.
func TestDoPodResizeActionWithoutAPodCgroupResizesTheContainersOnly(t *testing.T) {
	for name, containerManager := range map[string]ContainerManager{
		"no container manager": nil,
		"no pod cgroups":       cm.NewStubContainerManager(),
	} {
		t.Run(name, func(t *testing.T) {
			log, r, actuated := resizeA(t, containerManager, "500m", "256Mi")
			require.NoError(t, r.Error)
			assert.Equal(t, resizeLog{"container a memory=256Mi quota=50000"}, log)
			assert.Contains(t, actuated, "a")
		})
	}
}

// On this machine's cgroups (as root, cgroup v1): a pod cgroup made by
// the container manager for a with 200m and 128Mi, with container a's
// cgroup under it, as runc makes it (the runtime here writes a's
// resources into it). After a resize the pod cgroup holds the new
// memory.limit_in_bytes, cpu.cfs_quota_us and cpu.shares. On cgroup v1
// the kernel refuses a container's CFS quota above its pod's and a pod's
// below its container's (EINVAL): growing and shrinking succeed only in
// upstream's order.
func TestRealCgroupsDoPodResizeActionResizesThePodCgroup(t *testing.T) {
	cs, root := realCgroupRoot(t)
	if cs.Version() != 1 {
		t.Skip("the order is checked by the cgroup v1 kernel")
	}
	capacity, err := cm.MachineCapacity()
	require.NoError(t, err)
	containerManager, err := cm.NewContainerManager(cs, capacity, cm.NodeConfig{CgroupsPerQOS: true, CgroupRoot: root.ToCgroupfs(),
		CgroupDriver: cm.CgroupfsDriver, EnforceCPULimits: true})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pod := twoContainerPod("200m", "128Mi")
	pod.UID = types.UID(root[0])
	require.NoError(t, containerManager.Start(ctx, func() []*v1.Pod { return []*v1.Pod{pod} }))
	pcm := containerManager.NewPodContainerManager()
	require.NoError(t, pcm.EnsureExists(pod))
	podCgroup, parent := pcm.GetPodContainerName(pod)
	t.Cleanup(func() { assert.NoError(t, pcm.Destroy(podCgroup)) })
	cgm, err := cm.NewCgroupManager(cs, cm.CgroupfsDriver)
	require.NoError(t, err)
	containerCgroup := cm.NewCgroupName(podCgroup, "a")
	quota, period, memory := int64(20000), uint64(100000), int64(128<<20)
	require.NoError(t, cgm.Create(&cm.CgroupConfig{Name: containerCgroup,
		ResourceParameters: &cm.ResourceConfig{CPUQuota: &quota, CPUPeriod: &period, Memory: &memory}}))

	var log resizeLog
	runtime := loggingRuntime{log: &log, update: func(_ string, l *runtimeapi.LinuxContainerResources) error {
		quota, period, memory := l.CpuQuota, uint64(l.CpuPeriod), l.MemoryLimitInBytes
		return cgm.Update(&cm.CgroupConfig{Name: containerCgroup,
			ResourceParameters: &cm.ResourceConfig{CPUQuota: &quota, CPUPeriod: &period, Memory: &memory}})
	}}
	m := &Manager{rs: runtime, allocationManager: actuatedRecord{}}
	m.SetContainerManager(containerManager)
	resize := func(cpu, memory string) {
		resized := twoContainerPod(cpu, memory)
		resized.UID = pod.UID
		changes := podActions{ContainersToUpdate: []containerToUpdateInfo{{container: &resized.Spec.Containers[0], kubeContainerID: kubecontainer.ContainerID{ID: "a"}}}}
		r := m.doPodResizeAction(ctx, resized, changes)
		require.NoError(t, r.Error, r.Message)
	}
	read := func(controller, file string) string {
		return readCgroupFile(t, cs.MountPoints[controller], parent, file)
	}

	resize("500m", "256Mi") // a's quota 50000 fits only in the pod's grown 60000
	assert.Equal(t, fmt.Sprint(320<<20), read("memory", "memory.limit_in_bytes"))
	assert.Equal(t, "60000", read("cpu", "cpu.cfs_quota_us"))
	assert.Equal(t, "614", read("cpu", "cpu.shares"))

	resize("100m", "64Mi") // the pod's 20000 is refused while a has 50000
	assert.Equal(t, fmt.Sprint(128<<20), read("memory", "memory.limit_in_bytes"))
	assert.Equal(t, "20000", read("cpu", "cpu.cfs_quota_us"))
	assert.Equal(t, "204", read("cpu", "cpu.shares"))
	assert.Equal(t, "10000", read("cpu", "a/cpu.cfs_quota_us"))
}

// A pod-level resize (the documentation's pod-level-resize-demo, its CPU
// from 200m to 300m): the pod cgroup's quota and shares grow first, then
// the container that takes the pod's limit gets it; the pod-level
// resources are recorded as actuated only when all of it succeeded.
func TestDoPodResizeActionResizesPodLevelResources(t *testing.T) {
	pod := func(cpu string) *v1.Pod {
		p := testPod(v1.RestartPolicyAlways, nil, "pause")
		podLevel := cpuMemory(cpu, "200Mi")
		p.Spec.Resources = &podLevel
		return p
	}
	for _, tc := range []struct {
		name   string
		setErr error
		want   resizeLog
	}{
		{name: "grown: the pod cgroup, then the container", want: resizeLog{"pod quota=30000", "pod shares=307", "container pause memory=200Mi quota=30000"}},
		{name: "the pod cgroup refuses: not actuated", setErr: errors.New("invalid argument")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log resizeLog
			pc := &fakePodCgroup{log: &log, memory: 200 << 20, quota: 20000, shares: 204, setErr: tc.setErr}
			actuated := actuatedRecord{}
			m := &Manager{rs: loggingRuntime{log: &log}, allocationManager: actuated, containerManager: fakeContainerManager{pc}}
			resized := pod("300m")
			changes := podActions{UpdatePodLevelResources: true, ContainersToUpdate: []containerToUpdateInfo{
				{container: &resized.Spec.Containers[0], kubeContainerID: kubecontainer.ContainerID{Type: "fake", ID: "pause"}}}}
			r := m.doPodResizeAction(context.Background(), resized, changes)
			assert.Equal(t, tc.want, log)
			if tc.setErr != nil {
				assert.ErrorIs(t, r.Error, kubecontainer.ErrResizePodInPlace)
				assert.NotContains(t, actuated, podLevel, "a failed resize is not actuated")
				return
			}
			require.NoError(t, r.Error)
			got, ok := actuated.GetActuatedPodLevelResources(resized.UID)
			require.True(t, ok, "the pod-level resources are actuated")
			assert.Equal(t, "300m", got.Limits.Cpu().String())
		})
	}
}
