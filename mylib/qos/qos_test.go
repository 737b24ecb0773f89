package qos

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func list(cpu, mem string) v1.ResourceList {
	l := v1.ResourceList{}
	if cpu != "" {
		l[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		l[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return l
}

func TestComputePodQOSFromPodLevelResources(t *testing.T) {
	guaranteedContainer := v1.Container{Name: "c", Resources: v1.ResourceRequirements{Requests: list("1", "1Gi"), Limits: list("1", "1Gi")}}
	tests := []struct {
		name       string
		containers []v1.Container
		pod        *v1.ResourceRequirements
		want       v1.PodQOSClass
	}{
		{name: "containers without resources, pod-level requests below limits (the documentation's pod-resources-demo)",
			containers: []v1.Container{{Name: "a"}, {Name: "b"}},
			pod:        &v1.ResourceRequirements{Requests: list("1", "100Mi"), Limits: list("1", "200Mi")}, want: v1.PodQOSBurstable},
		{name: "containers without resources, pod-level requests equal to limits",
			containers: []v1.Container{{Name: "a"}, {Name: "b"}},
			pod:        &v1.ResourceRequirements{Requests: list("1", "200Mi"), Limits: list("1", "200Mi")}, want: v1.PodQOSGuaranteed},
		{name: "Guaranteed containers, but the pod level decides",
			containers: []v1.Container{guaranteedContainer},
			pod:        &v1.ResourceRequirements{Requests: list("1", "1Gi"), Limits: list("2", "1Gi")}, want: v1.PodQOSBurstable},
		{name: "only cpu at the pod level",
			containers: []v1.Container{guaranteedContainer},
			pod:        &v1.ResourceRequirements{Requests: list("1", ""), Limits: list("1", "")}, want: v1.PodQOSBurstable},
		{name: "an empty spec.resources is not set: the containers decide",
			containers: []v1.Container{guaranteedContainer},
			pod:        &v1.ResourceRequirements{}, want: v1.PodQOSGuaranteed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{Containers: tt.containers, Resources: tt.pod}}
			assert.Equal(t, tt.want, ComputePodQOS(pod))
			assert.Equal(t, tt.want, GetPodQOS(pod), "no status.qosClass: computed")
		})
	}
}
