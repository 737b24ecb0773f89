package bootstraptoken

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func TestWriteKubeconfigCarriesServerCAAndToken(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	require.NoError(t, os.WriteFile(caFile, []byte("-----BEGIN CERTIFICATE-----\nfake\n"), 0o600))
	admin := &rest.Config{
		Host:            "https://127.0.0.1:6443",
		TLSClientConfig: rest.TLSClientConfig{CAFile: caFile, CertData: []byte("admin cert"), KeyData: []byte("admin key")},
	}
	path := filepath.Join(dir, "state", "bootstrap-kubelet.kubeconfig")
	require.NoError(t, WriteKubeconfig(path, admin, testToken))

	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	require.NoError(t, err)
	assert.Equal(t, "https://127.0.0.1:6443", cfg.Host)
	assert.Equal(t, "-----BEGIN CERTIFICATE-----\nfake\n", string(cfg.CAData), "the CA is embedded")
	assert.Equal(t, "abcdef.0123456789abcdef", cfg.BearerToken)
	assert.Empty(t, cfg.CertData, "no admin credentials are copied")
	assert.Empty(t, cfg.KeyData)
	assert.False(t, cfg.Insecure)

	tok, err := TokenFromKubeconfig(path)
	require.NoError(t, err)
	assert.Equal(t, testToken, tok)
}

func TestKubeconfigRefusesAnInsecureAdminKubeconfig(t *testing.T) {
	_, err := Kubeconfig(&rest.Config{Host: "https://x", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, testToken)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "skips TLS verification")
}

func TestTokenFromKubeconfigWithoutAFile(t *testing.T) {
	_, err := TokenFromKubeconfig(filepath.Join(t.TempDir(), "missing"))
	assert.True(t, errors.Is(err, fs.ErrNotExist), "%v", err)
}
