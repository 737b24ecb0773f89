package kuberuntime

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/lifecycle"
	"mykubelet/mylib/qos"
)

// CPU shares and CFS quota, as upstream computes them from millicores
// (pkg/kubelet/cm: MilliCPUToShares, MilliCPUToQuota).
const (
	minShares     = 2
	maxShares     = 262144
	sharesPerCPU  = 1024
	milliCPUToCPU = 1000
	// quotaPeriod is the CFS period, 100 ms in microseconds.
	quotaPeriod = 100000
	// minQuotaPeriod is the least quota the kernel accepts, 1 ms.
	minQuotaPeriod = 1000
)

// generateLinuxContainerResources is the container's resources as the
// runtime enforces them: its memory limit, which the runtime turns into
// the cgroup's memory.max (a container over it is OOMKilled), and its CPU
// request and limit as shares and quota. A container that sets no CPU
// request gets the shares of its CPU limit. In a pod with pod-level
// resources (spec.resources), a container that sets no CPU or memory
// limit gets the pod's (lifecycle.ContainerLimits), as upstream: the
// pod's limit bounds each container too. Its oom_score_adj is its QoS
// class's (qos.GetContainerOOMScoreAdjust, against the node's memory,
// memoryCapacity). Unlike upstream's function of the same name, there is
// no swap, hugepages, DRA or unified (cgroup v2) map.
func generateLinuxContainerResources(pod *v1.Pod, container *v1.Container, memoryCapacity int64) *runtimeapi.LinuxContainerResources {
	limits := lifecycle.ContainerLimits(pod.Spec.Resources, container.Resources)
	cpuLimit, memoryLimit := limits.Cpu(), limits.Memory()
	cpuRequest := cpuLimit
	if q, ok := container.Resources.Requests[v1.ResourceCPU]; ok {
		cpuRequest = &q
	}
	res := &runtimeapi.LinuxContainerResources{
		MemoryLimitInBytes: memoryLimit.Value(),
		CpuShares:          milliCPUToShares(cpuRequest.MilliValue()),
		OomScoreAdj:        int64(qos.GetContainerOOMScoreAdjust(pod, container, memoryCapacity)),
	}
	if milli := cpuLimit.MilliValue(); milli > 0 {
		res.CpuPeriod = quotaPeriod
		res.CpuQuota = max(milli*quotaPeriod/milliCPUToCPU, minQuotaPeriod)
	}
	return res
}

// milliCPUToShares is the cgroup's cpu.shares for a CPU request.
func milliCPUToShares(milli int64) int64 {
	if milli == 0 {
		return minShares // no request: the least weight, as upstream
	}
	return min(max(milli*sharesPerCPU/milliCPUToCPU, minShares), maxShares)
}

// toKubeContainerResources turns the resources a runtime reports for a
// container back into the API's quantities, as upstream's function of the
// same name: the CPU request from the shares (rounded up), the CPU limit
// from the quota and period, the memory limit as it is. Nil when the
// runtime reports none of them.
func toKubeContainerResources(r *runtimeapi.ContainerResources) *kubecontainer.ContainerResources {
	linux := r.GetLinux()
	if linux == nil {
		return nil
	}
	var out kubecontainer.ContainerResources
	if linux.CpuPeriod > 0 {
		if milli := quotaToMilliCPU(linux.CpuQuota, linux.CpuPeriod); milli > 0 {
			out.CPULimit = resource.NewMilliQuantity(milli, resource.DecimalSI)
		}
	}
	if linux.CpuShares > 0 {
		if milli := sharesToMilliCPU(linux.CpuShares); milli > 0 {
			out.CPURequest = resource.NewMilliQuantity(milli, resource.DecimalSI)
		}
	}
	if linux.MemoryLimitInBytes > 0 {
		out.MemoryLimit = resource.NewQuantity(linux.MemoryLimitInBytes, resource.BinarySI)
	}
	if out.CPULimit == nil && out.CPURequest == nil && out.MemoryLimit == nil {
		return nil
	}
	return &out
}

// sharesToMilliCPU is the CPU request that gave these shares, rounded up;
// below minShares, none.
func sharesToMilliCPU(shares int64) int64 {
	if shares < minShares {
		return 0
	}
	return (shares*milliCPUToCPU + sharesPerCPU - 1) / sharesPerCPU
}

// quotaToMilliCPU is the CPU limit that gave this quota; -1 (no limit) is
// none.
func quotaToMilliCPU(quota, period int64) int64 {
	if quota == -1 {
		return 0
	}
	return quota * milliCPUToCPU / period
}
