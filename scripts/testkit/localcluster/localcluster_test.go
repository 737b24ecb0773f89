package localcluster

import (
	"crypto/x509"
	"encoding/pem"
	"net"
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
