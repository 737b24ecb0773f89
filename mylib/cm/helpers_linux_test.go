package cm

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// Upstream's constants, which the values below follow.
func TestConstants(t *testing.T) {
	assert.Equal(t, 2, MinShares)
	assert.Equal(t, 262144, MaxShares)
	assert.Equal(t, 1024, SharesPerCPU)
	assert.Equal(t, 100000, QuotaPeriod)
	assert.Equal(t, 1000, MinQuotaPeriod)
}

func TestMilliCPUToShares(t *testing.T) {
	for milli, want := range map[int64]uint64{0: 2, 1: 2, 2: 2, 100: 102, 250: 256, 1000: 1024, 1500: 1536, 300000: 262144} {
		assert.Equal(t, want, MilliCPUToShares(milli), "%dm", milli)
	}
}

func TestMilliCPUToQuota(t *testing.T) {
	for milli, want := range map[int64]int64{0: 0, 1: 1000, 5: 1000, 10: 1000, 200: 20000, 500: 50000, 1000: 100000, 1500: 150000} {
		assert.Equal(t, want, MilliCPUToQuota(milli, QuotaPeriod), "%dm", milli)
	}
	assert.Equal(t, int64(25000), MilliCPUToQuota(500, 50000), "another period")
}

func TestCPUWeight(t *testing.T) {
	for shares, want := range map[uint64]uint64{2: 1, 1024: 39, 102: 4, 256: 10, 262144: 10000, 300000: 10000} {
		assert.Equal(t, want, CPUWeight(shares), "shares %d", shares)
	}
}

func container(name string, requests, limits v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: requests, Limits: limits}}
}

func rl(cpu, mem string) v1.ResourceList {
	out := v1.ResourceList{}
	if cpu != "" {
		out[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		out[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return out
}

func pod(uid string, cs ...v1.Container) *v1.Pod {
	p := &v1.Pod{Spec: v1.PodSpec{Containers: cs}}
	p.UID = typesUID(uid)
	return p
}

func TestResourceConfigForPod(t *testing.T) {
	period := uint64(QuotaPeriod)
	tests := []struct {
		name string
		pod  *v1.Pod
		want ResourceConfig
	}{{
		name: "BestEffort: the least shares, nothing else",
		pod:  pod("a", container("c", nil, nil)),
		want: ResourceConfig{CPUShares: ptr.To[uint64](2)},
	}, {
		name: "Guaranteed: shares, quota, period, memory",
		pod:  pod("b", container("c", rl("500m", "64Mi"), rl("500m", "64Mi")), container("d", rl("250m", "32Mi"), rl("250m", "32Mi"))),
		want: ResourceConfig{CPUShares: ptr.To[uint64](768), CPUQuota: ptr.To[int64](75000), CPUPeriod: &period, Memory: ptr.To[int64](96 << 20)},
	}, {
		name: "Burstable, every container limited: quota and memory",
		pod:  pod("c", container("c", rl("100m", "16Mi"), rl("1", "64Mi")), container("d", rl("", ""), rl("200m", "32Mi"))),
		want: ResourceConfig{CPUShares: ptr.To[uint64](102), CPUQuota: ptr.To[int64](120000), CPUPeriod: &period, Memory: ptr.To[int64](96 << 20)},
	}, {
		name: "Burstable, one container without limits: shares only",
		pod:  pod("d", container("c", rl("100m", "16Mi"), rl("1", "64Mi")), container("d", rl("100m", ""), nil)),
		want: ResourceConfig{CPUShares: ptr.To[uint64](204)},
	}, {
		name: "Burstable, memory limits everywhere, one CPU limit missing: memory only",
		pod:  pod("e", container("c", rl("100m", "16Mi"), rl("1", "64Mi")), container("d", rl("", "16Mi"), rl("", "16Mi"))),
		want: ResourceConfig{CPUShares: ptr.To[uint64](102), Memory: ptr.To[int64](80 << 20)},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ResourceConfigForPod(tc.pod, true, period)
			assert.Equal(t, tc.want, *got)
		})
	}
}

func TestResourceConfigForPodInitContainers(t *testing.T) {
	period := uint64(QuotaPeriod)
	p := pod("f", container("c", rl("100m", "32Mi"), rl("200m", "32Mi")))
	// An init container larger than the app: the larger phase counts; an
	// init container without limits makes the limits undeclared.
	p.Spec.InitContainers = []v1.Container{container("init", rl("1", "128Mi"), rl("1", "128Mi"))}
	got := ResourceConfigForPod(p, true, period)
	assert.Equal(t, ResourceConfig{CPUShares: ptr.To[uint64](1024), CPUQuota: ptr.To[int64](100000), CPUPeriod: &period, Memory: ptr.To[int64](128 << 20)}, *got)
	p.Spec.InitContainers[0].Resources.Limits = nil
	got = ResourceConfigForPod(p, true, period)
	assert.Equal(t, ResourceConfig{CPUShares: ptr.To[uint64](1024)}, *got)
}

func TestResourceConfigForPodWithoutCPULimits(t *testing.T) {
	period := uint64(QuotaPeriod)
	got := ResourceConfigForPod(pod("g", container("c", rl("1", "1Gi"), rl("1", "1Gi"))), false, period)
	require.NotNil(t, got.CPUQuota)
	assert.Equal(t, int64(-1), *got.CPUQuota, "cpuCFSQuota false: no quota")
}

func TestPodLimitsOverhead(t *testing.T) {
	p := pod("h", container("c", nil, rl("1", "")))
	p.Spec.Overhead = rl("100m", "10Mi")
	l := PodLimits(p)
	assert.Equal(t, "1100m", ptr.To(l[v1.ResourceCPU]).String())
	_, ok := l[v1.ResourceMemory]
	assert.False(t, ok, "overhead is added only to a limit that is set")
}

func TestCgroupNames(t *testing.T) {
	root := ParseCgroupfsToCgroupName("/")
	assert.Equal(t, "/", root.ToCgroupfs())
	kubepods := NewCgroupName(root, "kubepods")
	assert.Equal(t, "/kubepods", kubepods.ToCgroupfs())
	info := QOSCgroupNames(kubepods)
	assert.Equal(t, "/kubepods", info.Guaranteed.ToCgroupfs())
	assert.Equal(t, "/kubepods/burstable", info.Burstable.ToCgroupfs())
	assert.Equal(t, "/kubepods/besteffort", info.BestEffort.ToCgroupfs())
	assert.Equal(t, CgroupName{"a", "b"}, ParseCgroupfsToCgroupName("a/b/"))
	assert.Equal(t, "/mykubelet-test/kubepods", NewCgroupName(ParseCgroupfsToCgroupName("/mykubelet-test"), "kubepods").ToCgroupfs())
	assert.Equal(t, "pod1234", GetPodCgroupNameSuffix("1234"))
}

func TestNodeAllocatable(t *testing.T) {
	capacity := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi"), ResourcePID: resource.MustParse("4194304")}
	got := NodeAllocatable(capacity, rl("500m", "1Gi"), rl("", "5Gi"))
	assert.Equal(t, int64(1500), ptr.To(got[v1.ResourceCPU]).MilliValue())
	assert.Equal(t, int64(0), ptr.To(got[v1.ResourceMemory]).Value(), "never below zero")
	rc := NodeAllocatableResources(capacity)
	assert.Equal(t, ResourceConfig{Memory: ptr.To[int64](4 << 30), CPUShares: ptr.To[uint64](2048), PidsLimit: ptr.To[int64](4194304)}, *rc)
}

func TestQOSCPUShares(t *testing.T) {
	pods := []*v1.Pod{
		pod("a", container("c", nil, nil)),
		pod("b", container("c", rl("500m", "1Mi"), rl("500m", "1Mi"))),
		pod("c", container("c", rl("250m", ""), nil)),
		pod("d", container("c", rl("250m", "1Mi"), rl("1", "1Mi"))),
	}
	burstable, bestEffort := qosCPUShares(pods)
	assert.Equal(t, uint64(512), burstable, "the Burstable pods' requests, 500m")
	assert.Equal(t, uint64(2), bestEffort)
	burstable, _ = qosCPUShares(nil)
	assert.Equal(t, uint64(2), burstable, "no Burstable pod: the least")
}

// A pod with pod-level resources: its cgroup's quota and memory limit come
// from spec.resources.limits, its shares from spec.resources.requests, even
// where no container sets any (the documentation's pod-resources-demo).
func TestResourceConfigForPodLevelResources(t *testing.T) {
	period := uint64(QuotaPeriod)
	p := pod("plr", container("c", nil, nil), container("d", nil, nil))
	p.Spec.Resources = &v1.ResourceRequirements{Requests: rl("1", "100Mi"), Limits: rl("1", "200Mi")}
	got := ResourceConfigForPod(p, true, period)
	assert.Equal(t, ResourceConfig{CPUShares: ptr.To[uint64](1024), CPUQuota: ptr.To[int64](100000), CPUPeriod: &period, Memory: ptr.To[int64](200 << 20)}, *got)

	// Only memory limited at the pod level, a container limits cpu: the
	// other container has no cpu limit, so no quota.
	p = pod("plr2", container("c", rl("100m", ""), rl("500m", "")), container("d", nil, nil))
	p.Spec.Resources = &v1.ResourceRequirements{Limits: rl("", "300Mi")}
	got = ResourceConfigForPod(p, true, period)
	assert.Equal(t, ResourceConfig{CPUShares: ptr.To[uint64](102), Memory: ptr.To[int64](300 << 20)}, *got)

	// Pod-level limits win over the containers' sum.
	p = pod("plr3", container("c", rl("1", "1Gi"), rl("1", "1Gi")), container("d", rl("1", "1Gi"), rl("1", "1Gi")))
	p.Spec.Resources = &v1.ResourceRequirements{Requests: rl("1500m", "1Gi"), Limits: rl("1500m", "1Gi")}
	p.Spec.Overhead = rl("", "10Mi")
	l := PodLimits(p)
	assert.Equal(t, "1500m", ptr.To(l[v1.ResourceCPU]).String())
	assert.Equal(t, int64(1034<<20), ptr.To(l[v1.ResourceMemory]).Value(), "then the overhead")
	got = ResourceConfigForPod(p, true, period)
	assert.Equal(t, ResourceConfig{CPUShares: ptr.To[uint64](1536), CPUQuota: ptr.To[int64](150000), CPUPeriod: &period, Memory: ptr.To[int64](1034 << 20)}, *got)
}
