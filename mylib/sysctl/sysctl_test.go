package sysctl

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"mykubelet/mylib/lifecycle"
)

func TestNormalizeName(t *testing.T) {
	for in, want := range map[string]string{
		"kernel.shm_rmid_forced":           "kernel.shm_rmid_forced",
		"kernel/shm_rmid_forced":           "kernel.shm_rmid_forced",
		"net.ipv4.conf.eno2/100.rp_filter": "net.ipv4.conf.eno2/100.rp_filter",
		"net/ipv4/conf/eno2.100/rp_filter": "net.ipv4.conf.eno2/100.rp_filter",
		"kernel/msg*":                      "kernel.msg*",
		"kernel":                           "kernel",
		"":                                 "",
	} {
		assert.Equal(t, want, NormalizeName(in), in)
	}
}

// Upstream's v1.37 safe list; the sysctls a kernel namespaces late only
// from that kernel on.
func TestSafeSysctlAllowlistForV137(t *testing.T) {
	all := []string{"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
		"net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports",
		"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
		"net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}
	assert.Equal(t, all, safeSysctlAllowlist(version.MustParseGeneric("6.1.0")))
	old := safeSysctlAllowlist(version.MustParseGeneric("4.5.0"))
	assert.NotContains(t, old, "net.ipv4.tcp_fin_timeout", "namespaced from 4.6")
	assert.Contains(t, old, "net.ipv4.tcp_keepalive_time")
	unknown := safeSysctlAllowlist(nil)
	assert.NotContains(t, unknown, "net.ipv4.ip_local_reserved_ports")
	assert.Contains(t, unknown, "kernel.shm_rmid_forced")
}

func TestNewAllowlistRefusesWhatIsNotNamespaced(t *testing.T) {
	_, err := NewAllowlist([]string{"kernel.msg*", "net.core.somaxconn", "kernel/sem"})
	require.NoError(t, err)
	_, err = NewAllowlist([]string{"vm.swappiness"})
	assert.EqualError(t, err, `the sysctl "vm.swappiness" are not known to be namespaced`)
	_, err = NewAllowlist([]string{"fs.*"})
	assert.EqualError(t, err, `the sysctls "fs.*" are not known to be namespaced`)
	_, err = NewAllowlist([]string{"Kernel.msgmax"})
	assert.ErrorContains(t, err, `sysctl "Kernel.msgmax" must have at most 253 characters and match regex`)
}

func admit(t *testing.T, w *Allowlist, pod *v1.Pod) lifecycle.PodAdmitResult {
	t.Helper()
	return w.Admit(context.Background(), &lifecycle.PodAdmitAttributes{Pod: pod})
}

func sysctlPod(names ...string) *v1.Pod {
	pod := &v1.Pod{Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{}}}
	for _, n := range names {
		pod.Spec.SecurityContext.Sysctls = append(pod.Spec.SecurityContext.Sysctls, v1.Sysctl{Name: n, Value: "1"})
	}
	return pod
}

func TestAdmitRefusesWhatIsNeitherSafeNorAllowed(t *testing.T) {
	w, err := NewAllowlist(append(safeSysctlAllowlist(version.MustParseGeneric("6.1.0")), "kernel.msg*"))
	require.NoError(t, err)

	assert.True(t, admit(t, w, &v1.Pod{}).Admit, "no security context")
	assert.True(t, admit(t, w, sysctlPod("kernel.shm_rmid_forced", "kernel/shm_rmid_forced", "kernel.msgmax")).Admit,
		"safe, with slashes, and allowed by a pattern")

	r := admit(t, w, sysctlPod("kernel.shm_rmid_forced", "kernel.sem"))
	assert.Equal(t, lifecycle.PodAdmitResult{Reason: "SysctlForbidden", Message: `forbidden sysctl: "kernel.sem" not allowlisted`}, r)

	// The e2e spec's: an unsafe sysctl the node was not told to allow.
	safeOnly, err := NewAllowlist(safeSysctlAllowlist(version.MustParseGeneric("6.1.0")))
	require.NoError(t, err)
	r = admit(t, safeOnly, sysctlPod("kernel.shm_rmid_forced", "kernel.msgmax"))
	assert.Equal(t, `forbidden sysctl: "kernel.msgmax" not allowlisted`, r.Message)
	assert.Equal(t, ForbiddenReason, r.Reason)

	// A net sysctl with the host's network, an IPC one with the host's IPC.
	pod := sysctlPod("net/ipv4/ip_local_port_range")
	pod.Spec.HostNetwork = true
	r = admit(t, w, pod)
	assert.Equal(t, `forbidden sysctl: "net.ipv4.ip_local_port_range" not allowed with host Net enabled`, r.Message)
	pod = sysctlPod("kernel.msgmax")
	pod.Spec.HostIPC = true
	assert.False(t, admit(t, w, pod).Admit)
	pod.Spec.HostIPC, pod.Spec.HostNetwork = false, true
	assert.True(t, admit(t, w, pod).Admit, "an IPC sysctl with the host's network")
}

func TestPodSysctlsHaveDots(t *testing.T) {
	assert.Nil(t, PodSysctls(&v1.Pod{}))
	pod := sysctlPod("kernel/shm_rmid_forced", "net.ipv4.ip_local_port_range")
	assert.Equal(t, map[string]string{"kernel.shm_rmid_forced": "1", "net.ipv4.ip_local_port_range": "1"}, PodSysctls(pod))
	assert.Equal(t, "kernel/shm_rmid_forced", pod.Spec.SecurityContext.Sysctls[0].Name, "the pod is left as it is")
}
