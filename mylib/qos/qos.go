// Package qos is the pod's quality-of-service class (upstream:
// pkg/apis/core/v1/helper/qos, GetPodQOS and ComputePodQOS) and what the
// class means to the kernel's OOM killer (policy.go; upstream:
// pkg/kubelet/qos, GetContainerOOMScoreAdjust). The kubelet writes the
// class into the pod's status and hands it to admission; the container
// manager (mylib/cm) picks the pod's cgroup parent by it; the runtime
// manager (mylib/kuberuntime) gives each container its oom_score_adj.
package qos

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"mykubelet/mylib/lifecycle"
)

// GetPodQOS is the pod's QoS class: status.qosClass when the API server
// set it, else computed (ComputePodQOS) from its pod-level requests and
// limits of cpu and memory when it sets any, else from its containers':
// Guaranteed when every container has equal requests and limits for
// both, BestEffort when none has any, Burstable otherwise.
func GetPodQOS(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass // set once by the API server; it never changes
	}
	return ComputePodQOS(pod)
}

// ComputePodQOS computes the class from the spec alone. A pod that sets
// pod-level resources (spec.resources) takes its class from them alone,
// whatever its containers set, as upstream's with PodLevelResources on.
func ComputePodQOS(pod *v1.Pod) v1.PodQOSClass {
	if lifecycle.IsPodLevelResourcesSet(pod) {
		return requirementsQOS(pod.Spec.Resources)
	}
	requests, limits := v1.ResourceList{}, v1.ResourceList{}
	guaranteed := true
	add := func(list v1.ResourceList, name v1.ResourceName, q resource.Quantity) {
		if cur, ok := list[name]; ok {
			cur.Add(q)
			list[name] = cur
		} else {
			list[name] = q.DeepCopy()
		}
	}
	supported := func(n v1.ResourceName) bool { return n == v1.ResourceCPU || n == v1.ResourceMemory }
	for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for name, q := range c.Resources.Requests {
			if supported(name) && q.Sign() > 0 {
				add(requests, name, q)
			}
		}
		found := 0
		for name, q := range c.Resources.Limits {
			if supported(name) && q.Sign() > 0 {
				add(limits, name, q)
				found++
			}
		}
		if found < 2 {
			guaranteed = false
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

// requirementsQOS is the class of one set of requests and limits
// (upstream's function of this name): BestEffort when neither cpu nor
// memory is requested or limited, Guaranteed when both are limited and
// requested as much as limited, Burstable otherwise.
func requirementsQOS(r *v1.ResourceRequirements) v1.PodQOSClass {
	var class v1.PodQOSClass
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		req, lim := r.Requests[name], r.Limits[name]
		c := v1.PodQOSGuaranteed
		switch {
		case !req.Equal(lim):
			return v1.PodQOSBurstable
		case req.IsZero():
			c = v1.PodQOSBestEffort
		}
		if class != "" && class != c {
			return v1.PodQOSBurstable // one set, the other not
		}
		class = c
	}
	return class
}
