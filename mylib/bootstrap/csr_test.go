package bootstrap

import (
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
)

func TestGenerateKeyIsECP256InAnECPrivateKeyBlock(t *testing.T) {
	key, keyPEM, err := GenerateKey()
	require.NoError(t, err)
	assert.Equal(t, elliptic.P256(), key.Curve)
	block, rest := pem.Decode(keyPEM)
	require.NotNil(t, block)
	assert.Empty(t, rest)
	assert.Equal(t, "EC PRIVATE KEY", block.Type)
	parsed, err := x509.ParseECPrivateKey(block.Bytes)
	require.NoError(t, err)
	assert.True(t, parsed.Equal(key))
}

func TestParseKeyRefusesAMislabelledKey(t *testing.T) {
	_, keyPEM, err := GenerateKey()
	require.NoError(t, err)
	wrong := strings.ReplaceAll(string(keyPEM), "EC PRIVATE KEY", "RSA PRIVATE KEY")
	_, err = ParseKey([]byte(wrong))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `PEM block type "RSA PRIVATE KEY", want "EC PRIVATE KEY"`)
}

func TestLoadOrGenerateKeyFileWritesOnceWith0600(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pki", TmpPrivateKeyFile)
	k1, pem1, generated, err := LoadOrGenerateKeyFile(path)
	require.NoError(t, err)
	assert.True(t, generated)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	k2, pem2, generated, err := LoadOrGenerateKeyFile(path)
	require.NoError(t, err)
	assert.False(t, generated, "the second call reads the key back")
	assert.True(t, k1.Equal(k2))
	assert.Equal(t, pem1, pem2)
}

func TestLoadOrGenerateKeyFileReplacesAGarbledKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), TmpPrivateKeyFile)
	require.NoError(t, os.WriteFile(path, []byte("garbage"), 0o600))
	_, _, generated, err := LoadOrGenerateKeyFile(path)
	require.NoError(t, err)
	assert.True(t, generated)
}

func TestMakeCSRHasTheNodeSubjectAndNoSANs(t *testing.T) {
	key, _, err := GenerateKey()
	require.NoError(t, err)
	csrPEM, err := MakeCSR(key, "node-1")
	require.NoError(t, err)
	block, _ := pem.Decode(csrPEM)
	require.NotNil(t, block)
	assert.Equal(t, "CERTIFICATE REQUEST", block.Type)
	req, err := x509.ParseCertificateRequest(block.Bytes)
	require.NoError(t, err)
	require.NoError(t, req.CheckSignature())
	assert.Equal(t, "system:node:node-1", req.Subject.CommonName)
	assert.Equal(t, []string{"system:nodes"}, req.Subject.Organization)
	assert.Empty(t, req.DNSNames)
	assert.Empty(t, req.IPAddresses)
	assert.True(t, key.PublicKey.Equal(req.PublicKey))
}

func TestNodeUsagesAreDigitalSignatureAndClientAuth(t *testing.T) {
	assert.Equal(t, []certificatesv1.KeyUsage{"digital signature", "client auth"}, NodeUsages)
	assert.Equal(t, "kubernetes.io/kube-apiserver-client-kubelet", certificatesv1.KubeAPIServerClientKubeletSignerName)
}

func TestCSRNameDependsOnKeySubjectAndUsages(t *testing.T) {
	k1, _, _ := GenerateKey()
	k2, _, _ := GenerateKey()
	n1, err := CSRName(k1.Public(), NodeSubject("a"), NodeUsages)
	require.NoError(t, err)
	again, _ := CSRName(k1.Public(), NodeSubject("a"), NodeUsages)
	otherKey, _ := CSRName(k2.Public(), NodeSubject("a"), NodeUsages)
	otherNode, _ := CSRName(k1.Public(), NodeSubject("b"), NodeUsages)
	otherUsages, _ := CSRName(k1.Public(), NodeSubject("a"), NodeUsages[:1])

	assert.Regexp(t, `^node-csr-[A-Za-z0-9_-]{43}$`, n1)
	assert.Equal(t, n1, again)
	assert.NotEqual(t, n1, otherKey)
	assert.NotEqual(t, n1, otherNode)
	assert.NotEqual(t, n1, otherUsages)
}
