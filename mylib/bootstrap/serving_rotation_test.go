package bootstrap

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestNewServingCertificateManagerNeedsItsFields(t *testing.T) {
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	_, err := NewServingCertificateManager(ServingRotationConfig{CertDir: t.TempDir(), NodeName: "n1", IPs: ips})
	assert.ErrorContains(t, err, "needs Client, CertDir and NodeName")
	_, err = NewServingCertificateManager(ServingRotationConfig{Client: fake.NewClientset(), CertDir: t.TempDir(), NodeName: "n1"})
	assert.ErrorContains(t, err, "at least one IP or DNS name")
}

// TestServingTemplateHasTheNodeSubjectAndSANs: what the manager's CSRs ask
// for is what RequestServingCert asks for.
func TestServingTemplateHasTheNodeSubjectAndSANs(t *testing.T) {
	tmpl := ServingTemplate("n1", []net.IP{net.ParseIP("127.0.0.1")}, []string{"n1"})
	assert.Equal(t, "system:node:n1", tmpl.Subject.CommonName)
	assert.Equal(t, []string{"system:nodes"}, tmpl.Subject.Organization)
	assert.Equal(t, []string{"n1"}, tmpl.DNSNames)
	require.Len(t, tmpl.IPAddresses, 1)
	assert.Equal(t, "127.0.0.1", tmpl.IPAddresses[0].String())
}

// TestServingManagerStartsFromTheStoredCertificate: a certificate in
// kubelet-server-current.pem (as RequestServingCert writes it) is the
// manager's current one at once, no CSR sent, and the TLS config serves it.
func TestServingManagerStartsFromTheStoredCertificate(t *testing.T) {
	dir := t.TempDir()
	key, keyPEM, err := GenerateKey()
	require.NoError(t, err)
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	certPEM := selfSignedServing(t, key, "system:node:n1", ips, []string{"n1"}, time.Now().Add(-time.Minute), time.Hour)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kubelet-server-2026-01-01-00-00-00.pem"), append(certPEM, keyPEM...), 0o600))
	require.NoError(t, os.Symlink("kubelet-server-2026-01-01-00-00-00.pem", filepath.Join(dir, "kubelet-server-current.pem")))

	client := fake.NewClientset()
	m, err := NewServingCertificateManager(ServingRotationConfig{Client: client, CertDir: dir, NodeName: "n1", IPs: ips, DNSNames: []string{"n1"}})
	require.NoError(t, err)
	cur := m.Current()
	require.NotNil(t, cur, "the stored certificate")
	assert.Equal(t, "system:node:n1", cur.Leaf.Subject.CommonName)
	assert.Empty(t, client.Actions(), "no CSR for a certificate the store has")

	got, err := ServingTLSConfig(m).GetCertificate(&tls.ClientHelloInfo{})
	require.NoError(t, err)
	assert.Same(t, cur, got)
	assert.Equal(t, uint16(tls.VersionTLS12), ServingTLSConfig(m).MinVersion)
	assert.Equal(t, tls.RequestClientCert, ServingTLSConfig(m).ClientAuth, "the authenticator checks client certificates, not the handshake")
}

// TestServingTLSFailsTheHandshakeWithoutACertificate: before the first
// CSR is approved, a client's handshake fails with a clear error.
func TestServingTLSFailsTheHandshakeWithoutACertificate(t *testing.T) {
	m, err := NewServingCertificateManager(ServingRotationConfig{Client: fake.NewClientset(), CertDir: t.TempDir(), NodeName: "n1", DNSNames: []string{"n1"}})
	require.NoError(t, err)
	require.Nil(t, m.Current())
	_, err = ServingTLSConfig(m).GetCertificate(&tls.ClientHelloInfo{})
	assert.ErrorIs(t, err, ErrNoServingCertificate)

	lis, err := tls.Listen("tcp", "127.0.0.1:0", ServingTLSConfig(m))
	require.NoError(t, err)
	defer lis.Close()
	go func() {
		c, err := lis.Accept()
		if err == nil {
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	_, err = tls.Dial("tcp", lis.Addr().String(), &tls.Config{RootCAs: x509.NewCertPool()})
	assert.Error(t, err, "no certificate, no handshake")
}

// syncBuffer is a strings.Builder safe for a goroutine's writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestReportCertificatesSaysIssuedThenRotated: nothing while the
// certificate stays; "issued" for the first, "rotated" for the next, at
// the next check (10 s on the clock).
func TestReportCertificatesSaysIssuedThenRotated(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	m := &fakeManager{}
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	ReportCertificates(ctx, &wg, m, "serving", &out, 0, fc)
	require.Eventually(t, fc.HasWaiters, 10*time.Second, time.Millisecond)

	step := func() {
		t.Helper()
		n := len(out.String())
		fc.Step(TransportCheckPeriod)
		// The check runs in the goroutine; give it a moment to print, if it prints.
		require.Eventually(t, func() bool { return len(out.String()) > n }, 10*time.Second, time.Millisecond)
	}
	fc.Step(TransportCheckPeriod) // no certificate yet: nothing to say
	first := selfSignedPair(t, "n1")
	m.set(first)
	step()
	assert.Regexp(t, `^serving certificate: issued, valid from \S+Z until \S+Z \(the next at 70-90% of that\)\n$`, out.String())
	m.set(selfSignedPair(t, "n1"))
	step()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2)
	assert.Regexp(t, `^serving certificate: rotated, valid from `, lines[1])
	cancel()
	wg.Wait()
}

// TestSelfSignedServingCertIsMadeOnceAndReused: kubelet.crt and
// kubelet.key, 0600, for the node's name and IP; the second call reuses them.
func TestSelfSignedServingCertIsMadeOnceAndReused(t *testing.T) {
	dir := t.TempDir()
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	c1, created, err := SelfSignedServingCert(dir, "n1", ips, []string{"n1"})
	require.NoError(t, err)
	assert.True(t, created)
	leaf, err := x509.ParseCertificate(c1.Certificate[0])
	require.NoError(t, err)
	assert.Contains(t, leaf.DNSNames, "n1")
	require.NotEmpty(t, leaf.IPAddresses)
	assert.True(t, leaf.IPAddresses[0].Equal(ips[0]))
	for _, f := range []string{SelfSignedCertFile, SelfSignedKeyFile} {
		fi, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
	}
	c2, created, err := SelfSignedServingCert(dir, "n1", ips, []string{"n1"})
	require.NoError(t, err)
	assert.False(t, created, "reused")
	assert.Equal(t, c1.Certificate[0], c2.Certificate[0])
}
