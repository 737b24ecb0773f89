package localcluster

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func parseCert(t *testing.T, b []byte) *x509.Certificate {
	block, _ := pem.Decode(b)
	require.NotNil(t, block)
	require.Equal(t, "CERTIFICATE", block.Type)
	c, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return c
}

func TestIssuedCertificates(t *testing.T) {
	ca, err := NewCA("test-ca")
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)

	crt, key, err := ca.Issue(CertSpec{CommonName: "system:node:n1", Organizations: []string{"system:nodes"}})
	require.NoError(t, err)
	block, _ := pem.Decode(key)
	require.Equal(t, "EC PRIVATE KEY", block.Type, "an ECDSA key is labelled as one")
	_, err = x509.ParseECPrivateKey(block.Bytes)
	require.NoError(t, err)
	client := parseCert(t, crt)
	require.Equal(t, []string{"system:nodes"}, client.Subject.Organization)
	_, err = client.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)

	crt, _, err = ca.Issue(CertSpec{CommonName: "kube-apiserver", IPs: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}})
	require.NoError(t, err)
	serving := parseCert(t, crt)
	_, err = serving.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost"})
	require.NoError(t, err)
	_, err = serving.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.Error(t, err, "a serving certificate is not a client certificate")
}

func TestPKIIsMadeOnceAndKeptPrivate(t *testing.T) {
	dir := t.TempDir()
	c := &Cluster{cfg: Config{Dir: dir}, Host: "https://127.0.0.1:1"}
	require.NoError(t, c.writePKI())
	first, err := os.ReadFile(filepath.Join(dir, "pki", "ca.crt"))
	require.NoError(t, err)

	c2 := &Cluster{cfg: Config{Dir: dir}, Host: "https://127.0.0.1:2"}
	require.NoError(t, c2.writePKI())
	again, err := os.ReadFile(filepath.Join(dir, "pki", "ca.crt"))
	require.NoError(t, err)
	require.Equal(t, first, again, "a second start keeps the CA, so old kubeconfigs stay valid")

	entries, err := os.ReadDir(filepath.Join(dir, "pki"))
	require.NoError(t, err)
	for _, e := range entries {
		info, err := e.Info()
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), e.Name())
	}
	kc, err := os.ReadFile(filepath.Join(dir, "admin.kubeconfig"))
	require.NoError(t, err)
	require.Contains(t, string(kc), "https://127.0.0.1:2", "the kubeconfig follows the API server's port")
}

func TestResolvePorts(t *testing.T) {
	p, err := resolvePorts(Ports{MetricsServer: 1}, false)
	require.NoError(t, err)
	require.Zero(t, p.MetricsServer, "no port for metrics-server unless it runs")
	p, err = resolvePorts(Ports{}, true)
	require.NoError(t, err)
	seen := map[int]bool{}
	for _, port := range []int{p.EtcdClient, p.EtcdPeer, p.APIServer, p.ControllerManager, p.Scheduler, p.MetricsServer} {
		require.NotZero(t, port)
		require.False(t, seen[port], "port %d chosen twice", port)
		seen[port] = true
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	_, err = resolvePorts(Ports{APIServer: taken}, false)
	require.ErrorContains(t, err, "for kube-apiserver is taken")
	_, err = resolvePorts(Ports{MetricsServer: taken}, true)
	require.ErrorContains(t, err, "for metrics-server is taken")
	_, err = resolvePorts(Ports{MetricsServer: taken}, false)
	require.NoError(t, err, "metrics-server's port is not checked when it does not run")
}

func TestAliveSeesThroughZombies(t *testing.T) {
	require.True(t, Alive(os.Getpid()))
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	require.True(t, Alive(pid))
	require.NoError(t, cmd.Process.Kill())
	// Not reaped yet: a zombie, which must count as gone.
	deadline := time.Now().Add(5 * time.Second)
	for Alive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.False(t, Alive(pid))
	_ = cmd.Wait()
	require.False(t, Alive(pid))
}

func TestStatusWithoutPidFiles(t *testing.T) {
	for _, s := range Status(t.TempDir()) {
		require.False(t, s.Running, s.Name)
		require.Zero(t, s.Pid)
	}
}

func TestAggregationAndMetricsServerPKI(t *testing.T) {
	dir := t.TempDir()
	c := &Cluster{cfg: Config{Dir: dir}, Host: "https://127.0.0.1:1"}
	require.NoError(t, c.writePKI())
	read := func(name string) *x509.Certificate {
		b, err := os.ReadFile(filepath.Join(dir, "pki", name))
		require.NoError(t, err)
		return parseCert(t, b)
	}
	clusterCA, frontProxyCA := x509.NewCertPool(), x509.NewCertPool()
	clusterCA.AddCert(read("ca.crt"))
	frontProxyCA.AddCert(read("front-proxy-ca.crt"))
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}

	proxy := read("front-proxy-client.crt")
	require.Equal(t, FrontProxyClientName, proxy.Subject.CommonName)
	_, err := proxy.Verify(x509.VerifyOptions{Roots: frontProxyCA, KeyUsages: client})
	require.NoError(t, err)
	_, err = proxy.Verify(x509.VerifyOptions{Roots: clusterCA, KeyUsages: client})
	require.Error(t, err, "the front proxy has a CA of its own: no cluster certificate can pass users in headers")

	serving := read("metrics-server-serving.crt")
	for _, name := range []string{"metrics-server.kube-system.svc", "127.0.0.1"} {
		_, err = serving.Verify(x509.VerifyOptions{Roots: clusterCA, DNSName: name})
		require.NoError(t, err, "the aggregator checks %s", name)
	}

	id := read("metrics-server.crt")
	require.Equal(t, "system:serviceaccount:kube-system:metrics-server", id.Subject.CommonName)
	require.Equal(t, []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}, id.Subject.Organization)
	_, err = id.Verify(x509.VerifyOptions{Roots: clusterCA, KeyUsages: client})
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, "metrics-server.kubeconfig"))
	require.NoError(t, err)

	for _, flag := range []string{"--requestheader-client-ca-file=" + c.pki("front-proxy-ca.crt"),
		"--requestheader-allowed-names=front-proxy-client", "--proxy-client-cert-file=" + c.pki("front-proxy-client.crt")} {
		require.Contains(t, c.args("kube-apiserver"), flag)
	}
}

func TestMetricsServerFlags(t *testing.T) {
	c := &Cluster{cfg: Config{Dir: "/d", MetricsServer: true}, Ports: Ports{MetricsServer: 4443}}
	a := c.args(MetricsServerName)
	require.Contains(t, a, "--secure-port=4443")
	require.Contains(t, a, "--bind-address=127.0.0.1")
	require.Contains(t, a, "--metric-resolution=15s", "the manifest's by default")
	require.Contains(t, a, "--kubelet-use-node-status-port")
	require.Contains(t, a, "--kubelet-preferred-address-types=InternalIP")
	require.Contains(t, a, "--kubeconfig=/d/metrics-server.kubeconfig", "its own identity, not the admin's")
	for _, f := range a {
		require.NotContains(t, f, "--kubelet-request-timeout", "the default timeout fits 15s")
		require.NotContains(t, f, "insecure")
	}

	c.cfg.MetricResolution = MinMetricResolution
	a = c.args(MetricsServerName)
	require.Contains(t, a, "--metric-resolution=10s")
	require.Contains(t, a, "--kubelet-request-timeout=9s", "metrics-server refuses a timeout above 90% of the resolution")
	require.Equal(t, "https://127.0.0.1:4443", c.MetricsServerHost())
	require.Empty(t, (&Cluster{}).MetricsServerHost(), "no metrics-server unless asked for")
}

// TestControllerManagerAllocatesNodeCIDRs: the node IPAM controller runs
// with a cluster CIDR that holds the 1,000-node fleet at /24 a node and
// overlaps neither the services nor the mock runtime's default pod range;
// a test's own range replaces it.
func TestControllerManagerAllocatesNodeCIDRs(t *testing.T) {
	c := &Cluster{cfg: Config{Dir: "/d"}}
	a := c.args("kube-controller-manager")
	require.Contains(t, a, "--allocate-node-cidrs=true")
	require.Contains(t, a, "--cluster-cidr=10.128.0.0/12")
	require.Contains(t, a, "--node-cidr-mask-size=24")
	require.Contains(t, a, "--controllers=*,bootstrapsigner,tokencleaner", "nodeipam is among the defaults (*)")

	cluster := netip.MustParsePrefix(ClusterCIDR)
	require.GreaterOrEqual(t, 1<<(NodeCIDRMaskSize-cluster.Bits()), 1000, "a podCIDR for each node of the fleet")
	for _, other := range []string{ServiceClusterIPRange, "10.88.0.0/16" /* fakeruntime.DefaultPodCIDR */} {
		require.False(t, cluster.Overlaps(netip.MustParsePrefix(other)), other)
	}

	c.cfg.ClusterCIDR = "10.200.0.0/16"
	require.Contains(t, c.args("kube-controller-manager"), "--cluster-cidr=10.200.0.0/16")
}
