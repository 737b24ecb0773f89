package kuberuntime

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/cadvisor"
)

func TestGenerateLinuxContainerResources(t *testing.T) {
	c := &v1.Container{Resources: v1.ResourceRequirements{
		Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("100Mi"), v1.ResourceCPU: resource.MustParse("500m")},
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
	}}
	res := generateLinuxContainerResources(&v1.Pod{}, c, 0)
	assert.Equal(t, int64(100<<20), res.MemoryLimitInBytes)
	assert.Equal(t, int64(256), res.CpuShares)
	assert.Equal(t, int64(100000), res.CpuPeriod)
	assert.Equal(t, int64(50000), res.CpuQuota)

	res = generateLinuxContainerResources(&v1.Pod{}, &v1.Container{}, 0)
	assert.Zero(t, res.MemoryLimitInBytes, "no limit: the runtime's own")
	assert.Equal(t, int64(2), res.CpuShares)
	assert.Zero(t, res.CpuQuota)
}

func TestRuntimeResourcesTurnBackIntoTheSpecsQuantities(t *testing.T) {
	for _, spec := range []struct{ cpuRequest, cpuLimit, memoryLimit string }{
		{"250m", "500m", "100Mi"},
		{"1", "2", "1Gi"},
		{"100m", "100m", "128Mi"},
	} {
		c := &v1.Container{Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(spec.cpuRequest)},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse(spec.cpuLimit), v1.ResourceMemory: resource.MustParse(spec.memoryLimit)},
		}}
		got := toKubeContainerResources(&runtimeapi.ContainerResources{Linux: generateLinuxContainerResources(&v1.Pod{}, c, 0)})
		if assert.NotNil(t, got, "resources of %v", spec) {
			assert.Equal(t, 0, got.CPURequest.Cmp(resource.MustParse(spec.cpuRequest)), "CPU request %v from shares; want %s", got.CPURequest, spec.cpuRequest)
			assert.Equal(t, 0, got.CPULimit.Cmp(resource.MustParse(spec.cpuLimit)), "CPU limit %v from quota; want %s", got.CPULimit, spec.cpuLimit)
			assert.Equal(t, spec.memoryLimit, got.MemoryLimit.String())
		}
	}
	// Shares round up: 10m of request is 10 shares, read back as 10m, not 9m.
	got := toKubeContainerResources(&runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{CpuShares: 10}})
	assert.Equal(t, "10m", got.CPURequest.String())
	assert.Nil(t, got.CPULimit, "no quota period: no CPU limit")
	assert.Nil(t, got.MemoryLimit, "no memory limit")

	assert.Nil(t, toKubeContainerResources(nil), "no resources reported")
	assert.Nil(t, toKubeContainerResources(&runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{CpuQuota: -1, CpuPeriod: 100000}}),
		"no limit (-1) and nothing else: none")
}

// In a pod with pod-level resources, a container without limits gets the
// pod's: its memory.max, CPU quota and (without a CPU request) shares.
func TestGenerateLinuxContainerResourcesPodLevelLimits(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{Resources: &v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("100Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("200Mi")},
	}}}
	res := generateLinuxContainerResources(pod, &v1.Container{Name: "c"}, 0)
	assert.Equal(t, int64(200<<20), res.MemoryLimitInBytes)
	assert.Equal(t, int64(1024), res.CpuShares, "no CPU request: the shares of the (pod's) CPU limit")
	assert.Equal(t, int64(100000), res.CpuPeriod)
	assert.Equal(t, int64(100000), res.CpuQuota)

	own := &v1.Container{Name: "d", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("50Mi")},
	}}
	res = generateLinuxContainerResources(pod, own, 0)
	assert.Equal(t, int64(50<<20), res.MemoryLimitInBytes, "the container's own limit")
	assert.Equal(t, int64(102), res.CpuShares)
	assert.Equal(t, int64(50000), res.CpuQuota)

	res = generateLinuxContainerResources(&v1.Pod{}, &v1.Container{Name: "c"}, 0)
	assert.Zero(t, res.MemoryLimitInBytes, "no pod-level resources: no limit")
	assert.Zero(t, res.CpuQuota)
}

// SyncPod creates a container without limits in a pod with pod-level
// limits with the pod's limits, as the runtime reports them.
func TestSyncPodCreatesContainersWithPodLevelLimits(t *testing.T) {
	ctx := context.Background()
	f := newSyncFixture(t)
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Command = []string{"sh", "-c", serveUntilTERM}
	pod.Spec.Resources = &v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("100Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("200Mi")},
	}
	require.NoError(t, f.m.SyncPod(ctx, pod, f.status(t, pod), nil, nil).Error())
	cs := f.status(t, pod).FindContainerStatusByName("app")
	require.NotNil(t, cs)
	resp, err := f.m.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cs.ID.ID})
	require.NoError(t, err)
	linux := resp.GetStatus().GetResources().GetLinux()
	assert.Equal(t, int64(200<<20), linux.GetMemoryLimitInBytes(), "the pod's memory limit")
	assert.Equal(t, int64(100000), linux.GetCpuQuota(), "the pod's CPU limit")
}

// SyncPod creates each container with its OOM score adjustment, measured
// against the machine's memory (SetMachineInfo), as the runtime reports
// it back.
func TestSyncPodCreatesContainersWithTheirOOMScoreAdjust(t *testing.T) {
	ctx := context.Background()
	f := newSyncFixture(t)
	f.m.SetMachineInfo(&cadvisor.MachineInfo{MemoryCapacity: 4 << 30})
	pod := testPod(v1.RestartPolicyAlways, nil, "burstable", "norequest")
	pod.Spec.Containers[0].Command = []string{"sh", "-c", serveUntilTERM}
	pod.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}
	pod.Spec.Containers[1].Command = []string{"sh", "-c", serveUntilTERM}
	require.NoError(t, f.m.SyncPod(ctx, pod, f.status(t, pod), nil, nil).Error())
	st := f.status(t, pod)
	// The pod is Burstable: each container scores by its own memory
	// request, 1Gi of 4Gi (1000 - 250), or none (999, below BestEffort's).
	for name, want := range map[string]int64{"burstable": 750, "norequest": 999} {
		cs := st.FindContainerStatusByName(name)
		require.NotNil(t, cs, name)
		resp, err := f.m.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cs.ID.ID})
		require.NoError(t, err)
		assert.Equal(t, want, resp.GetStatus().GetResources().GetLinux().GetOomScoreAdj(), name)
	}
}
