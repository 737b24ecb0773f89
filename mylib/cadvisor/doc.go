// Package cadvisor is the kubelet's view of its machine, as upstream's
// pkg/kubelet/cadvisor is: the machine's IDs, CPUs, memory, kernel, OS
// image and the size of the kubelet's filesystem (MachineInfo), and the
// capacity they give (CapacityFromMachineInfo). The node status setters
// (mylib/nodestatus) and the container manager (mylib/cm) both read the
// machine here, and neither imports the other for it.
//
//	info, err := cadvisor.ReadMachineInfo("/var/lib/kubelet")
//	capacity := cadvisor.CapacityFromMachineInfo(info) // cpu, memory
//
// Where it departs from upstream, and why (one line each):
//   - no cAdvisor: ReadMachineInfo reads the few files cAdvisor reads on
//     Linux (/proc/meminfo, /etc/machine-id, …), once per call; container
//     and filesystem statistics come from the runtime (mylib/stats), as
//     upstream's CRI stats provider has them;
//   - one MachineInfo holds what upstream splits into MachineInfo,
//     VersionInfo and RootFsInfo;
//   - MockMachine, the course's own knob, sets the node's memory and
//     filesystem sizes (ReadMachineInfoOf), and a mock machine's node IDs
//     are its own (NodeIDs): several nodes share one host in the course;
//   - no hugepages, NUMA topology or network devices.
package cadvisor
