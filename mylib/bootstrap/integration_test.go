package bootstrap_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"mykubelet/mylib/bootstrap"
	"mykubelet/mylib/bootstraptoken"
	"mykubelet/mylib/statedir"
	"mykubelet/scripts/testkit/testcluster"
)

// state is one node's state directory.
type state struct{ dir string }

func (s state) bootstrapKubeconfig() string {
	return statedir.Path(s.dir, statedir.BootstrapKubeconfig)
}
func (s state) nodeKubeconfig() string { return statedir.Path(s.dir, statedir.NodeKubeconfig) }
func (s state) certFile() string       { return statedir.Path(s.dir, statedir.ClientCertCurrent) }

func (s state) config(node string, timeout time.Duration, out *bytes.Buffer) bootstrap.Config {
	return bootstrap.Config{
		BootstrapKubeconfig: s.bootstrapKubeconfig(),
		Kubeconfig:          s.nodeKubeconfig(),
		CertDir:             filepath.Dir(s.certFile()),
		NodeName:            node,
		Timeout:             timeout,
		Out:                 out,
	}
}

func csrCount(t *testing.T, cs kubernetes.Interface) int {
	t.Helper()
	l, err := cs.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	return len(l.Items)
}

func approved(c *certificatesv1.CertificateSigningRequest) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == certificatesv1.CertificateApproved {
			return true
		}
	}
	return false
}

// approve does what `kubectl certificate approve` does.
func approve(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	ctx := context.Background()
	c, err := cs.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
		Reason: "KubectlApprove", Message: "This CSR was approved by kubectl certificate approve.",
	})
	_, err = cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, name, c, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// TestTLSBootstrapAgainstARealControlPlane shares one control plane between
// its subtests, which run in order.
func TestTLSBootstrapAgainstARealControlPlane(t *testing.T) {
	c := testcluster.Start(t)
	admin := c.Config(t)
	cs := c.Clientset(t)
	ctx := context.Background()
	auto := state{t.TempDir()}

	t.Run("the token authenticates as the bootstrap user", func(t *testing.T) {
		var out bytes.Buffer
		res, err := bootstraptoken.Setup(ctx, cs, admin, bootstraptoken.SetupOptions{AutoApprove: true, Kubeconfig: auto.bootstrapKubeconfig(), Out: &out})
		require.NoError(t, err, out.String())
		t.Log("\n" + out.String())

		cfg, err := clientcmd.BuildConfigFromFlags("", auto.bootstrapKubeconfig())
		require.NoError(t, err)
		who, err := bootstrap.WhoAmI(ctx, cfg)
		require.NoError(t, err)
		assert.Equal(t, "system:bootstrap:"+res.Token.ID, who.Username)
		assert.ElementsMatch(t, []string{"system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token", "system:authenticated"}, who.Groups)

		// Low privilege: it may not read Secrets.
		bcs := kubernetes.NewForConfigOrDie(cfg)
		_, err = bcs.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
		assert.True(t, apierrors.IsForbidden(err), "bootstrap token listing secrets: %v", err)

		// A wrong secret part is refused.
		bad := *cfg
		bad.BearerToken = res.Token.ID + ".0000000000000000"
		_, err = bootstrap.WhoAmI(ctx, &bad)
		assert.True(t, apierrors.IsUnauthorized(err), "wrong token secret: %v", err)
	})

	t.Run("running the setup again changes nothing but the expiration", func(t *testing.T) {
		var out bytes.Buffer
		res, err := bootstraptoken.Setup(ctx, cs, admin, bootstraptoken.SetupOptions{AutoApprove: true, Kubeconfig: auto.bootstrapKubeconfig(), Out: &out})
		require.NoError(t, err, out.String())
		assert.Equal(t, "reused", res.Source)
		for _, b := range bootstraptoken.Bindings(true) {
			assert.Contains(t, out.String(), "rbac: unchanged clusterrolebinding "+b.Name)
		}
		crb, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, bootstraptoken.NodeAutoApproveBootstrapBinding, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, bootstraptoken.NodeClientClusterRole, crb.RoleRef.Name)
	})

	t.Run("the CSR is approved automatically and signed by the controller manager", func(t *testing.T) {
		var out bytes.Buffer
		res, err := bootstrap.LoadClientCert(ctx, auto.config("auto-node", time.Minute, &out))
		require.NoError(t, err, out.String())
		t.Log("\n" + out.String())
		assert.False(t, res.Reused)
		assert.Equal(t, "AutoApproved", res.Approval)
		assert.True(t, strings.HasPrefix(res.CSRName, "node-csr-"))

		got, err := cs.CertificatesV1().CertificateSigningRequests().Get(ctx, res.CSRName, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, certificatesv1.KubeAPIServerClientKubeletSignerName, got.Spec.SignerName)
		assert.Equal(t, []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}, got.Spec.Usages)
		assert.True(t, strings.HasPrefix(got.Spec.Username, "system:bootstrap:"), got.Spec.Username)

		// Signed by the cluster CA, for client auth.
		_, err = res.Certificate.Verify(x509.VerifyOptions{Roots: c.CAPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		require.NoError(t, err)

		// kubelet-client-current.pem: certificate then "EC PRIVATE KEY", 0600.
		for _, p := range []string{auto.certFile(), auto.nodeKubeconfig()} {
			fi, err := os.Stat(p)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), p)
		}
		// kubelet-client-current.pem is a symlink to kubelet-client-<time>.pem.
		target, err := os.Readlink(auto.certFile())
		require.NoError(t, err)
		assert.Regexp(t, `/pki/kubelet-client-\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d\.pem$`, target)
		pemData, err := os.ReadFile(auto.certFile())
		require.NoError(t, err)
		var types []string
		for b, rest := pem.Decode(pemData); b != nil; b, rest = pem.Decode(rest) {
			types = append(types, b.Type)
		}
		assert.Equal(t, []string{"CERTIFICATE", "EC PRIVATE KEY"}, types)
		_, err = os.Stat(filepath.Join(filepath.Dir(auto.certFile()), bootstrap.TmpPrivateKeyFile))
		assert.True(t, errors.Is(err, os.ErrNotExist), "the temporary key is removed")

		cfg, err := clientcmd.BuildConfigFromFlags("", auto.nodeKubeconfig())
		require.NoError(t, err)
		who, err := bootstrap.WhoAmI(ctx, cfg)
		require.NoError(t, err)
		assert.Equal(t, "system:node:auto-node", who.Username)
		assert.ElementsMatch(t, []string{"system:nodes", "system:authenticated"}, who.Groups)
	})

	t.Run("running again reuses the certificate and creates no CSR", func(t *testing.T) {
		before := csrCount(t, cs)
		var out bytes.Buffer
		res, err := bootstrap.LoadClientCert(ctx, auto.config("auto-node", time.Minute, &out))
		require.NoError(t, err)
		assert.True(t, res.Reused)
		assert.Empty(t, res.CSRName)
		assert.Contains(t, out.String(), "reusing it, no new CSR")
		assert.Equal(t, before, csrCount(t, cs))
	})

	manual := state{t.TempDir()}
	t.Run("a manual-approval token's CSR stays pending and the timeout names it", func(t *testing.T) {
		var out bytes.Buffer
		_, err := bootstraptoken.Setup(ctx, cs, admin, bootstraptoken.SetupOptions{AutoApprove: false, Kubeconfig: manual.bootstrapKubeconfig(), Out: &out})
		require.NoError(t, err, out.String())
		assert.Contains(t, out.String(), "approved automatically: no")

		out.Reset()
		_, err = bootstrap.LoadClientCert(ctx, manual.config("manual-node", 5*time.Second, &out))
		var na *bootstrap.NotApprovedError
		require.ErrorAs(t, err, &na, "%v\n%s", err, out.String())
		assert.Contains(t, err.Error(), na.CSRName)
		assert.Contains(t, err.Error(), "kubectl certificate approve "+na.CSRName)
		got, err := cs.CertificatesV1().CertificateSigningRequests().Get(ctx, na.CSRName, metav1.GetOptions{})
		require.NoError(t, err)
		assert.False(t, approved(got), "nobody approved it")
		assert.Empty(t, got.Status.Certificate)

		// Approve by hand, run again: the same CSR (same kept key) is picked up.
		approve(t, cs, na.CSRName)
		before := csrCount(t, cs)
		out.Reset()
		res, err := bootstrap.LoadClientCert(ctx, manual.config("manual-node", time.Minute, &out))
		require.NoError(t, err, out.String())
		assert.Equal(t, na.CSRName, res.CSRName)
		assert.Equal(t, "KubectlApprove", res.Approval)
		assert.Contains(t, out.String(), "private key: reusing")
		assert.Contains(t, out.String(), "csr: found "+na.CSRName)
		assert.Equal(t, before, csrCount(t, cs), "no new CSR")
		assert.Equal(t, "system:node:manual-node", res.Certificate.Subject.CommonName)
	})

	t.Run("manual approval while the node waits", func(t *testing.T) {
		type result struct {
			res *bootstrap.Result
			err error
		}
		done := make(chan result, 1)
		var out bytes.Buffer
		go func() {
			r, err := bootstrap.LoadClientCert(ctx, manual.config("waiting-node", time.Minute, &out))
			done <- result{r, err}
		}()
		// Find the pending CSR for system:node:waiting-node and approve it.
		var name string
		require.Eventually(t, func() bool {
			l, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			for _, r := range l.Items {
				b, _ := pem.Decode(r.Spec.Request)
				req, err := x509.ParseCertificateRequest(b.Bytes)
				if err == nil && req.Subject.CommonName == "system:node:waiting-node" && !approved(&r) {
					name = r.Name
					return true
				}
			}
			return false
		}, 30*time.Second, 200*time.Millisecond)
		approve(t, cs, name)
		r := <-done
		require.NoError(t, r.err)
		// The state dir held manual-node's kubeconfig: not reused for another node.
		assert.Contains(t, out.String(), "is for system:node:manual-node, not system:node:waiting-node")
		assert.Equal(t, name, r.res.CSRName)
		assert.Equal(t, "KubectlApprove", r.res.Approval)
	})
}
