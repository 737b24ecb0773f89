package bootstrap

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
)

// TestServingCSRAsksWhatUpstreamAsks: subject system:node:<name> in
// system:nodes, the node's IP and name as SANs, the usages of an ECDSA
// serving certificate.
func TestServingCSRAsksWhatUpstreamAsks(t *testing.T) {
	key, _, err := GenerateKey()
	require.NoError(t, err)
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	b, err := MakeServingCSR(key, "n1", ips, []string{"n1"})
	require.NoError(t, err)
	block, _ := pem.Decode(b)
	require.NotNil(t, block)
	assert.Equal(t, CertificateRequestBlockType, block.Type)
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	require.NoError(t, err)
	assert.Equal(t, "system:node:n1", csr.Subject.CommonName)
	assert.Equal(t, []string{"system:nodes"}, csr.Subject.Organization)
	assert.Equal(t, []string{"n1"}, csr.DNSNames)
	require.Len(t, csr.IPAddresses, 1)
	assert.True(t, csr.IPAddresses[0].Equal(ips[0]))
	assert.Equal(t, []certificatesv1.KeyUsage{"digital signature", "server auth"}, ServingUsages)

	// The name follows what is asked: same key and SANs, same name.
	n1, err := ServingCSRName(key.Public(), NodeSubject("n1"), ips, []string{"n1"})
	require.NoError(t, err)
	n2, err := ServingCSRName(key.Public(), NodeSubject("n1"), ips, []string{"n1"})
	require.NoError(t, err)
	n3, err := ServingCSRName(key.Public(), NodeSubject("n1"), []net.IP{net.ParseIP("10.0.0.1")}, []string{"n1"})
	require.NoError(t, err)
	assert.Equal(t, n1, n2)
	assert.NotEqual(t, n1, n3, "another address is another CSR")
	assert.Regexp(t, `^kubelet-serving-[A-Za-z0-9_-]{43}$`, n1)
	client, err := CSRName(key.Public(), NodeSubject("n1"), NodeUsages)
	require.NoError(t, err)
	assert.NotEqual(t, client[len("node-csr-"):], n1[len("kubelet-serving-"):], "never the client CSR's name")
}

// TestAStoredServingCertificateIsReusedOnlyWhileItFits: valid, for this
// node, for every SAN asked.
func TestAStoredServingCertificateIsReusedOnlyWhileItFits(t *testing.T) {
	key, keyPEM, err := GenerateKey()
	require.NoError(t, err)
	now := time.Now()
	certPEM := selfSignedServing(t, key, "system:node:n1", []net.IP{net.ParseIP("127.0.0.1")}, []string{"n1"}, now.Add(-time.Hour), 2*time.Hour)
	path := filepath.Join(t.TempDir(), "kubelet-server-current.pem")
	require.NoError(t, os.WriteFile(path, append(certPEM, keyPEM...), 0o600))
	ips := []net.IP{net.ParseIP("127.0.0.1")}

	_, err = servingCertStillValid(path, "system:node:n1", ips, []string{"n1"}, now)
	assert.NoError(t, err)
	_, err = servingCertStillValid(path, "system:node:n2", ips, []string{"n1"}, now)
	assert.ErrorContains(t, err, "it is for system:node:n1, not system:node:n2")
	_, err = servingCertStillValid(path, "system:node:n1", []net.IP{net.ParseIP("10.0.0.1")}, []string{"n1"}, now)
	assert.ErrorContains(t, err, "it does not name IP 10.0.0.1")
	_, err = servingCertStillValid(path, "system:node:n1", ips, []string{"other"}, now)
	assert.ErrorContains(t, err, "it does not name other")
	_, err = servingCertStillValid(path, "system:node:n1", ips, []string{"n1"}, now.Add(3*time.Hour))
	assert.ErrorContains(t, err, "expired at")
	_, err = servingCertStillValid(filepath.Join(t.TempDir(), "none.pem"), "system:node:n1", ips, nil, now)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// selfSignedServing is a serving certificate for key with these SANs.
func selfSignedServing(t *testing.T, key *ecdsa.PrivateKey, cn string, ips []net.IP, dnsNames []string, notBefore time.Time, validity time.Duration) []byte {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}},
		NotBefore:    notBefore,
		NotAfter:     notBefore.Add(validity),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  ips,
		DNSNames:     dnsNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: CertificateBlockType, Bytes: der})
}
