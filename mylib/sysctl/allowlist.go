package sysctl

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	v1 "k8s.io/api/core/v1"

	"mykubelet/mylib/lifecycle"
)

// ForbiddenReason is the reason a pod with a sysctl the node does not
// allow is rejected with.
const ForbiddenReason = "SysctlForbidden"

// maxLength is the longest sysctl name (the API's SysctlMaxLength).
const maxLength = 253

// patternRegexp is what a sysctl or sysctl pattern may look like
// (upstream's policy validation SysctlContainSlashPatternFmt): segments
// of lower-case letters, digits, "-" and "_" separated by dots or
// slashes, the last one maybe ending in "*".
var patternRegexp = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]$`)

// Allowlist is the admit handler that refuses pods with sysctls the node
// does not allow (upstream's patternAllowlist).
type Allowlist struct {
	sysctls  map[string]Namespace
	prefixes map[string]Namespace
}

var _ lifecycle.PodAdmitHandler = (*Allowlist)(nil)

// NewAllowlist is the admit handler for these sysctls and patterns (a
// prefix ending in "*"): the safe list and the node's
// allowedUnsafeSysctls, as upstream's NewMainKubelet makes it. A pattern
// that is not a sysctl name, or names sysctls the kernel does not
// namespace, is an error.
func NewAllowlist(patterns []string) (*Allowlist, error) {
	w := &Allowlist{sysctls: map[string]Namespace{}, prefixes: map[string]Namespace{}}
	for _, s := range patterns {
		if len(s) > maxLength || !patternRegexp.MatchString(s) {
			return nil, fmt.Errorf("sysctl %q must have at most %d characters and match regex %s", s, maxLength, patternRegexp)
		}
		s = NormalizeName(s)
		if prefix, ok := strings.CutSuffix(s, "*"); ok {
			ns := NamespacedBy(prefix)
			if ns == UnknownNamespace {
				return nil, fmt.Errorf("the sysctls %q are not known to be namespaced", s)
			}
			w.prefixes[prefix] = ns
			continue
		}
		ns := NamespacedBy(s)
		if ns == UnknownNamespace {
			return nil, fmt.Errorf("the sysctl %q are not known to be namespaced", s)
		}
		w.sysctls[s] = ns
	}
	return w, nil
}

// validateSysctl says why a sysctl may not be set: not on the list, or
// in a namespace the pod shares with the host.
func (w *Allowlist) validateSysctl(sysctl string, hostNet, hostIPC bool) error {
	sysctl = NormalizeName(sysctl)
	ns, found := w.sysctls[sysctl]
	if !found {
		for p, pns := range w.prefixes {
			if strings.HasPrefix(sysctl, p) {
				ns, found = pns, true
				break
			}
		}
	}
	if !found {
		return fmt.Errorf("%q not allowlisted", sysctl)
	}
	if (ns == IPCNamespace && hostIPC) || (ns == NetNamespace && hostNet) {
		return fmt.Errorf("%q not allowed with host %s enabled", sysctl, ns)
	}
	return nil
}

// Admit refuses a pod with a sysctl the node does not allow, with
// upstream's reason and message.
func (w *Allowlist) Admit(_ context.Context, attrs *lifecycle.PodAdmitAttributes) lifecycle.PodAdmitResult {
	pod := attrs.Pod
	if pod.Spec.SecurityContext == nil {
		return lifecycle.PodAdmitResult{Admit: true}
	}
	for _, s := range pod.Spec.SecurityContext.Sysctls {
		if err := w.validateSysctl(s.Name, pod.Spec.HostNetwork, pod.Spec.HostIPC); err != nil {
			return lifecycle.PodAdmitResult{Reason: ForbiddenReason, Message: fmt.Sprintf("forbidden sysctl: %v", err)}
		}
	}
	return lifecycle.PodAdmitResult{Admit: true}
}

// PodSysctls is the pod's sysctls by name, the names with dots (what the
// sandbox's LinuxPodSandboxConfig.Sysctls carries; upstream converts
// the pod's names in place, ConvertPodSysctlsVariableToDotsSeparator,
// before it makes the sandbox). Nil without any.
func PodSysctls(pod *v1.Pod) map[string]string {
	if pod.Spec.SecurityContext == nil || len(pod.Spec.SecurityContext.Sysctls) == 0 {
		return nil
	}
	out := make(map[string]string, len(pod.Spec.SecurityContext.Sysctls))
	for _, s := range pod.Spec.SecurityContext.Sysctls {
		out[NormalizeName(s.Name)] = s.Value
	}
	return out
}
