package kubelet

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestGetPodQOS(t *testing.T) {
	rl := func(cpu, mem string) v1.ResourceList {
		l := v1.ResourceList{}
		if cpu != "" {
			l[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[v1.ResourceMemory] = resource.MustParse(mem)
		}
		return l
	}
	pod := func(containers ...v1.ResourceRequirements) *v1.Pod {
		p := &v1.Pod{}
		for _, r := range containers {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Resources: r})
		}
		return p
	}
	assert.Equal(t, v1.PodQOSBestEffort, GetPodQOS(pod(v1.ResourceRequirements{})))
	assert.Equal(t, v1.PodQOSGuaranteed, GetPodQOS(pod(v1.ResourceRequirements{Requests: rl("1", "1Gi"), Limits: rl("1", "1Gi")})))
	assert.Equal(t, v1.PodQOSBurstable, GetPodQOS(pod(v1.ResourceRequirements{Requests: rl("500m", "1Gi"), Limits: rl("1", "1Gi")})))
	assert.Equal(t, v1.PodQOSBurstable, GetPodQOS(pod(v1.ResourceRequirements{Limits: rl("1", "1Gi")}, v1.ResourceRequirements{})),
		"one container without limits")
	assert.Equal(t, v1.PodQOSBurstable, GetPodQOS(pod(v1.ResourceRequirements{Requests: rl("100m", "")})))
	p := pod()
	p.Status.QOSClass = v1.PodQOSGuaranteed
	assert.Equal(t, v1.PodQOSGuaranteed, GetPodQOS(p), "the API's class wins")
}
