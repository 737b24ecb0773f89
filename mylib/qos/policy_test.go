package qos

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"mykubelet/mylib/kubetypes"
)

func TestGetContainerOOMScoreAdjust(t *testing.T) {
	const capacity = 4 << 30 // 4Gi
	withMemory := func(name, request string) v1.Container {
		return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: list("", request)}}
	}
	guaranteed := v1.Container{Name: "g", Resources: v1.ResourceRequirements{Requests: list("1", "1Gi"), Limits: list("1", "1Gi")}}
	sidecar := func(c v1.Container) v1.Container {
		c.RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
		return c
	}
	tests := []struct {
		name     string
		pod      v1.PodSpec
		priority int32
		want     int // of the pod's first init container, else its first container
	}{
		{name: "Guaranteed: killed last", pod: v1.PodSpec{Containers: []v1.Container{guaranteed}}, want: -997},
		{name: "BestEffort: killed first", pod: v1.PodSpec{Containers: []v1.Container{{Name: "b"}}}, want: 1000},
		{name: "Burstable, a quarter of the machine: 1000 - 250",
			pod: v1.PodSpec{Containers: []v1.Container{withMemory("a", "1Gi")}}, want: 750},
		{name: "Burstable without a memory request: just below BestEffort",
			pod: v1.PodSpec{Containers: []v1.Container{{Name: "a", Resources: v1.ResourceRequirements{Requests: list("100m", "")}}}}, want: 999},
		{name: "Burstable asking for the whole machine: just above Guaranteed",
			pod: v1.PodSpec{Containers: []v1.Container{withMemory("a", "4Gi")}}, want: 3},
		{name: "a sidecar scores no higher than the smallest regular container",
			pod: v1.PodSpec{InitContainers: []v1.Container{sidecar(withMemory("s", "64Mi"))},
				Containers: []v1.Container{withMemory("a", "2Gi"), withMemory("b", "1Gi")}}, want: 750},
		{name: "a sidecar larger than the regular containers keeps its own",
			pod: v1.PodSpec{InitContainers: []v1.Container{sidecar(withMemory("s", "2Gi"))},
				Containers: []v1.Container{withMemory("a", "1Gi")}}, want: 500},
		{name: "a plain init container is not a sidecar",
			pod: v1.PodSpec{InitContainers: []v1.Container{withMemory("i", "64Mi")},
				Containers: []v1.Container{withMemory("a", "1Gi")}}, want: 985},
		{name: "a pod-level memory request the containers leave is shared among them",
			// 2Gi - 512Mi = 1.5Gi over two containers: 768Mi each; 512Mi + 768Mi of 4Gi is 312.5 thousandths
			pod: v1.PodSpec{Resources: &v1.ResourceRequirements{Requests: list("", "2Gi"), Limits: list("", "3Gi")},
				Containers: []v1.Container{withMemory("a", "512Mi"), {Name: "b"}}}, want: 688},
		{name: "a system-node-critical pod: as Guaranteed, whatever its resources",
			pod:      v1.PodSpec{PriorityClassName: kubetypes.SystemNodeCritical, Containers: []v1.Container{{Name: "b"}}},
			priority: kubetypes.SystemCriticalPriority + 1000, want: -997},
		{name: "system-node-critical's name without its priority is not critical",
			pod: v1.PodSpec{PriorityClassName: kubetypes.SystemNodeCritical, Containers: []v1.Container{{Name: "b"}}}, want: 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: tt.pod}
			if tt.priority != 0 {
				pod.Spec.Priority = ptr.To(tt.priority)
			}
			c := &pod.Spec.Containers[0]
			if len(pod.Spec.InitContainers) > 0 {
				c = &pod.Spec.InitContainers[0]
			}
			assert.Equal(t, tt.want, GetContainerOOMScoreAdjust(pod, c, capacity))
		})
	}
}
