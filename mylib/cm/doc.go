// Package cm is the kubelet's container manager (upstream:
// pkg/kubelet/cm, container_manager_linux.go, node_container_manager_linux.go,
// qos_container_manager_linux.go, pod_container_manager_linux.go,
// cgroup_manager_linux.go, helpers_linux.go): the node's and the pods'
// cgroups, with the cgroupfs driver, on cgroup v1 or v2.
//
// With cgroupsPerQOS (the default) the kubelet makes, under cgroupRoot
// ("/" by default):
//
//	kubepods                  node allocatable: memory limit, cpu.shares, pids.max
//	kubepods/pod<uid>         a Guaranteed pod
//	kubepods/burstable        cpu.shares: the sum of its pods' CPU requests
//	kubepods/burstable/pod<uid>
//	kubepods/besteffort       cpu.shares 2
//	kubepods/besteffort/pod<uid>
//
// A pod's cgroup carries ResourceConfigForPod: cpu.shares from its CPU
// requests (MilliCPUToShares), a CFS quota from its CPU limits
// (MilliCPUToQuota) and a memory limit, each only when every container
// has that limit or the pod sets it in spec.resources.limits (pod-level
// resources, whose requests and limits replace the containers' sums).
// On cgroup v1 the files are cpu.shares,
// cpu.cfs_period_us, cpu.cfs_quota_us, memory.limit_in_bytes and
// pids.max, in each controller's hierarchy; on v2 cpu.weight, cpu.max,
// memory.max and pids.max in the one hierarchy. The kubelet hands the
// pod's cgroupfs name (/kubepods/burstable/pod<uid>) to the runtime as
// the sandbox's CgroupParent, and the runtime makes the containers'
// cgroups under it.
//
// NewForNode is the manager of this machine: where the kubelet may not
// make cgroups (not root, no cgroup filesystem, a read-only one, or on
// cgroup v2 a root below which cpu and memory cannot be enabled, as in a
// container whose root cgroup holds its processes) it is the stub, which
// makes none, and one log line says so.
//
// Where it departs from upstream:
//   - cgroupfs only: cgroupDriver systemd is refused.
//   - no hugepages, cpusets, MemoryQoS (memory.min/low/high), QOSReserved
//     memory limits, or system-reserved and kube-reserved cgroups;
//     pod-level resources set the pod cgroup's cpu and memory, but not
//     hugepages, nor memory.high.
//   - in-place resize: GetPodCgroupConfig, SetPodCgroupConfig and
//     GetPodCgroupMemoryUsage read and set a pod cgroup's CPU and memory,
//     as upstream; kuberuntime's doPodResizeAction calls them in
//     upstream's order. The burstable cgroup's cpu.shares follow at the
//     QoS manager's next update (every minute, or a pod's cgroup made).
//   - the QoS cgroups' cpu.shares are set when a pod's cgroup is made
//     and every minute, as upstream, but only cpu.shares.
//   - Destroy kills what is left in a pod's cgroup, then removes it, as
//     upstream; it waits for the processes to go (upstream leaves that
//     to the next try). The kubelet calls it only for the cgroups of its
//     own pods: several kubelets of this course may share a machine and
//     its /kubepods. RemoveIfEmpty, used when the kubelet stops, never
//     kills: a real runtime's containers run on without the kubelet.
//   - Create returns a failure to set the resources (upstream logs it),
//     and a failed update of kubepods's limits at Start is logged once
//     (upstream retries every minute with an event).
//   - Capacity is read from /proc (mylib/cadvisor's MachineInfo and
//     pid_max), not from cAdvisor.
package cm
