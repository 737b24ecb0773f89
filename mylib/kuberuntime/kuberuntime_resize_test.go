package kuberuntime

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/allocation"
	kubecontainer "mykubelet/mylib/container"
)

// actuatedRecord is an AllocationManager holding what was actuated.
type actuatedRecord map[string]v1.ResourceRequirements

func (a actuatedRecord) GetActuatedResources(_ types.UID, name string) (v1.ResourceRequirements, bool) {
	r, ok := a[name]
	return r, ok
}

func (a actuatedRecord) SetActuatedResources(_ *v1.Pod, c *v1.Container) error {
	a[c.Name] = *c.Resources.DeepCopy()
	return nil
}

// podLevel is the record's key for the pod-level resources: no container
// is named "".
const podLevel = ""

func (a actuatedRecord) GetActuatedPodLevelResources(types.UID) (*v1.ResourceRequirements, bool) {
	r, ok := a[podLevel]
	if !ok {
		return nil, false
	}
	return &r, true
}

func (a actuatedRecord) SetActuatedPodLevelResources(pod *v1.Pod) error {
	if pod.Spec.Resources != nil {
		a[podLevel] = *pod.Spec.Resources.DeepCopy()
	}
	return nil
}

func cpuMemory(cpu, memory string) v1.ResourceRequirements {
	rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(memory)}
	return v1.ResourceRequirements{Requests: rl, Limits: rl.DeepCopy()}
}

// runningWithResources is running with the runtime reporting resources.
func runningWithResources(pod *v1.Pod, name string) *kubecontainer.Status {
	s := running(pod, name)
	s.Resources = &kubecontainer.ContainerResources{MemoryLimit: resource.NewQuantity(1, resource.BinarySI)}
	return s
}

func TestComputePodActionsResizesARunningContainerByItsResizePolicy(t *testing.T) {
	pod := func(cpu, memory string, policy ...v1.ContainerResizePolicy) *v1.Pod {
		p := testPod(v1.RestartPolicyAlways, nil, "a", "b")
		p.Spec.Containers[0].Resources = cpuMemory(cpu, memory)
		p.Spec.Containers[0].ResizePolicy = policy
		p.Spec.Containers[1].Resources = cpuMemory("100m", "64Mi")
		return p
	}
	restartMemory := v1.ContainerResizePolicy{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}
	restartCPU := v1.ContainerResizePolicy{ResourceName: v1.ResourceCPU, RestartPolicy: v1.RestartContainer}
	actuated := actuatedRecord{"a": cpuMemory("200m", "128Mi"), "b": cpuMemory("100m", "64Mi")}

	for _, tc := range []struct {
		name       string
		pod        *v1.Pod
		am         AllocationManager
		noResource bool // the runtime reports no resources
		update     bool
		restart    bool
	}{
		{name: "equal: nothing to do", pod: pod("200m", "128Mi"), am: actuated},
		{name: "grown, NotRequired: updated in place", pod: pod("500m", "256Mi"), am: actuated, update: true},
		{name: "shrunk, NotRequired: updated in place", pod: pod("100m", "64Mi"), am: actuated, update: true},
		{name: "memory changed, RestartContainer for memory: restarted", pod: pod("200m", "256Mi", restartMemory), am: actuated, restart: true},
		{name: "CPU changed, RestartContainer for memory only: updated in place", pod: pod("500m", "128Mi", restartMemory), am: actuated, update: true},
		{name: "CPU changed, RestartContainer for CPU: restarted", pod: pod("500m", "128Mi", restartCPU), am: actuated, restart: true},
		{name: "no allocation manager: no resize", pod: pod("500m", "256Mi"), am: nil},
		{name: "runtime reports no resources: no resize", pod: pod("500m", "256Mi"), am: actuated, noResource: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := runningWithResources(tc.pod, "a"), runningWithResources(tc.pod, "b")
			if tc.noResource {
				a.Resources = nil
			}
			got := (&Manager{allocationManager: tc.am}).computePodActions(tc.pod, podStatusOf(ready(), a, b))
			want := podActions{SandboxID: "s1", ContainersToKill: map[kubecontainer.ContainerID]containerToKillInfo{}}
			if tc.update {
				want.ContainersToUpdate = []containerToUpdateInfo{{container: &tc.pod.Spec.Containers[0], kubeContainerID: a.ID}}
			}
			if tc.restart {
				want.ContainersToStart = []int{0}
				want.UpdatePodResources = true // the pod's cgroup is resized between the kill and the start
				want.ContainersToKill[a.ID] = containerToKillInfo{container: &kubecontainer.Container{ID: a.ID, Name: "a"}, name: "a",
					message: "Container a resize requires restart"}
			}
			assert.Equal(t, want, got)
		})
	}
}

// TestSyncPodResizesARunningContainerInPlace: SyncPod records what a
// container was created with as actuated; given the pod with new
// allocated resources, it updates the running container through the CRI
// (same ID, same attempt) and records them as actuated.
func TestSyncPodResizesARunningContainerInPlace(t *testing.T) {
	ctx := context.Background()
	f := newSyncFixture(t)
	am, err := allocation.NewManager(t.TempDir())
	require.NoError(t, err)
	f.m.SetAllocationManager(am)
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Command = []string{"sh", "-c", serveUntilTERM}
	pod.Spec.Containers[0].Resources = cpuMemory("100m", "64Mi")

	require.NoError(t, f.m.SyncPod(ctx, pod, f.status(t, pod), nil, nil).Error())
	got, ok := am.GetActuatedResources(pod.UID, "app")
	require.True(t, ok, "a created container's resources are actuated")
	assert.Equal(t, "64Mi", got.Limits.Memory().String())
	before := f.status(t, pod)
	cs := before.FindContainerStatusByName("app")
	require.NotNil(t, cs)
	require.Equal(t, kubecontainer.ContainerStateRunning, cs.State)

	resized := pod.DeepCopy()
	resized.Spec.Containers[0].Resources = cpuMemory("500m", "128Mi")
	result := f.m.SyncPod(ctx, resized, before, nil, nil)
	require.NoError(t, result.Error())
	require.Len(t, result.SyncResults, 1)
	assert.Equal(t, kubecontainer.ResizePodInPlace, result.SyncResults[0].Action)

	resp, err := f.m.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cs.ID.ID})
	require.NoError(t, err)
	linux := resp.GetStatus().GetResources().GetLinux()
	assert.Equal(t, int64(128<<20), linux.GetMemoryLimitInBytes(), "the runtime enforces the new memory limit")
	assert.Equal(t, int64(50000), linux.GetCpuQuota(), "and the new CPU limit")
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, resp.GetStatus().GetState())
	got, _ = am.GetActuatedResources(pod.UID, "app")
	assert.Equal(t, "128Mi", got.Limits.Memory().String(), "the update is actuated")
	assert.Equal(t, "500m", got.Requests.Cpu().String())

	after := f.status(t, pod).FindContainerStatusByName("app")
	require.NotNil(t, after)
	assert.Equal(t, cs.ID, after.ID, "resized in place: the same container")
	assert.Equal(t, cs.RestartCount, after.RestartCount)

	// Once actuated, the next sync has nothing to do.
	result = f.m.SyncPod(ctx, resized, f.status(t, pod), nil, nil)
	require.NoError(t, result.Error())
	assert.Empty(t, result.SyncResults)
}

// TestSyncPodLeavesAResizeBelowUsageInProgress: a memory limit below what
// the container uses is refused by the runtime; SyncPod's result says so
// (ResizePodInPlaceError), nothing is recorded as actuated, the container
// runs on with its old limit, and the next sync tries again: a limit it
// fits then is applied.
func TestSyncPodLeavesAResizeBelowUsageInProgress(t *testing.T) {
	ctx := context.Background()
	f := newSyncFixture(t)
	am, err := allocation.NewManager(t.TempDir())
	require.NoError(t, err)
	f.m.SetAllocationManager(am)
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Image = "polinux/stress"
	pod.Spec.Containers[0].Command = []string{"stress", "--vm", "1", "--vm-bytes", "50M", "--vm-hang", "1"}
	pod.Spec.Containers[0].Resources = cpuMemory("100m", "200Mi")
	require.NoError(t, f.m.SyncPod(ctx, pod, f.status(t, pod), nil, nil).Error())
	cs := f.status(t, pod).FindContainerStatusByName("app")
	require.NotNil(t, cs)
	require.Eventually(t, func() bool {
		resp, err := f.m.rs.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: cs.ID.ID})
		return err == nil && resp.GetStats().GetMemory().GetWorkingSetBytes().GetValue() >= 50<<20
	}, 30*time.Second, 10*time.Millisecond, "stress holds its 50M")

	tooSmall := pod.DeepCopy()
	tooSmall.Spec.Containers[0].Resources = cpuMemory("100m", "20Mi")
	for range 2 { // refused, then refused again at the next sync
		result := f.m.SyncPod(ctx, tooSmall, f.status(t, pod), nil, nil)
		require.Len(t, result.SyncResults, 1)
		assert.Equal(t, kubecontainer.ResizePodInPlace, result.SyncResults[0].Action)
		assert.ErrorIs(t, result.SyncResults[0].Error, kubecontainer.ErrResizePodInPlace)
		assert.Contains(t, result.SyncResults[0].Message, "device or resource busy")
		got, _ := am.GetActuatedResources(pod.UID, "app")
		assert.Equal(t, "200Mi", got.Limits.Memory().String(), "a refused resize is not actuated")
	}
	st := f.status(t, pod).FindContainerStatusByName("app")
	require.NotNil(t, st)
	assert.Equal(t, kubecontainer.ContainerStateRunning, st.State)
	assert.Equal(t, cs.ID, st.ID)

	fits := pod.DeepCopy()
	fits.Spec.Containers[0].Resources = cpuMemory("100m", "80Mi")
	require.NoError(t, f.m.SyncPod(ctx, fits, f.status(t, pod), nil, nil).Error())
	got, _ := am.GetActuatedResources(pod.UID, "app")
	assert.Equal(t, "80Mi", got.Limits.Memory().String())
}

// TestSyncPodResizesPodLevelResources: the documentation's
// pod-level-resize-demo, on the mock runtime. Its pod-level CPU goes
// from 200m to 300m: "pause", which sets no CPU limit of its own and
// whose CPU resizePolicy is NotRequired, gets the pod's new limit in
// place; "nginx-server", whose policy is RestartContainer, is restarted
// with it; the pod-level resources are recorded as actuated, and the
// next sync has nothing to do.
func TestSyncPodResizesPodLevelResources(t *testing.T) {
	ctx := context.Background()
	f := newSyncFixture(t)
	am, err := allocation.NewManager(t.TempDir())
	require.NoError(t, err)
	f.m.SetAllocationManager(am)
	pod := testPod(v1.RestartPolicyAlways, nil, "pause", "nginx-server")
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].Command = []string{"sh", "-c", serveUntilTERM}
	}
	policy := func(cpu, memory v1.ResourceResizeRestartPolicy) []v1.ContainerResizePolicy {
		return []v1.ContainerResizePolicy{{ResourceName: v1.ResourceCPU, RestartPolicy: cpu}, {ResourceName: v1.ResourceMemory, RestartPolicy: memory}}
	}
	pod.Spec.Containers[0].ResizePolicy = policy(v1.NotRequired, v1.RestartContainer)
	pod.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("100Mi")}
	pod.Spec.Containers[1].ResizePolicy = policy(v1.RestartContainer, v1.RestartContainer)
	podLevel := cpuMemory("200m", "200Mi")
	pod.Spec.Resources = &podLevel

	require.NoError(t, f.m.SyncPod(ctx, pod, f.status(t, pod), nil, nil).Error())
	got, ok := am.GetActuatedPodLevelResources(pod.UID)
	require.True(t, ok, "a new sandbox's pod-level resources are actuated")
	assert.Equal(t, "200m", got.Limits.Cpu().String())
	before := f.status(t, pod)
	quota := func(name string) int64 {
		t.Helper()
		cs := f.status(t, pod).FindContainerStatusByName(name)
		require.NotNil(t, cs)
		resp, err := f.m.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cs.ID.ID})
		require.NoError(t, err)
		return resp.GetStatus().GetResources().GetLinux().GetCpuQuota()
	}
	require.Equal(t, int64(20000), quota("pause"), "a container with no CPU limit of its own gets the pod's")

	resized := pod.DeepCopy()
	resized.Spec.Resources = &v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("300m"), v1.ResourceMemory: resource.MustParse("200Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("300m"), v1.ResourceMemory: resource.MustParse("200Mi")},
	}
	changes := f.m.computePodActions(resized, before)
	assert.True(t, changes.UpdatePodLevelResources, "the pod-level resources changed")
	require.Len(t, changes.ContainersToUpdate, 1)
	assert.Equal(t, "pause", changes.ContainersToUpdate[0].container.Name)
	assert.Equal(t, []int{1}, changes.ContainersToStart, "nginx-server's CPU policy is RestartContainer")

	require.NoError(t, f.m.SyncPod(ctx, resized, before, nil, nil).Error())
	after := f.status(t, pod)
	pauseBefore, pauseAfter := before.FindContainerStatusByName("pause"), after.FindContainerStatusByName("pause")
	require.NotNil(t, pauseAfter)
	assert.Equal(t, pauseBefore.ID, pauseAfter.ID, "pause is resized in place")
	assert.Equal(t, int64(30000), quota("pause"), "with the pod's new CPU limit")
	nginx := after.FindContainerStatusByName("nginx-server")
	require.NotNil(t, nginx)
	assert.NotEqual(t, before.FindContainerStatusByName("nginx-server").ID, nginx.ID, "nginx-server is restarted")
	assert.Equal(t, int64(30000), quota("nginx-server"), "and starts with the pod's new CPU limit")
	got, _ = am.GetActuatedPodLevelResources(pod.UID)
	assert.Equal(t, "300m", got.Limits.Cpu().String(), "the pod-level resize is actuated")

	changes = f.m.computePodActions(resized, f.status(t, pod))
	assert.False(t, changes.UpdatePodLevelResources)
	assert.Empty(t, changes.ContainersToUpdate)
	assert.Empty(t, changes.ContainersToStart, "once actuated, nothing more to do")
}

// A running sidecar is resized as a regular container is: in place by
// default, killed and started again as an init container when its
// resizePolicy says RestartContainer.
func TestComputePodActionsResizesARunningSidecar(t *testing.T) {
	pod := func(cpu string, policy ...v1.ContainerResizePolicy) *v1.Pod {
		p := sidecarPod(v1.RestartPolicyAlways, []string{"s0"}, "a")
		p.Spec.InitContainers[0].Resources = cpuMemory(cpu, "64Mi")
		p.Spec.InitContainers[0].ResizePolicy = policy
		p.Spec.Containers[0].Resources = cpuMemory("100m", "64Mi")
		return p
	}
	actuated := actuatedRecord{"s0": cpuMemory("100m", "64Mi"), "a": cpuMemory("100m", "64Mi")}
	restartCPU := v1.ContainerResizePolicy{ResourceName: v1.ResourceCPU, RestartPolicy: v1.RestartContainer}
	for _, tc := range []struct {
		name            string
		pod             *v1.Pod
		update, restart bool
	}{
		{name: "equal: nothing to do", pod: pod("100m")},
		{name: "grown, NotRequired: updated in place", pod: pod("300m"), update: true},
		{name: "grown, RestartContainer: killed, started again as an init container", pod: pod("300m", restartCPU), restart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s0, a := runningWithResources(tc.pod, "s0"), runningWithResources(tc.pod, "a")
			got := (&Manager{allocationManager: actuated}).computePodActions(tc.pod, podStatusOf(ready(), s0, a))
			want := podActions{SandboxID: "s1", ContainersToKill: map[kubecontainer.ContainerID]containerToKillInfo{}}
			if tc.update {
				want.ContainersToUpdate = []containerToUpdateInfo{{container: &tc.pod.Spec.InitContainers[0], kubeContainerID: s0.ID}}
			}
			if tc.restart {
				want.InitContainersToStart = []int{0}
				want.UpdatePodResources = true
				want.ContainersToKill[s0.ID] = containerToKillInfo{container: &kubecontainer.Container{ID: s0.ID, Name: "s0"}, name: "s0",
					message: "Container s0 resize requires restart"}
			}
			assert.Equal(t, want, got)
		})
	}
}
