package sysctl

import "strings"

// Namespace is the kernel namespace a sysctl belongs to.
type Namespace string

// The namespaces a sysctl may be in, as upstream's (component-helpers
// node/util/sysctl).
const (
	IPCNamespace     Namespace = "IPC"
	NetNamespace     Namespace = "Net"
	UTSNamespace     Namespace = "UTS"
	UnknownNamespace Namespace = ""
)

var namespaces = map[string]Namespace{
	"kernel.sem":        IPCNamespace,
	"kernel.domainname": UTSNamespace,
	"kernel.hostname":   UTSNamespace,
}

var prefixNamespaces = map[string]Namespace{
	"kernel.shm": IPCNamespace,
	"kernel.msg": IPCNamespace,
	"fs.mqueue.": IPCNamespace,
	"net.":       NetNamespace,
}

// NamespacedBy is the namespace of a sysctl (or a prefix of sysctls),
// UnknownNamespace if the kernel does not namespace it.
func NamespacedBy(sysctl string) Namespace {
	sysctl = NormalizeName(sysctl)
	if ns, ok := namespaces[sysctl]; ok {
		return ns
	}
	for p, ns := range prefixNamespaces {
		if strings.HasPrefix(sysctl, p) {
			return ns
		}
	}
	return UnknownNamespace
}

// NormalizeName is a sysctl's name with dots as separators, as
// sysctl.d(5) reads it (upstream's ConvertSysctlVariableToDotsSeparator,
// component-helpers' NormalizeName): a name whose first separator is a
// slash has its slashes and dots swapped, so kernel/shm_rmid_forced is
// kernel.shm_rmid_forced and net/ipv4/conf/eno2.100/rp_filter is
// net.ipv4.conf.eno2/100.rp_filter (the interface keeps its dot, as a
// slash). A name whose first separator is a dot is left as it is.
func NormalizeName(name string) string {
	i := strings.IndexAny(name, "./")
	if i < 0 || name[i] == '.' {
		return name
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '.':
			return '/'
		case '/':
			return '.'
		}
		return r
	}, name)
}
