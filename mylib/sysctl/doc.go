// Package sysctl is upstream's pkg/kubelet/sysctl: which sysctls a pod
// may set (spec.securityContext.sysctls) on this node, and the admit
// handler that refuses the others.
//
// A sysctl is allowed when it is on the safe list (SafeSysctlAllowlist:
// namespaced and isolated, so it touches no other pod) or on the node's
// allowedUnsafeSysctls (KubeletConfiguration; a name or a prefix ending
// in "*"), and the kernel namespaces it in the pod: IPC ones (kernel.shm*,
// kernel.msg*, kernel.sem, fs.mqueue.*) not with hostIPC, net.* not with
// hostNetwork. A pod that asks for another is rejected with reason
// SysctlForbidden. Names may be written with slashes
// (kernel/shm_rmid_forced); they are read as with dots, as sysctl(8)
// reads them (NormalizeName), and passed to the runtime so.
//
// Where it departs from upstream, and why (one line each):
//   - the pod's names are not rewritten in place before its sandbox is
//     made (upstream's ConvertPodSysctlsVariableToDotsSeparator):
//     PodSysctls builds the sandbox's map, since the pod is shared.
package sysctl
