package kubelet

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"mykubelet/mylib/cm"
)

// podCgroupReader is a container manager whose pod cgroups read as its
// configs (nil: no pod cgroup), or fail with err.
type podCgroupReader struct {
	cm.ContainerManager
	cm.PodContainerManager
	cpu, memory *cm.ResourceConfig
	err         error
}

func (r podCgroupReader) NewPodContainerManager() cm.PodContainerManager { return r }

func (r podCgroupReader) GetPodCgroupConfig(_ *v1.Pod, name v1.ResourceName) (*cm.ResourceConfig, error) {
	if r.err != nil {
		return nil, r.err
	}
	if name == v1.ResourceCPU {
		return r.cpu, nil
	}
	return r.memory, nil
}

// TestPodLevelResourcesStatus: status.allocatedResources is the pod's
// requests; status.resources is, for a running pod, what its cgroup
// applies, else (not running, or no pod cgroup) its requests and limits.
func TestPodLevelResourcesStatus(t *testing.T) {
	q := resource.MustParse
	pod := &v1.Pod{Spec: v1.PodSpec{
		Resources: &v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: q("200m"), v1.ResourceMemory: q("200Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: q("200m"), v1.ResourceMemory: q("200Mi")},
		},
		Containers: []v1.Container{{Name: "pause", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: q("100m")}}}},
	}}
	shares, quota, period, memory := uint64(307), int64(30000), uint64(100000), int64(300<<20)
	v2Shares := cm.CPUWeightToShares(cm.CPUWeight(cm.MilliCPUToShares(200))) // 204 shares, weight 8, read back as 185 (181m)
	cgroup := podCgroupReader{cpu: &cm.ResourceConfig{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period}, memory: &cm.ResourceConfig{Memory: &memory}}
	oldRunning := v1.PodStatus{Phase: v1.PodRunning, Resources: &v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: q("250m")}, Limits: v1.ResourceList{v1.ResourceCPU: q("250m"), v1.ResourceMemory: q("250Mi")}}}
	for _, tc := range []struct {
		name             string
		phase            v1.PodPhase
		cm               cm.ContainerManager
		old              v1.PodStatus
		cpuReq, cpuLim   string
		memReq, memLimit string
	}{
		{name: "pending: the allocated requests and limits", phase: v1.PodPending, cm: cgroup,
			cpuReq: "200m", cpuLim: "200m", memReq: "200Mi", memLimit: "200Mi"},
		{name: "running: what the pod cgroup applies", phase: v1.PodRunning, cm: cgroup,
			cpuReq: "300m", cpuLim: "300m", memReq: "200Mi", memLimit: "300Mi"},
		{name: "running, cgroup v2: shares read back through cpu.weight show the allocated request", phase: v1.PodRunning,
			cm:     podCgroupReader{cpu: &cm.ResourceConfig{CPUShares: &v2Shares, CPUQuota: &quota, CPUPeriod: &period}, memory: &cm.ResourceConfig{Memory: &memory}},
			cpuReq: "200m", cpuLim: "300m", memReq: "200Mi", memLimit: "300Mi"},
		{name: "running, no pod cgroup: the allocated ones", phase: v1.PodRunning, cm: cm.NewStubContainerManager(),
			cpuReq: "200m", cpuLim: "200m", memReq: "200Mi", memLimit: "200Mi"},
		{name: "running, the cgroup unreadable: the last status's values", phase: v1.PodRunning, cm: podCgroupReader{err: errors.New("gone")}, old: oldRunning,
			cpuReq: "250m", cpuLim: "250m", memReq: "200Mi", memLimit: "250Mi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kl := &Kubelet{containerManager: tc.cm}
			p := pod.DeepCopy()
			p.Status.Phase = tc.phase
			var s v1.PodStatus
			kl.setPodLevelResourcesStatus(p, &s, tc.old)
			assert.Equal(t, "200m", s.AllocatedResources.Cpu().String(), "allocatedResources: the pod-level requests")
			assert.Equal(t, "200Mi", s.AllocatedResources.Memory().String())
			if assert.NotNil(t, s.Resources) {
				assert.Equal(t, tc.cpuReq, s.Resources.Requests.Cpu().String(), "cpu request")
				assert.Equal(t, tc.cpuLim, s.Resources.Limits.Cpu().String(), "cpu limit")
				assert.Equal(t, tc.memReq, s.Resources.Requests.Memory().String(), "memory request")
				assert.Equal(t, tc.memLimit, s.Resources.Limits.Memory().String(), "memory limit")
			}
		})
	}
}
