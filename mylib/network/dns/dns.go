// Package dns computes a pod's DNS resolver configuration, the
// nameservers, search domains and options the runtime writes into each
// container's /etc/resolv.conf, as upstream's pkg/kubelet/network/dns: by
// the pod's dnsPolicy from the kubelet's clusterDNS and clusterDomain and
// the node's resolver file (--resolv-conf), then the pod's own dnsConfig
// merged in, cut to the limits the resolvers accept.
//
// Wiring:
//
//	c := dns.NewConfigurer(recorder, nodeRef, []net.IP{net.ParseIP("10.96.0.10")}, "cluster.local", dns.DefaultResolverConfig)
//	cfg, err := c.GetPodDNS(pod) // PodSandboxConfig.DnsConfig
//
// Where it departs from upstream, and why (one line each):
//   - options keep the order they were first written in (upstream's come
//     out of a map in any order), so the same pod gets the same file;
//   - with no resolver file, the Default policy's nameserver is 127.0.0.1
//     (upstream picks ::1 too on an IPv6 node: it knows the node's IPs,
//     this Configurer is not given them);
//   - no Windows variant (the node's DNS from the registry).
package dns

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// The resolver's limits, as upstream's API validation names them
// (pkg/apis/core/validation): glibc reads at most 3 nameservers, and
// search lines longer than this are cut.
const (
	MaxDNSNameservers     = 3
	MaxDNSSearchPaths     = 32
	MaxDNSSearchListChars = 2048
)

// DefaultResolverConfig is the kubelet's --resolv-conf default: the node's
// resolver file, the base of the Default policy and of the host's search
// domains.
const DefaultResolverConfig = "/etc/resolv.conf"

// Event reasons, upstream's.
const (
	// MissingClusterDNS: a ClusterFirst pod on a kubelet without clusterDNS.
	MissingClusterDNS = "MissingClusterDNS"
	// DNSConfigForming: nameservers or search domains were cut to the limits.
	DNSConfigForming = "DNSConfigForming"
	// CheckLimitsForResolvConf: the node's resolver file is over the limits.
	CheckLimitsForResolvConf = "CheckLimitsForResolvConf"
)

// maxResolvConfLength bounds what is read of the resolver file, as upstream.
const maxResolvConfLength = 10 << 20

// defaultDNSOptions are a ClusterFirst pod's options: a name with fewer
// than 5 dots is tried with each search domain first.
var defaultDNSOptions = []string{"ndots:5"}

// Configurer computes pods' DNS configurations. It is safe for concurrent
// use: nothing changes it after NewConfigurer.
type Configurer struct {
	recorder record.EventRecorder // nil drops the events
	nodeRef  *v1.ObjectReference
	// clusterDNS are the cluster DNS servers' IPs (--cluster-dns).
	clusterDNS []net.IP
	// ClusterDomain is --cluster-domain, e.g. "cluster.local".
	ClusterDomain string
	// ResolverConfig is --resolv-conf: the node's resolver file; "" means
	// none (a Default pod then resolves nothing).
	ResolverConfig string
}

// NewConfigurer returns a Configurer. recorder receives the warnings (on
// the pod, and on nodeRef for what concerns the node); clusterDNS and
// clusterDomain are the kubelet's; resolverConfig is the node's resolver
// file, "" for none.
func NewConfigurer(recorder record.EventRecorder, nodeRef *v1.ObjectReference, clusterDNS []net.IP, clusterDomain, resolverConfig string) *Configurer {
	return &Configurer{recorder: recorder, nodeRef: nodeRef, clusterDNS: clusterDNS,
		ClusterDomain: clusterDomain, ResolverConfig: resolverConfig}
}

type podDNSType int

const (
	podDNSCluster podDNSType = iota
	podDNSHost
	podDNSNone
)

// getPodDNSType reads the pod's dnsPolicy: ClusterFirst is the node's
// (Default) for a pod on the node's network, ClusterFirstWithHostNet is
// the cluster's even there.
func getPodDNSType(pod *v1.Pod) (podDNSType, error) {
	switch pod.Spec.DNSPolicy {
	case v1.DNSNone:
		return podDNSNone, nil
	case v1.DNSClusterFirstWithHostNet:
		return podDNSCluster, nil
	case v1.DNSClusterFirst, "": // "": a pod that skipped the API's defaulting
		if !pod.Spec.HostNetwork {
			return podDNSCluster, nil
		}
		return podDNSHost, nil
	case v1.DNSDefault:
		return podDNSHost, nil
	}
	return podDNSCluster, fmt.Errorf("invalid DNSPolicy=%v", pod.Spec.DNSPolicy)
}

// GetPodDNS is the pod's resolver configuration:
//   - None: only the pod's dnsConfig;
//   - ClusterFirst (and ClusterFirstWithHostNet): the cluster DNS servers,
//     the search domains <ns>.svc.<domain>, svc.<domain>, <domain> then the
//     node's, and ndots:5; without clusterDNS, a MissingClusterDNS warning
//     and Default;
//   - Default: the resolver file's nameservers, search and options (with
//     none, 127.0.0.1 and the search ".": nothing resolves);
//
// then the pod's dnsConfig appended (duplicates dropped, its options
// overriding same-named ones) and the whole cut to the limits, with a
// DNSConfigForming warning when something was cut.
func (c *Configurer) GetPodDNS(pod *v1.Pod) (*runtimeapi.DNSConfig, error) {
	cfg, err := getDNSConfig(c.ResolverConfig)
	if err != nil {
		return nil, err
	}
	dnsType, err := getPodDNSType(pod)
	if err != nil {
		klog.ErrorS(err, "Failed to get DNS type for pod. Falling back to DNSClusterFirst policy.", "pod", klog.KObj(pod))
		dnsType = podDNSCluster
	}
	switch dnsType {
	case podDNSNone:
		cfg = &runtimeapi.DNSConfig{}
	case podDNSCluster:
		if len(c.clusterDNS) > 0 {
			// The cluster DNS is the only nameserver: it forwards what it
			// cannot answer itself.
			cfg.Servers = nil
			for _, ip := range c.clusterDNS {
				cfg.Servers = append(cfg.Servers, ip.String())
			}
			cfg.Searches = c.generateSearchesForDNSClusterFirst(cfg.Searches, pod)
			cfg.Options = append([]string(nil), defaultDNSOptions...)
			break
		}
		msg := fmt.Sprintf("kubelet does not have ClusterDNS IP configured and cannot create Pod using %q policy. Falling back to %q policy.", v1.DNSClusterFirst, v1.DNSDefault)
		c.event(c.nodeRef, MissingClusterDNS, msg)
		c.event(podRef(pod), MissingClusterDNS, fmt.Sprintf("pod: %q. %s", fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID), msg))
		fallthrough
	case podDNSHost:
		if c.ResolverConfig == "" {
			// No resolver file: the resolver's own default is "the local
			// machine", which a container does not serve.
			cfg.Servers = []string{"127.0.0.1"}
			cfg.Searches = []string{"."}
		}
	}
	if pod.Spec.DNSConfig != nil {
		cfg = appendDNSConfig(cfg, pod.Spec.DNSConfig)
	}
	return c.formDNSConfigFitsLimits(cfg, pod), nil
}

// CheckLimitsForResolvConf warns on the node (once, at start, as upstream's
// kubelet calls it) when the resolver file's search line leaves no room for
// the cluster's three domains or is too long.
func (c *Configurer) CheckLimitsForResolvConf() {
	if c.ResolverConfig == "" {
		return
	}
	f, err := os.Open(c.ResolverConfig)
	if err != nil {
		c.event(c.nodeRef, CheckLimitsForResolvConf, err.Error())
		return
	}
	defer f.Close()
	_, hostSearch, _, err := parseResolvConf(f)
	if err != nil {
		c.event(c.nodeRef, CheckLimitsForResolvConf, err.Error())
		return
	}
	limit := MaxDNSSearchPaths
	if c.ClusterDomain != "" {
		limit -= 3
	}
	if len(hostSearch) > limit {
		c.event(c.nodeRef, CheckLimitsForResolvConf, fmt.Sprintf("Resolv.conf file '%s' contains search line consisting of more than %d domains!", c.ResolverConfig, limit))
		return
	}
	for _, s := range hostSearch {
		if len(s) > utilvalidation.DNS1123SubdomainMaxLength {
			c.event(c.nodeRef, CheckLimitsForResolvConf, fmt.Sprintf("Resolv.conf file %q contains a search path which length is more than allowed %d chars!", c.ResolverConfig, utilvalidation.DNS1123SubdomainMaxLength))
			return
		}
	}
	if len(strings.Join(hostSearch, " ")) > MaxDNSSearchListChars {
		c.event(c.nodeRef, CheckLimitsForResolvConf, fmt.Sprintf("Resolv.conf file '%s' contains search line which length is more than allowed %d chars!", c.ResolverConfig, MaxDNSSearchListChars))
	}
}

func (c *Configurer) event(ref *v1.ObjectReference, reason, message string) {
	if c.recorder != nil && ref != nil {
		c.recorder.Event(ref, v1.EventTypeWarning, reason, message)
	}
}

func podRef(pod *v1.Pod) *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
}

// generateSearchesForDNSClusterFirst puts the cluster's domains before the
// node's.
func (c *Configurer) generateSearchesForDNSClusterFirst(hostSearch []string, pod *v1.Pod) []string {
	if c.ClusterDomain == "" {
		return hostSearch
	}
	cluster := []string{pod.Namespace + ".svc." + c.ClusterDomain, "svc." + c.ClusterDomain, c.ClusterDomain}
	return omitDuplicates(append(cluster, hostSearch...))
}

// getDNSConfig reads a resolver file; "" is an empty configuration.
func getDNSConfig(resolverConfig string) (*runtimeapi.DNSConfig, error) {
	cfg := &runtimeapi.DNSConfig{}
	if resolverConfig == "" {
		return cfg, nil
	}
	f, err := os.Open(resolverConfig)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cfg.Servers, cfg.Searches, cfg.Options, err = parseResolvConf(f)
	if err != nil {
		return nil, fmt.Errorf("Encountered error while parsing resolv conf file. Error: %w", err)
	}
	return cfg, nil
}

// parseResolvConf reads resolv.conf lines: every "nameserver" adds one,
// the last "search" line wins (trailing dots dropped, "." skipped), and
// "options" add up, a later option replacing one of the same name.
func parseResolvConf(r io.Reader) (nameservers, searches, options []string, err error) {
	b, err := io.ReadAll(io.LimitReader(r, maxResolvConfLength+1))
	if err != nil {
		return nil, nil, nil, err
	}
	if len(b) > maxResolvConfLength {
		return nil, nil, nil, fmt.Errorf("the read limit is reached")
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(nil, maxResolvConfLength)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if len(fields) < 2 {
				return nil, nil, nil, fmt.Errorf("nameserver list is empty ")
			}
			nameservers = append(nameservers, fields[1])
		case "search":
			searches = []string{}
			for _, s := range fields[1:] {
				if s != "." {
					searches = append(searches, strings.TrimSuffix(s, "."))
				}
			}
		case "options":
			options = mergeOptions(options, fields[1:])
		}
	}
	return nameservers, searches, options, sc.Err()
}

// optionName is "ndots" of "ndots:5".
func optionName(o string) string {
	name, _, _ := strings.Cut(o, ":")
	return name
}

// mergeOptions adds options, each replacing an earlier one of its name in
// place.
func mergeOptions(options, more []string) []string {
	out := append([]string(nil), options...)
	for _, o := range more {
		replaced := false
		for i := range out {
			if optionName(out[i]) == optionName(o) {
				out[i], replaced = o, true
				break
			}
		}
		if !replaced {
			out = append(out, o)
		}
	}
	return out
}

// appendDNSConfig merges the pod's dnsConfig into cfg.
func appendDNSConfig(cfg *runtimeapi.DNSConfig, pod *v1.PodDNSConfig) *runtimeapi.DNSConfig {
	cfg.Servers = omitDuplicates(append(cfg.Servers, pod.Nameservers...))
	cfg.Searches = omitDuplicates(append(cfg.Searches, pod.Searches...))
	var more []string
	for _, o := range pod.Options {
		if o.Value != nil && *o.Value != "" {
			more = append(more, o.Name+":"+*o.Value)
		} else {
			more = append(more, o.Name)
		}
	}
	cfg.Options = mergeOptions(cfg.Options, more)
	return cfg
}

func omitDuplicates(list []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// formDNSConfigFitsLimits cuts the nameservers to 3 and the search
// domains to 32, none longer than 253 characters, 2048 in all, warning on
// the pod with upstream's messages.
func (c *Configurer) formDNSConfigFitsLimits(cfg *runtimeapi.DNSConfig, pod *v1.Pod) *runtimeapi.DNSConfig {
	if len(cfg.Servers) > MaxDNSNameservers {
		cfg.Servers = cfg.Servers[:MaxDNSNameservers]
		c.event(podRef(pod), DNSConfigForming, fmt.Sprintf("Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: %s", strings.Join(cfg.Servers, " ")))
	}

	search, cut := cfg.Searches, false
	if len(search) > MaxDNSSearchPaths {
		search, cut = search[:MaxDNSSearchPaths], true
	}
	kept := search[:0:0]
	for _, s := range search {
		if len(s) > utilvalidation.DNS1123SubdomainMaxLength { // some resolvers abort on these
			cut = true
			continue
		}
		kept = append(kept, s)
	}
	for len(strings.Join(kept, " ")) > MaxDNSSearchListChars {
		kept, cut = kept[:len(kept)-1], true // drop from the end until it fits
	}
	if cut {
		c.event(podRef(pod), DNSConfigForming, fmt.Sprintf("Search Line limits were exceeded, some search paths have been omitted, the applied search line is: %s", strings.Join(kept, " ")))
	}
	if cfg.Searches != nil || len(kept) > 0 {
		cfg.Searches = kept
	}
	return cfg
}
