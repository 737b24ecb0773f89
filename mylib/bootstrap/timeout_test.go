package bootstrap

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"mykubelet/scripts/testkit/silent"
)

// TestTimeoutBoundsTheConnectionToASilentServer: the API server accepts
// the connection and never answers (not even the TLS handshake). The run
// fails within Config.Timeout, saying it could not send the CSR, instead of
// waiting for client-go's own handshake timeouts.
func TestTimeoutBoundsTheConnectionToASilentServer(t *testing.T) {
	srv := silent.Start(t)

	// A bootstrap kubeconfig for that server, with some CA (the handshake
	// never gets as far as checking it).
	key, _, err := GenerateKey()
	require.NoError(t, err)
	ca := selfSigned(t, key, "ca", time.Now().Add(-time.Hour), 24*time.Hour)
	dir := t.TempDir()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://" + srv.Addr, CertificateAuthorityData: ca}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "abcdef.0123456789abcdef"}
	kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "x"
	bootstrapPath := filepath.Join(dir, "bootstrap.kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, bootstrapPath))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = LoadClientCert(ctx, Config{
		BootstrapKubeconfig: bootstrapPath,
		Kubeconfig:          filepath.Join(dir, "kubelet.kubeconfig"),
		CertDir:             filepath.Join(dir, "pki"),
		NodeName:            "n1",
		Timeout:             500 * time.Millisecond,
		Out:                 &bytes.Buffer{},
	})
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "to https://"+srv.Addr+" within 500ms (is the API server up and answering?)")
	assert.NoError(t, ctx.Err(), "the run's own timeout ended it, not the test's")
	_, statErr := os.Stat(filepath.Join(dir, "pki", TmpPrivateKeyFile))
	assert.NoError(t, statErr, "the key is kept for the next run")
}
