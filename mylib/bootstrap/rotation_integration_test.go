package bootstrap_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"mykubelet/mylib/bootstrap"
	"mykubelet/mylib/bootstraptoken"
	"mykubelet/scripts/testkit/testcluster"
)

// TestClientCertificateRotatesWithoutARestart starts from a bootstrap
// token alone, on a cluster whose controller manager signs for 3 minutes
// (--cluster-signing-duration; the signer backdates NotBefore by 5 minutes,
// so each certificate lives 8): the certificate manager gets the first
// certificate with the token, asks for the next one with the node's own
// certificate at 70–90 % of the first one's life (0.6 to 2.2 minutes after
// it came), and requests made all along through one clientset go on
// succeeding, the API server seeing the new certificate (its credential
// ID) after the switch. It takes 1 to 3 minutes.
func TestClientCertificateRotatesWithoutARestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and waits for a rotation (1 to 3 minutes)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const signing = 3 * time.Minute
	c := testcluster.Start(t, testcluster.WithClusterSigningDuration(signing))
	admin := c.Clientset(t)
	dir := t.TempDir()
	bootstrapKubeconfig := filepath.Join(dir, "bootstrap-kubelet.kubeconfig")
	_, err := bootstraptoken.Setup(ctx, admin, c.Config(t), bootstraptoken.SetupOptions{AutoApprove: true, Kubeconfig: bootstrapKubeconfig})
	require.NoError(t, err)
	bootstrapConfig, err := clientcmd.BuildConfigFromFlags("", bootstrapKubeconfig)
	require.NoError(t, err)

	certDir := filepath.Join(dir, "pki")
	current := filepath.Join(certDir, bootstrap.ClientCertPrefix+"-current.pem")
	nodeConfig := &rest.Config{Host: c.Host, TLSClientConfig: rest.TLSClientConfig{CAData: c.CA().CertPEM, CertFile: current, KeyFile: current}}
	lifetime := 10 * time.Minute
	m, err := bootstrap.NewClientCertificateManager(bootstrap.RotationConfig{NodeConfig: nodeConfig, BootstrapConfig: bootstrapConfig,
		CertDir: certDir, NodeName: "n1", RequestedCertificateLifetime: &lifetime})
	require.NoError(t, err)
	transportConfig := rest.AnonymousClientConfig(nodeConfig)
	_, err = bootstrap.UpdateTransport(ctx, transportConfig, m, 0, nil)
	require.NoError(t, err)
	m.Start()
	defer m.Stop()

	require.Eventually(t, func() bool { return m.Current() != nil }, 2*time.Minute, 100*time.Millisecond, "the first certificate, asked for with the bootstrap token")
	first := m.Current().Leaf
	assert.Equal(t, "system:node:n1", first.Subject.CommonName)
	assert.Equal(t, signing+5*time.Minute, first.NotAfter.Sub(first.NotBefore), "10 minutes asked for, 3 signed for, NotBefore backdated by 5")

	// Requests all along, through one clientset whose transport follows
	// the manager.
	client := kubernetes.NewForConfigOrDie(transportConfig)
	var mu sync.Mutex
	var seen []string
	var failures []error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			r, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			mu.Lock()
			if err != nil {
				failures = append(failures, err)
			} else if ids := r.Status.UserInfo.Extra["authentication.kubernetes.io/credential-id"]; len(ids) == 1 {
				if len(seen) == 0 || seen[len(seen)-1] != ids[0] {
					seen = append(seen, ids[0])
				}
			}
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()

	require.Eventually(t, func() bool { return m.Current().Leaf.SerialNumber.Cmp(first.SerialNumber) != 0 },
		time.Until(first.NotAfter)+2*time.Minute, time.Second, "a new certificate before the first expires")
	second := m.Current().Leaf

	csrs, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var renewal time.Time
	for _, csr := range csrs.Items {
		if csr.Spec.Username == "system:node:n1" {
			renewal = csr.CreationTimestamp.Time
		}
		if assert.NotNil(t, csr.Spec.ExpirationSeconds, "CSR %s", csr.Name) {
			assert.EqualValues(t, 600, *csr.Spec.ExpirationSeconds, "CSR %s asks for the requested lifetime", csr.Name)
		}
	}
	require.Len(t, csrs.Items, 2, "the first CSR (bootstrap token) and the renewal")
	require.False(t, renewal.IsZero(), "the renewal CSR was made with the node's own certificate")
	life := first.NotAfter.Sub(first.NotBefore)
	at := renewal.Sub(first.NotBefore)
	t.Logf("rotation asked for at %.1f %% of the first certificate's life", 100*float64(at)/float64(life))
	assert.GreaterOrEqual(t, at+time.Second, life*7/10, "not before 70 %% (1 s for the time stamps' rounding)")
	assert.Less(t, at, life, "before the first certificate expired")

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) > 0 && seen[len(seen)-1] == bootstrap.CredentialID(second)
	}, 2*time.Minute, time.Second, "the API server sees the new certificate")
	mu.Lock()
	assert.Equal(t, []string{bootstrap.CredentialID(first), bootstrap.CredentialID(second)}, seen, "the old certificate, then the new one, switched once")
	assert.Empty(t, failures, "every request succeeded")
	mu.Unlock()

	target, err := filepath.EvalSymlinks(current)
	require.NoError(t, err)
	info, err := os.Stat(target)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "%s", target)
	pems, err := filepath.Glob(filepath.Join(certDir, bootstrap.ClientCertPrefix+"-2*.pem"))
	require.NoError(t, err)
	assert.Len(t, pems, 2, "both certificates kept, the current one linked")
}
