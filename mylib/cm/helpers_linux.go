package cm

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"mykubelet/mylib/lifecycle"
	"mykubelet/mylib/qos"
)

// Upstream's constants (pkg/kubelet/cm/helpers_linux.go): cpu.shares per
// CPU and its bounds, the CFS period and the least quota.
const (
	MinShares     = 2
	MaxShares     = 262144
	SharesPerCPU  = 1024
	MilliCPUToCPU = 1000

	// QuotaPeriod is the CFS period, 100 ms in microseconds.
	QuotaPeriod = 100000
	// MinQuotaPeriod is the least quota, 1 ms.
	MinQuotaPeriod = 1000
)

// podCgroupNamePrefix starts a pod's cgroup name: pod<uid>.
const podCgroupNamePrefix = "pod"

// MilliCPUToQuota is the CFS quota for a CPU limit over period: 0 for no
// limit, at least MinQuotaPeriod. (Upstream's CPUCFSQuotaPeriod feature
// gate, off by default, would let period differ from QuotaPeriod; here
// the caller's period is used as given.)
func MilliCPUToQuota(milliCPU, period int64) int64 {
	if milliCPU == 0 {
		return 0
	}
	return max(milliCPU*period/MilliCPUToCPU, MinQuotaPeriod)
}

// MilliCPUToShares is cpu.shares for a CPU request: MinShares for none,
// else 1024 per CPU, within [MinShares, MaxShares].
func MilliCPUToShares(milliCPU int64) uint64 {
	if milliCPU == 0 {
		return MinShares // the kernel's value for "no weight"
	}
	return uint64(min(max(milliCPU*SharesPerCPU/MilliCPUToCPU, MinShares), MaxShares))
}

// CPURequestsFromConfig is the CPU request a pod cgroup's shares stand
// for, rounded up; nil without a config or below MinShares (upstream's
// function of the same name).
func CPURequestsFromConfig(cfg *ResourceConfig) *resource.Quantity {
	if cfg == nil || cfg.CPUShares == nil || *cfg.CPUShares < MinShares {
		return nil
	}
	milli := (int64(*cfg.CPUShares)*MilliCPUToCPU + SharesPerCPU - 1) / SharesPerCPU
	return resource.NewMilliQuantity(milli, resource.DecimalSI)
}

// CPULimitsFromConfig is the CPU limit a pod cgroup's quota stands for;
// nil without a config, without a period or with no quota (-1).
func CPULimitsFromConfig(cfg *ResourceConfig) *resource.Quantity {
	if cfg == nil || cfg.CPUPeriod == nil || *cfg.CPUPeriod == 0 || cfg.CPUQuota == nil || *cfg.CPUQuota <= 0 {
		return nil
	}
	return resource.NewMilliQuantity(*cfg.CPUQuota*MilliCPUToCPU/int64(*cfg.CPUPeriod), resource.DecimalSI)
}

// MemoryLimitsFromConfig is a pod cgroup's memory limit as it reads (on
// cgroup v1 "none" reads as a large page-aligned number, shown as it
// is, as upstream does); nil without a config.
func MemoryLimitsFromConfig(cfg *ResourceConfig) *resource.Quantity {
	if cfg == nil || cfg.Memory == nil || *cfg.Memory <= 0 {
		return nil
	}
	return resource.NewQuantity(*cfg.Memory, resource.BinarySI)
}

// CPUWeight is cgroup v2's cpu.weight for cpu.shares, as upstream's
// getCPUWeight: [2, 262144] mapped linearly onto [1, 10000].
func CPUWeight(shares uint64) uint64 {
	if shares >= MaxShares {
		return 10000
	}
	if shares < MinShares {
		shares = MinShares
	}
	return 1 + ((shares-2)*9999)/262142
}

// CPUWeightToShares is CPUWeight backwards (upstream's
// CpuWeightToCpuShares): cpu.shares for a v2 cpu.weight, which may
// differ from the shares written by the rounding.
func CPUWeightToShares(weight uint64) uint64 {
	if weight == 0 {
		return 0
	}
	return 2 + ((weight-1)*262142)/9999
}

// GetPodCgroupNameSuffix is a pod's cgroup name: pod<uid>.
func GetPodCgroupNameSuffix(uid types.UID) string { return podCgroupNamePrefix + string(uid) }

// ResourceConfigForPod is the pod cgroup's resources, as upstream's
// function of this name: cpu.shares from the pod's CPU requests (the
// least for BestEffort), the CFS quota from its CPU limits when every
// container has one (always for Guaranteed; none with enforceCPULimits
// false, quota -1), the memory limit from its memory limits when every
// container has one, or the pod sets it in spec.resources.limits. Init
// containers count as upstream's PodRequests and PodLimits count them
// (the larger of the running and the init phase); a pod-level request or
// limit is the pod's, whatever its containers set.
func ResourceConfigForPod(pod *v1.Pod, enforceCPULimits bool, cpuPeriod uint64) *ResourceConfig {
	reqs := lifecycle.PodRequests(pod)
	limits := PodLimits(pod)
	cpuLimitsDeclared, memoryLimitsDeclared := true, true
	for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if c.Resources.Limits.Cpu().IsZero() {
			cpuLimitsDeclared = false
		}
		if c.Resources.Limits.Memory().IsZero() {
			memoryLimitsDeclared = false
		}
	}
	if lifecycle.IsPodLevelResourcesSet(pod) {
		if !pod.Spec.Resources.Limits.Cpu().IsZero() {
			cpuLimitsDeclared = true
		}
		if !pod.Spec.Resources.Limits.Memory().IsZero() {
			memoryLimitsDeclared = true
		}
	}
	cpuShares := MilliCPUToShares(reqs.Cpu().MilliValue())
	cpuQuota := MilliCPUToQuota(limits.Cpu().MilliValue(), int64(cpuPeriod))
	if !enforceCPULimits {
		cpuQuota = -1
	}
	memoryLimits := limits.Memory().Value()

	result := &ResourceConfig{}
	switch qos.GetPodQOS(pod) {
	case v1.PodQOSGuaranteed:
		result.CPUShares, result.CPUQuota, result.CPUPeriod, result.Memory = &cpuShares, &cpuQuota, &cpuPeriod, &memoryLimits
	case v1.PodQOSBurstable:
		result.CPUShares = &cpuShares
		if cpuLimitsDeclared {
			result.CPUQuota, result.CPUPeriod = &cpuQuota, &cpuPeriod
		}
		if memoryLimitsDeclared {
			result.Memory = &memoryLimits
		}
	default:
		shares := uint64(MinShares)
		result.CPUShares = &shares
	}
	return result
}

// PodLimits is the pod's limits (upstream: component-helpers
// resource.PodLimits with the default options): the sum of its
// containers' and sidecars', or, if larger, the largest init container's
// with the sidecars started before it; then a pod-level limit
// (spec.resources.limits) of cpu, memory or hugepages replaces that sum
// for its resource; then the pod's overhead, added only to a resource
// that has a limit.
func PodLimits(pod *v1.Pod) v1.ResourceList {
	limits := v1.ResourceList{}
	for _, c := range pod.Spec.Containers {
		addResources(limits, c.Resources.Limits)
	}
	sidecars, initMax := v1.ResourceList{}, v1.ResourceList{}
	for _, c := range pod.Spec.InitContainers {
		step := v1.ResourceList{}
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			addResources(limits, c.Resources.Limits)
			addResources(sidecars, c.Resources.Limits)
		} else {
			addResources(step, c.Resources.Limits)
		}
		addResources(step, sidecars)
		for name, q := range step {
			if cur, ok := initMax[name]; !ok || q.Cmp(cur) > 0 {
				initMax[name] = q.DeepCopy()
			}
		}
	}
	for name, q := range initMax {
		if cur, ok := limits[name]; !ok || q.Cmp(cur) > 0 {
			limits[name] = q.DeepCopy()
		}
	}
	if lifecycle.IsPodLevelResourcesSet(pod) {
		lifecycle.ApplyPodLevelResources(limits, pod.Spec.Resources.Limits)
	}
	for name, q := range pod.Spec.Overhead {
		if cur, ok := limits[name]; ok && !cur.IsZero() {
			cur.Add(q)
			limits[name] = cur
		}
	}
	return limits
}

func addResources(into, l v1.ResourceList) {
	for name, q := range l {
		sum := into[name]
		sum.Add(q)
		into[name] = sum
	}
}
