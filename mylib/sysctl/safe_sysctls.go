package sysctl

import (
	"sync"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/klog/v2"
)

// safeSysctls are upstream's v1.37 safe sysctls, each with the first
// kernel that namespaces it ("" for all).
var safeSysctls = []struct{ name, kernel string }{
	{"kernel.shm_rmid_forced", ""},
	{"net.ipv4.ip_local_port_range", ""},
	{"net.ipv4.tcp_syncookies", ""},
	{"net.ipv4.ping_group_range", ""},
	{"net.ipv4.ip_unprivileged_port_start", ""},
	{"net.ipv4.ip_local_reserved_ports", "3.16"},
	{"net.ipv4.tcp_keepalive_time", "4.5"},
	{"net.ipv4.tcp_fin_timeout", "4.6"},
	{"net.ipv4.tcp_keepalive_intvl", "4.5"},
	{"net.ipv4.tcp_keepalive_probes", "4.5"},
	{"net.ipv4.tcp_rmem", ""},
	{"net.ipv4.tcp_wmem", ""},
}

// SafeSysctlAllowlist is the sysctls any pod may set on this node: the
// safe ones its kernel namespaces (upstream's SafeSysctlAllowlist).
func SafeSysctlAllowlist() []string {
	return safeSysctlAllowlist(kernelVersion())
}

// safeSysctlAllowlist is the safe list for a kernel; nil (unknown) keeps
// out those that need a version.
func safeSysctlAllowlist(kernel *version.Version) []string {
	var out []string
	for _, s := range safeSysctls {
		if s.kernel == "" || (kernel != nil && kernel.AtLeast(version.MustParseGeneric(s.kernel))) {
			out = append(out, s.name)
			continue
		}
		klog.InfoS("kernel version is too old, dropping the sysctl from safe sysctl list", "kernelVersion", kernel, "sysctl", s.name)
	}
	return out
}

var kernelVersion = sync.OnceValue(func() *version.Version {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		klog.ErrorS(err, "failed to get kernel version, unable to determine which sysctls are available")
		return nil
	}
	v, err := version.ParseGeneric(unix.ByteSliceToString(u.Release[:]))
	if err != nil {
		klog.ErrorS(err, "failed to get kernel version, unable to determine which sysctls are available")
		return nil
	}
	return v
})
