package cadvisor

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// CapacityFromMachineInfo is the machine's CPUs and memory as a resource
// list, as upstream's (pkg/kubelet/cadvisor/util.go; without hugepages).
func CapacityFromMachineInfo(info *MachineInfo) v1.ResourceList {
	return v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(info.NumCores), resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(info.MemoryCapacity, resource.BinarySI),
	}
}
