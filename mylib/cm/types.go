package cm

import (
	"path"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// CgroupName is a cgroup's name as its components, from the root: the
// driver-neutral name upstream uses ({"kubepods", "burstable",
// "pod<uid>"}). The cgroupfs driver writes it /kubepods/burstable/pod<uid>.
type CgroupName []string

// RootCgroupName is the root of every hierarchy.
var RootCgroupName = CgroupName{}

// NewCgroupName is base with components appended (a new slice).
func NewCgroupName(base CgroupName, components ...string) CgroupName {
	out := make(CgroupName, 0, len(base)+len(components))
	return append(append(out, base...), components...)
}

// ToCgroupfs is the name as the cgroupfs driver writes it:
// "/kubepods/burstable/pod<uid>", "/" for the root.
func (n CgroupName) ToCgroupfs() string { return "/" + path.Join(n...) }

// ParseCgroupfsToCgroupName reads a cgroupfs name ("/a/b", "a/b/", "/").
func ParseCgroupfsToCgroupName(name string) CgroupName {
	var out CgroupName
	for _, c := range strings.Split(strings.Trim(name, "/"), "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	if out == nil {
		return RootCgroupName
	}
	return out
}

// ResourceConfig is what a cgroup is given; nil fields are left as they
// are (upstream's, without hugepages, cpusets and the v2 unified map).
type ResourceConfig struct {
	// Memory is the memory limit in bytes.
	Memory *int64
	// CPUShares is the relative CPU weight (v1 cpu.shares; v2 cpu.weight
	// by CPUWeight).
	CPUShares *uint64
	// CPUQuota is the CFS quota in microseconds per CPUPeriod; -1 is none.
	CPUQuota  *int64
	CPUPeriod *uint64
	// PidsLimit is the most processes the cgroup may hold.
	PidsLimit *int64
}

// CgroupConfig is a cgroup's name and resources.
type CgroupConfig struct {
	Name               CgroupName
	ResourceParameters *ResourceConfig
}

// QOSContainersInfo is the cgroups of the QoS classes: Guaranteed pods go
// straight under the node allocatable cgroup (kubepods).
type QOSContainersInfo struct {
	Guaranteed, BestEffort, Burstable CgroupName
}

// ActivePodsFunc lists the pods the kubelet runs (upstream's, the QoS
// manager sums their requests).
type ActivePodsFunc func() []*v1.Pod

// NodeAllocatableEnforcementKey and NoneEnforcementKey are the values of
// enforceNodeAllocatable this kubelet knows (upstream's kubetypes).
const (
	NodeAllocatableEnforcementKey = "pods"
	NoneEnforcementKey            = "none"
)

// CgroupfsDriver is the one cgroupDriver this kubelet has.
const CgroupfsDriver = "cgroupfs"
