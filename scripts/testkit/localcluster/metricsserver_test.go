package localcluster_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"mykubelet/scripts/testkit/localcluster"
	"mykubelet/scripts/testkit/testcluster"
)

// fakeKubelet serves /metrics/resource as a kubelet does, over TLS with a
// serving certificate of the cluster CA, and records who scraped it.
type fakeKubelet struct {
	port    int
	scrapes atomic.Int64
	mu      sync.Mutex
	users   map[string]bool
}

func startFakeKubelet(t *testing.T, c *testcluster.Cluster) *fakeKubelet {
	crt, key, err := c.CA().Issue(localcluster.CertSpec{CommonName: "ms-node", IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(crt, key)
	require.NoError(t, err)
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{pair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    c.CAPool(),
	})
	require.NoError(t, err)
	k := &fakeKubelet{port: l.Addr().(*net.TCPAddr).Port, users: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics/resource", func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		k.users[r.TLS.PeerCertificates[0].Subject.CommonName] = true
		k.mu.Unlock()
		n := k.scrapes.Add(1)
		now := time.Now().UnixMilli()
		// One CPU second per scrape, 100 MiB of memory.
		fmt.Fprintf(w, "# TYPE node_cpu_usage_seconds_total counter\nnode_cpu_usage_seconds_total %d %d\n", 100+n, now)
		fmt.Fprintf(w, "# TYPE node_memory_working_set_bytes gauge\nnode_memory_working_set_bytes %d %d\n", 100<<20, now)
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return k
}

func (k *fakeKubelet) scrapedBy(user string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.users[user]
}

// TestMetricsServer starts a control plane with metrics-server and checks
// the chain kubectl top uses: the aggregator finds the APIService
// Available, proxies /apis/metrics.k8s.io to metrics-server on loopback, and
// metrics-server scrapes a kubelet at the node's InternalIP and status port,
// with its own identity, verifying the kubelet's certificate.
func TestMetricsServer(t *testing.T) {
	c := testcluster.Start(t, localcluster.WithMetricsServer())
	ctx := context.Background()
	require.NotEmpty(t, c.MetricsServerHost())
	require.Equal(t, fmt.Sprintf("https://127.0.0.1:%d", c.Ports.MetricsServer), c.MetricsServerHost())

	kubectl := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(testcluster.BinDir(), "kubectl"), append([]string{"--kubeconfig", c.AdminKubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := kubectl("get", "apiservice", localcluster.MetricsAPIService,
		"-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
	require.NoError(t, err, out)
	require.Equal(t, "True", out)

	out, err = kubectl("get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes")
	require.NoError(t, err, out)
	var list struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &list), out)
	require.Equal(t, "NodeMetricsList", list.Kind)
	require.Empty(t, list.Items, "no node yet")

	// A node whose kubelet is the fake one: InternalIP 127.0.0.1, the
	// kubelet's port in the status.
	k := startFakeKubelet(t, c)
	cs := c.Clientset(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ms-node"}}
	_, err = cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	require.NoError(t, err)
	// The controller manager writes the new node too (its podCIDR): on a
	// conflict, read it again and retry.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := cs.CoreV1().Nodes().Get(ctx, "ms-node", metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
		node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(k.port)
		node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)

	// Two scrapes make a CPU rate; at one per MinMetricResolution that is
	// 20 s or so. The deadline is generous for a busy machine.
	var usage struct {
		Usage map[string]string `json:"usage"`
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		out, err = kubectl("get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes/ms-node")
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "no metrics for ms-node after %d scrapes: %s", k.scrapes.Load(), out)
		time.Sleep(2 * time.Second)
	}
	require.NoError(t, json.Unmarshal([]byte(out), &usage), out)
	require.Equal(t, "100Mi", usage.Usage["memory"], out)
	require.NotEmpty(t, usage.Usage["cpu"], out)
	require.True(t, k.scrapedBy("system:serviceaccount:kube-system:metrics-server"),
		"metrics-server scrapes kubelets as its ServiceAccount's user")

	// kubectl top reads the same API.
	out, err = kubectl("top", "node", "ms-node", "--no-headers")
	require.NoError(t, err, out)
	require.True(t, strings.HasPrefix(out, "ms-node "), out)
	require.Contains(t, out, "100Mi", out)

	// A user without RBAC on metrics.k8s.io is refused by metrics-server's
	// authorization (a SubjectAccessReview for the user the aggregator passed).
	nobody := c.UserConfig(t, "nobody")
	kc := testcluster.WriteKubeconfig(t, nobody)
	cmd := exec.Command(filepath.Join(testcluster.BinDir(), "kubectl"), "--kubeconfig", kc, "get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes")
	b, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(b), "Forbidden", string(b))
}
