package testcluster_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"mykubelet/scripts/testkit/localcluster"
	"mykubelet/scripts/testkit/testcluster"
)

// One control plane for this package; the subtests each prove one thing the
// tutorial relies on.
func TestControlPlane(t *testing.T) {
	c := testcluster.Start(t)
	admin := c.Clientset(t)
	ctx := context.Background()

	t.Run("ServesVersion1371", func(t *testing.T) {
		v, err := admin.Discovery().ServerVersion()
		require.NoError(t, err)
		require.Equal(t, testcluster.KubeVersion, v.GitVersion)
		out, err := exec.Command(filepath.Join(testcluster.BinDir(), "kubectl"), "--kubeconfig", c.AdminKubeconfig, "version").CombinedOutput()
		require.NoError(t, err, string(out))
		require.Contains(t, string(out), "Client Version: v1.37.1")
		require.Contains(t, string(out), "Server Version: v1.37.1")
	})

	t.Run("ReadyzIsOK", func(t *testing.T) {
		out, err := exec.Command(filepath.Join(testcluster.BinDir(), "kubectl"), "--kubeconfig", c.AdminKubeconfig, "get", "--raw", "/readyz").CombinedOutput()
		require.NoError(t, err, string(out))
		require.Equal(t, "ok", strings.TrimSpace(string(out)))
	})

	t.Run("BootstrapTokenAuthenticates", func(t *testing.T) {
		_, err := admin.CoreV1().Secrets("kube-system").Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-abcdef", Namespace: "kube-system"},
			Type:       corev1.SecretTypeBootstrapToken,
			StringData: map[string]string{
				"token-id": "abcdef", "token-secret": "0123456789abcdef",
				"usage-bootstrap-authentication": "true",
				"auth-extra-groups":              "system:bootstrappers:test",
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		cfg := c.AnonymousConfig()
		cfg.BearerToken = "abcdef.0123456789abcdef"
		review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Equal(t, "system:bootstrap:abcdef", review.Status.UserInfo.Username)
		require.Contains(t, review.Status.UserInfo.Groups, "system:bootstrappers")
		require.Contains(t, review.Status.UserInfo.Groups, "system:bootstrappers:test")

		// A wrong secret does not authenticate.
		cfg.BearerToken = "abcdef.0000000000000000"
		_, err = kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		require.True(t, apierrors.IsUnauthorized(err), "got %v", err)
	})

	t.Run("ControllerManagerSignsNodeCSR", func(t *testing.T) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
			Subject: pkix.Name{CommonName: "system:node:csr-node", Organization: []string{"system:nodes"}},
		}, key)
		require.NoError(t, err)
		csr, err := admin.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "node-csr-"},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
				SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
				Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		// The controller manager may touch the new CSR first (a 409): approve
		// the latest copy, as kubectl certificate approve does. Its csrapprover
		// may even approve it before we do, because the admin who created it
		// may create node client CSRs; then there is nothing left to add (a
		// second Approved condition is invalid).
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			latest, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range latest.Status.Conditions {
				if c.Type == certificatesv1.CertificateApproved {
					return nil
				}
			}
			latest.Status.Conditions = append(latest.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
				Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "TestApproved", Message: "approved by the harness test",
			})
			_, err = admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, latest, metav1.UpdateOptions{})
			return err
		})
		require.NoError(t, err)

		var issued []byte
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			issued = got.Status.Certificate
			return len(issued) > 0, nil
		}), "kube-controller-manager did not sign the approved CSR")
		block, _ := pem.Decode(issued)
		require.NotNil(t, block)
		cert, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		require.Equal(t, "system:node:csr-node", cert.Subject.CommonName)
		_, err = cert.Verify(x509.VerifyOptions{Roots: c.CAPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		require.NoError(t, err, "the issued certificate must chain to the cluster CA")
	})

	t.Run("NodeRestrictionStopsOneNodeChangingAnother", func(t *testing.T) {
		nodeA := kubernetes.NewForConfigOrDie(c.UserConfig(t, "system:node:node-a", "system:nodes"))
		nodeB := kubernetes.NewForConfigOrDie(c.UserConfig(t, "system:node:node-b", "system:nodes"))
		for name, cs := range map[string]*kubernetes.Clientset{"node-a": nodeA, "node-b": nodeB} {
			_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			require.NoError(t, err, "a node may create its own Node object")
		}
		patch := []byte(`{"metadata":{"labels":{"hacked":"true"}}}`)
		_, err := nodeB.CoreV1().Nodes().Patch(ctx, "node-a", types.MergePatchType, patch, metav1.PatchOptions{})
		require.True(t, apierrors.IsForbidden(err), "node-b changing node-a: got %v", err)
		_, err = nodeA.CoreV1().Nodes().Patch(ctx, "node-a", types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err, "node-a may change itself")
		// NodeRestriction (admission) refuses a node creating another Node.
		_, err = nodeA.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-c"}}, metav1.CreateOptions{})
		require.True(t, apierrors.IsForbidden(err), "node-a creating node-c: got %v", err)
	})

	// Last: it takes the API server away for a moment.
	t.Run("APIServerKilledAndRestartedKeepsItsData", func(t *testing.T) {
		_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "before-the-kill"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		c.KillAPIServer(t)
		_, err = admin.CoreV1().Namespaces().Get(ctx, "before-the-kill", metav1.GetOptions{})
		require.Error(t, err, "no API server, no answer")
		require.Error(t, c.Kill("kube-apiserver"), "it is not running any more")

		c.RestartAPIServer(t)
		ns, err := admin.CoreV1().Namespaces().Get(ctx, "before-the-kill", metav1.GetOptions{})
		require.NoError(t, err, "the same address answers again, from the same etcd")
		require.Equal(t, "before-the-kill", ns.Name)
		require.Error(t, c.Restart(ctx, "kube-apiserver"), "it runs already")
	})
}

func TestMissingBinariesSayHowToBuildThem(t *testing.T) {
	_, err := localcluster.Start(context.Background(), localcluster.Config{Dir: t.TempDir(), BinDir: t.TempDir()})
	require.ErrorContains(t, err, "scripts/build-control-plane.sh")
}
