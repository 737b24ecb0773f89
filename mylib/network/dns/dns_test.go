package dns

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

const hostResolvConf = `# the node's
nameserver 192.0.2.53
nameserver 192.0.2.54
search corp.example. lab.example
options timeout:2 ndots:1
options timeout:3
`

func writeResolvConf(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "resolv.conf")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func newPod(policy v1.DNSPolicy) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metaFor("web", "shop"),
		Spec:       v1.PodSpec{DNSPolicy: policy},
	}
}

func metaFor(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID("uid-" + name)}
}

var nodeRef = &v1.ObjectReference{Kind: "Node", Name: "node-1", UID: "node-1"}

func drain(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestParseResolvConf(t *testing.T) {
	ns, search, opts, err := parseResolvConf(strings.NewReader(hostResolvConf))
	require.NoError(t, err)
	assert.Equal(t, []string{"192.0.2.53", "192.0.2.54"}, ns)
	assert.Equal(t, []string{"corp.example", "lab.example"}, search, "trailing dots dropped")
	assert.Equal(t, []string{"timeout:3", "ndots:1"}, opts, "a later option replaces one of its name in place")

	_, _, _, err = parseResolvConf(strings.NewReader("nameserver\n"))
	assert.EqualError(t, err, "nameserver list is empty ")
}

func TestDNSClusterFirst(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	c := NewConfigurer(rec, nodeRef, []net.IP{net.ParseIP("10.96.0.10")}, "cluster.local", writeResolvConf(t, hostResolvConf))
	got, err := c.GetPodDNS(newPod(v1.DNSClusterFirst))
	require.NoError(t, err)
	assert.Equal(t, []string{"10.96.0.10"}, got.Servers, "the cluster DNS is the only nameserver")
	assert.Equal(t, []string{"shop.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example", "lab.example"}, got.Searches)
	assert.Equal(t, []string{"ndots:5"}, got.Options)
	assert.Empty(t, drain(rec))

	// ClusterFirstWithHostNet is the cluster's on the node's network too;
	// ClusterFirst there is the node's.
	hostNet := newPod(v1.DNSClusterFirstWithHostNet)
	hostNet.Spec.HostNetwork = true
	got, err = c.GetPodDNS(hostNet)
	require.NoError(t, err)
	assert.Equal(t, []string{"10.96.0.10"}, got.Servers)
	hostNet.Spec.DNSPolicy = v1.DNSClusterFirst
	got, err = c.GetPodDNS(hostNet)
	require.NoError(t, err)
	assert.Equal(t, []string{"192.0.2.53", "192.0.2.54"}, got.Servers)
}

func TestDNSMissingClusterDNSFallsBackToDefault(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	c := NewConfigurer(rec, nodeRef, nil, "cluster.local", writeResolvConf(t, hostResolvConf))
	got, err := c.GetPodDNS(newPod(v1.DNSClusterFirst))
	require.NoError(t, err)
	assert.Equal(t, []string{"192.0.2.53", "192.0.2.54"}, got.Servers)
	assert.Equal(t, []string{"corp.example", "lab.example"}, got.Searches)
	msg := `kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`
	assert.Equal(t, []string{
		"Warning MissingClusterDNS " + msg,
		`Warning MissingClusterDNS pod: "web_shop(uid-web)". ` + msg,
	}, drain(rec))
}

func TestDNSDefault(t *testing.T) {
	c := NewConfigurer(nil, nodeRef, []net.IP{net.ParseIP("10.96.0.10")}, "cluster.local", writeResolvConf(t, hostResolvConf))
	got, err := c.GetPodDNS(newPod(v1.DNSDefault))
	require.NoError(t, err)
	assert.Equal(t, &runtimeapi.DNSConfig{
		Servers: []string{"192.0.2.53", "192.0.2.54"}, Searches: []string{"corp.example", "lab.example"}, Options: []string{"timeout:3", "ndots:1"},
	}, got)

	// No resolver file: nothing resolves.
	c = NewConfigurer(nil, nodeRef, nil, "cluster.local", "")
	got, err = c.GetPodDNS(newPod(v1.DNSDefault))
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.0.1"}, got.Servers)
	assert.Equal(t, []string{"."}, got.Searches)

	// A resolver file that cannot be read is an error.
	c = NewConfigurer(nil, nodeRef, nil, "", filepath.Join(t.TempDir(), "missing"))
	_, err = c.GetPodDNS(newPod(v1.DNSDefault))
	assert.Error(t, err)
}

func TestDNSNoneTakesOnlyDNSConfig(t *testing.T) {
	c := NewConfigurer(nil, nodeRef, []net.IP{net.ParseIP("10.96.0.10")}, "cluster.local", writeResolvConf(t, hostResolvConf))
	pod := newPod(v1.DNSNone)
	pod.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"1.2.3.4"}, Searches: []string{"ns1.svc.cluster-domain.example"},
		Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "edns0"}}}
	got, err := c.GetPodDNS(pod)
	require.NoError(t, err)
	assert.Equal(t, &runtimeapi.DNSConfig{Servers: []string{"1.2.3.4"}, Searches: []string{"ns1.svc.cluster-domain.example"},
		Options: []string{"ndots:2", "edns0"}}, got)
}

func TestDNSConfigMerged(t *testing.T) {
	c := NewConfigurer(nil, nodeRef, []net.IP{net.ParseIP("10.96.0.10")}, "cluster.local", "")
	pod := newPod(v1.DNSClusterFirst)
	pod.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"10.96.0.10", "192.0.2.1"}, Searches: []string{"svc.cluster.local", "extra.example"},
		Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "single-request"}}}
	got, err := c.GetPodDNS(pod)
	require.NoError(t, err)
	assert.Equal(t, []string{"10.96.0.10", "192.0.2.1"}, got.Servers, "duplicates dropped")
	assert.Equal(t, []string{"shop.svc.cluster.local", "svc.cluster.local", "cluster.local", "extra.example"}, got.Searches)
	assert.Equal(t, []string{"ndots:2", "single-request"}, got.Options, "the pod's ndots replaces the default")
}

func TestDNSLimits3Nameservers32Searches2048Chars(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	c := NewConfigurer(rec, nodeRef, nil, "", "")
	pod := newPod(v1.DNSNone)
	pod.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"}}
	for i := 0; i < 40; i++ {
		pod.Spec.DNSConfig.Searches = append(pod.Spec.DNSConfig.Searches, fmt.Sprintf("d%d.example", i))
	}
	got, err := c.GetPodDNS(pod)
	require.NoError(t, err)
	assert.Equal(t, []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"}, got.Servers)
	require.Len(t, got.Searches, MaxDNSSearchPaths)
	assert.Equal(t, "d31.example", got.Searches[31])
	events := drain(rec)
	require.Len(t, events, 2)
	assert.Equal(t, "Warning DNSConfigForming Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 192.0.2.1 192.0.2.2 192.0.2.3", events[0])
	assert.True(t, strings.HasPrefix(events[1], "Warning DNSConfigForming Search Line limits were exceeded, some search paths have been omitted, the applied search line is: d0.example d1.example"), events[1])

	// 2048 characters in all; a domain over 253 is dropped.
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 60) // 252
	pod.Spec.DNSConfig = &v1.PodDNSConfig{Searches: []string{long + "x.y", "short.example"}}
	for i := 0; i < 9; i++ {
		pod.Spec.DNSConfig.Searches = append(pod.Spec.DNSConfig.Searches, fmt.Sprintf("%s%d", long[:250], i))
	}
	got, err = c.GetPodDNS(pod)
	require.NoError(t, err)
	assert.NotContains(t, got.Searches, long+"x.y")
	assert.LessOrEqual(t, len(strings.Join(got.Searches, " ")), MaxDNSSearchListChars)
	assert.Equal(t, "short.example", got.Searches[0])
	assert.Len(t, got.Searches, 1+8, "252 characters each with its space: 8 fit after short.example")
	assert.Len(t, drain(rec), 1)
}

func TestCheckLimitsForResolvConf(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	var b strings.Builder
	b.WriteString("search")
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&b, " d%d.example", i)
	}
	c := NewConfigurer(rec, nodeRef, nil, "cluster.local", writeResolvConf(t, b.String()+"\n"))
	c.CheckLimitsForResolvConf()
	assert.Equal(t, []string{"Warning CheckLimitsForResolvConf Resolv.conf file '" + c.ResolverConfig + "' contains search line consisting of more than 29 domains!"}, drain(rec))

	c = NewConfigurer(rec, nodeRef, nil, "cluster.local", writeResolvConf(t, hostResolvConf))
	c.CheckLimitsForResolvConf()
	assert.Empty(t, drain(rec))
}
