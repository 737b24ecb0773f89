// The pod's quality-of-service class, which the kubelet writes into its
// status and admission hands to the admit handlers. Upstream:
// pkg/apis/core/v1/helper/qos/qos.go (GetPodQOS, ComputePodQOS); here
// mylib/qos, shared with the container manager (mylib/cm).

package kubelet

import (
	v1 "k8s.io/api/core/v1"

	"mykubelet/mylib/qos"
)

// GetPodQOS is qos.GetPodQOS: status.qosClass when set, else computed from
// the containers' requests and limits of cpu and memory.
func GetPodQOS(pod *v1.Pod) v1.PodQOSClass { return qos.GetPodQOS(pod) }
