package bootstrap

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clocktesting "k8s.io/utils/clock/testing"
)

// selfSigned returns a certificate for key, valid from notBefore for validity.
func selfSigned(t *testing.T, key *ecdsa.PrivateKey, cn string, notBefore time.Time, validity time.Duration) []byte {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}},
		NotBefore:    notBefore,
		NotAfter:     notBefore.Add(validity),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: CertificateBlockType, Bytes: der})
}

// nodeKubeconfig writes a pem (cert+key) and a node kubeconfig pointing at it.
func nodeKubeconfig(t *testing.T, certPEM, keyPEM []byte) string {
	t.Helper()
	dir := t.TempDir()
	pemFile := filepath.Join(dir, "kubelet-client-current.pem")
	require.NoError(t, os.WriteFile(pemFile, append(append([]byte{}, certPEM...), keyPEM...), 0o600))
	path := filepath.Join(dir, "kubelet.kubeconfig")
	require.NoError(t, writeKubeconfigFromBootstrapping(&rest.Config{Host: "https://127.0.0.1:1", TLSClientConfig: rest.TLSClientConfig{CAData: certPEM}}, path, pemFile))
	return path
}

func TestClientConfigIsValidOnlyWhileTheCertificateIs(t *testing.T) {
	key, keyPEM, err := GenerateKey()
	require.NoError(t, err)
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	path := nodeKubeconfig(t, selfSigned(t, key, "system:node:n1", start, 24*time.Hour), keyPEM)
	clock := clocktesting.NewFakePassiveClock(start.Add(-time.Minute))

	_, why := isClientConfigStillValid(path, "system:node:n1", clock.Now())
	require.Error(t, why)
	assert.Contains(t, why.Error(), "not valid before")

	clock.SetTime(start.Add(time.Hour))
	cert, why := isClientConfigStillValid(path, "system:node:n1", clock.Now())
	require.NoError(t, why)
	assert.Equal(t, "system:node:n1", cert.Subject.CommonName)

	clock.SetTime(start.Add(25 * time.Hour))
	_, why = isClientConfigStillValid(path, "system:node:n1", clock.Now())
	require.Error(t, why)
	assert.Contains(t, why.Error(), "expired at 2030-01-02T00:00:00Z")
}

func TestClientConfigOfAnotherNodeIsNotValid(t *testing.T) {
	key, keyPEM, _ := GenerateKey()
	path := nodeKubeconfig(t, selfSigned(t, key, "system:node:n1", time.Now().Add(-time.Hour), 24*time.Hour), keyPEM)
	_, why := isClientConfigStillValid(path, "system:node:n2", time.Now())
	require.Error(t, why)
	assert.Equal(t, "its certificate is for system:node:n1, not system:node:n2", why.Error())
}

func TestClientConfigWithAForeignKeyIsNotValid(t *testing.T) {
	key, _, _ := GenerateKey()
	_, otherPEM, _ := GenerateKey()
	start := time.Now().Add(-time.Hour)
	path := nodeKubeconfig(t, selfSigned(t, key, "system:node:n1", start, 24*time.Hour), otherPEM)
	_, why := isClientConfigStillValid(path, "system:node:n1", time.Now())
	require.Error(t, why)
	assert.Contains(t, why.Error(), "client certificate and key")
}

func TestMissingClientConfigIsNotExist(t *testing.T) {
	_, why := isClientConfigStillValid(filepath.Join(t.TempDir(), "none"), "system:node:n1", time.Now())
	assert.True(t, errors.Is(why, fs.ErrNotExist))
}

func TestNodeKubeconfigPointsAtTheCertFileWith0600(t *testing.T) {
	key, keyPEM, _ := GenerateKey()
	path := nodeKubeconfig(t, selfSigned(t, key, "system:node:n1", time.Now().Add(-time.Minute), time.Hour), keyPEM)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	require.NoError(t, err)
	want := filepath.Join(filepath.Dir(path), "kubelet-client-current.pem")
	assert.Equal(t, want, cfg.CertFile)
	assert.Equal(t, want, cfg.KeyFile)
	assert.Equal(t, "https://127.0.0.1:1", cfg.Host)
	assert.NotEmpty(t, cfg.CAData)
}

func TestCheckIssuedRefusesACertificateForAnotherKeyOrNode(t *testing.T) {
	key, _, _ := GenerateKey()
	other, _, _ := GenerateKey()
	now := time.Now()
	require.NoError(t, checkIssued(selfSigned(t, key, "system:node:n1", now, time.Hour), key, "system:node:n1"))
	assert.ErrorContains(t, checkIssued(selfSigned(t, other, "system:node:n1", now, time.Hour), key, "system:node:n1"), "another key")
	assert.ErrorContains(t, checkIssued(selfSigned(t, key, "system:node:n2", now, time.Hour), key, "system:node:n1"), `"system:node:n2"`)
}

func TestLoadClientCertRefusesAnInsecureBootstrapKubeconfig(t *testing.T) {
	dir := t.TempDir()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "abcdef.0123456789abcdef"}
	kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "x"
	path := filepath.Join(dir, "bootstrap.kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	_, err := LoadClientCert(context.Background(), Config{
		BootstrapKubeconfig: path, Kubeconfig: filepath.Join(dir, "kubelet.kubeconfig"), CertDir: filepath.Join(dir, "pki"), NodeName: "n1",
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "skips TLS verification")
	_, statErr := os.Stat(filepath.Join(dir, "pki"))
	assert.True(t, errors.Is(statErr, fs.ErrNotExist), "nothing was generated")
}
