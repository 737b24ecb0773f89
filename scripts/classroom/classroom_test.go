package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"mykubelet/mylib/bootstrap"
	"mykubelet/mylib/bootstraptoken"
	"mykubelet/mylib/options"
	"mykubelet/mylib/statedir"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

func TestNumberedAndNames(t *testing.T) {
	assert.Equal(t, []string{"learner-01", "learner-02", "learner-03"}, Numbered(3))
	assert.Equal(t, "learner-100", Numbered(100)[99])
	assert.NoError(t, CheckName("alice"))
	assert.ErrorContains(t, CheckName("Alice_1"), `learner name "Alice_1" cannot name a node`)
}

func TestBadCommandsSayWhatIsWrong(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	assert.EqualError(t, run([]string{"--state-dir", t.TempDir()}), "no command")
	assert.EqualError(t, run([]string{"--state-dir", t.TempDir(), "status"}), `no admin kubeconfig: set KUBECONFIG (or --kubeconfig) to a cluster admin's, e.g. eval "$(scripts/cluster.sh env)"`)
}

// TestTwoLearners runs the classroom against a real control plane (Node
// authorizer, NodeRestriction): two learners issued; alice does what a
// learner handed only her bootstrap kubeconfig does, the real chapters 03
// and 04 under a node name of her choosing, bob bootstraps through the
// library under his own name. Each bootstrap kubeconfig does what the TLS
// bootstrap needs and nothing with the other's node; each node's
// credentials may annotate its own Node and touch nothing of the other's
// (Node, Lease, the Secret of a pod bound to it); status finds each
// learner's node (alice's through her token's CSR, then through the label
// it puts on the node) at the chapter it ran, and follows a later chapter;
// revoke deletes one token, which then no longer authenticates, while that
// learner's node keeps its credentials.
func TestTwoLearners(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx := context.Background()
	c := testcluster.Start(t)
	ch03 := testcluster.BuildChapter(t, "./chapters/03-tls-bootstrap")
	ch04 := testcluster.BuildChapter(t, "./chapters/04-register-node")
	admin := c.Clientset(t)
	var out bytes.Buffer
	room := &Classroom{Client: admin, Admin: c.Config(t), StateDir: t.TempDir(), Out: &out}

	require.NoError(t, room.Issue(ctx, []string{"alice", "bob"}))
	assert.Contains(t, out.String(), "learner alice: token ")
	assert.Contains(t, out.String(), "  the learner runs: go run ./chapters/03-tls-bootstrap --bootstrap-kubeconfig bootstrap-kubelet.kubeconfig --node-name bob\n")
	assert.Contains(t, out.String(), "(loopback: only learners on this machine can reach it)")
	roster, err := room.Roster()
	require.NoError(t, err)
	assert.Equal(t, []string{"alice", "bob"}, roster)

	// Before anyone bootstrapped: no node.
	out.Reset()
	require.NoError(t, room.Status(ctx))
	assert.Regexp(t, `(?m)^alice\s+until \S+\s+-\s+no node\s+-\s+-$`, out.String())

	bootstrapClients := map[string]kubernetes.Interface{}
	for _, name := range roster {
		path := room.KubeconfigPath(name)
		info, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), path)
		tok, err := bootstraptoken.TokenFromKubeconfig(path)
		require.NoError(t, err)
		secret, err := admin.CoreV1().Secrets("kube-system").Get(ctx, tok.SecretName(), metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, name, secret.Labels[LearnerLabel])
		bcfg, err := clientcmd.BuildConfigFromFlags("", path)
		require.NoError(t, err)
		bootstrapClients[name] = kubernetes.NewForConfigOrDie(bcfg)
	}

	// alice: chapter 03 with her bootstrap kubeconfig, as Issue told her
	// but with a node name of her own, then chapter 04 as that node.
	aliceDir := t.TempDir()
	stdout, _ := chaptertest.RunOK(t, ch03, "--bootstrap-kubeconfig", room.KubeconfigPath("alice"), "--node-name", "alice-laptop", "--state-dir", aliceDir)
	assert.Contains(t, stdout, "system:node:alice-laptop")
	agent := chaptertest.Start(t, ch04, "--state-dir", aliceDir, "--node-ip", "127.0.0.1")
	agent.WaitForOutput(`lease kube-node-lease/alice-laptop: created`, 2*time.Minute)
	aliceCfg, err := clientcmd.BuildConfigFromFlags("", statedir.Path(aliceDir, statedir.NodeKubeconfig))
	require.NoError(t, err)
	nodes := map[string]kubernetes.Interface{"alice": kubernetes.NewForConfigOrDie(aliceCfg)}

	// bob: the TLS bootstrap through the library, then his Node and Lease.
	dir := t.TempDir()
	res, err := bootstrap.LoadClientCert(ctx, bootstrap.Config{BootstrapKubeconfig: room.KubeconfigPath("bob"), Kubeconfig: filepath.Join(dir, "kubelet.kubeconfig"),
		CertDir: filepath.Join(dir, "pki"), NodeName: "bob", Timeout: 2 * time.Minute})
	require.NoError(t, err, "bob bootstraps")
	assert.Equal(t, "system:node:bob", res.Certificate.Subject.CommonName)
	bobCfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubelet.kubeconfig"))
	require.NoError(t, err)
	nodes["bob"] = kubernetes.NewForConfigOrDie(bobCfg)
	_, err = nodes["bob"].CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bob"}}, metav1.CreateOptions{})
	require.NoError(t, err, "bob registers his node")
	_, err = nodes["bob"].CoordinationV1().Leases(v1.NamespaceNodeLease).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "bob"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("bob")}}, metav1.CreateOptions{})
	require.NoError(t, err, "bob creates his lease")

	// NodeRestriction and the Node authorizer keep them apart.
	annotate := func(as kubernetes.Interface, node, chapter string) error {
		patch := []byte(`{"metadata":{"annotations":{"` + ChapterAnnotation + `":"` + chapter + `"}}}`)
		_, err := as.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	require.NoError(t, annotate(nodes["bob"], "bob", "03-tls-bootstrap"), "a node annotates itself")
	err = annotate(nodes["alice"], "bob", "99")
	assert.True(t, apierrors.IsForbidden(err), "alice's node may not patch bob's: %v", err)
	_, err = nodes["alice"].CoordinationV1().Leases(v1.NamespaceNodeLease).Patch(ctx, "bob", types.MergePatchType, []byte(`{"spec":{"holderIdentity":"alice-laptop"}}`), metav1.PatchOptions{})
	assert.True(t, apierrors.IsForbidden(err), "alice's node may not renew bob's lease: %v", err)
	_, err = admin.CoreV1().Secrets("default").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bob-secret"}, StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bob-pod"}, Spec: v1.PodSpec{NodeName: "bob",
		Containers: []v1.Container{{Name: "c", Image: "busybox", EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "bob-secret"}}}}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { // the Node authorizer's graph learns of the pod from a watch
		_, err := nodes["bob"].CoreV1().Secrets("default").Get(ctx, "bob-secret", metav1.GetOptions{})
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "bob's node reads the secret of a pod bound to it")
	_, err = nodes["alice"].CoreV1().Secrets("default").Get(ctx, "bob-secret", metav1.GetOptions{})
	assert.True(t, apierrors.IsForbidden(err), "alice's node may not read the secret of bob's pod: %v", err)
	_, err = bootstrapClients["alice"].CoreV1().Nodes().Get(ctx, "bob", metav1.GetOptions{})
	assert.True(t, apierrors.IsForbidden(err), "alice's bootstrap token may not read bob's node: %v", err)

	// Status: alice's node found through the CSR her token sent, at the
	// chapter that runs as it; bob's through his.
	out.Reset()
	require.NoError(t, room.Status(ctx))
	assert.Regexp(t, `(?m)^LEARNER\s+TOKEN\s+NODE\s+READY\s+CHAPTER\s+PODS RUNNING$`, out.String())
	assert.Regexp(t, `(?m)^alice\s+until \S+\s+alice-laptop\s+True\s+04-register-node\s+0$`, out.String())
	assert.Regexp(t, `(?m)^bob\s+until \S+\s+bob\s+Unknown\s+03-tls-bootstrap\s+0$`, out.String())
	n, err := admin.CoreV1().Nodes().Get(ctx, "alice-laptop", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "alice", n.Labels[LearnerLabel], "status remembers whose node it is")

	// A later chapter acting as the same node (NodeClientset, as chapters
	// 06 to 08 do) overwrites the chapter, while chapter 04 keeps running.
	later := options.New("06-static-pods")
	later.UseNodeKubeconfig("go run ./chapters/03-tls-bootstrap")
	require.NoError(t, later.Parse([]string{"--state-dir", aliceDir}))
	require.NoError(t, later.Complete())
	_, err = later.NodeClientset(ctx, "go run ./chapters/04-register-node")
	require.NoError(t, err)
	// The CSRs go an hour after signing (the controller manager's
	// csrcleaner); the label stays.
	aliceToken, err := bootstraptoken.TokenFromKubeconfig(room.KubeconfigPath("alice"))
	require.NoError(t, err)
	csrs, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, csr := range csrs.Items {
		if csr.Spec.Username == aliceToken.Username() {
			require.NoError(t, admin.CertificatesV1().CertificateSigningRequests().Delete(ctx, csr.Name, metav1.DeleteOptions{}))
		}
	}
	out.Reset()
	require.NoError(t, room.Status(ctx))
	assert.Regexp(t, `(?m)^alice\s+until \S+\s+alice-laptop\s+True\s+06-static-pods\s+0$`, out.String())
	assert.Equal(t, 0, agent.Stop())

	out.Reset()
	require.NoError(t, room.Revoke(ctx, []string{"alice"}))
	assert.Contains(t, out.String(), "learner alice: token "+aliceToken.ID+" deleted, with the 0 certificate request(s) it sent\n", "the test deleted them above")
	assert.Contains(t, out.String(), "note: a node that already joined keeps its client certificate")
	_, err = admin.CoreV1().Secrets("kube-system").Get(ctx, aliceToken.SecretName(), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the token's secret is gone: %v", err)
	require.Eventually(t, func() bool {
		_, err := bootstrapClients["alice"].CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		return apierrors.IsUnauthorized(err)
	}, 30*time.Second, 100*time.Millisecond, "the revoked token no longer authenticates")
	_, err = nodes["alice"].CoreV1().Nodes().Get(ctx, "alice-laptop", metav1.GetOptions{})
	assert.NoError(t, err, "the node that joined keeps its certificate")

	out.Reset()
	require.NoError(t, room.Status(ctx))
	assert.NotContains(t, out.String(), "alice")
	assert.Regexp(t, `(?m)^bob\s+until `, out.String())
	assert.EqualError(t, room.Revoke(ctx, []string{"carol"}), "no learner carol in "+filepath.Join(room.StateDir, "classroom"))

	// bob's CSR, sent after alice's were deleted, goes with his token.
	out.Reset()
	require.NoError(t, room.Revoke(ctx, nil))
	assert.Regexp(t, `learner bob: token \S+ deleted, with the 1 certificate request\(s\) it sent\n`, out.String())
	csrs, err = admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, csrs.Items)
}

func TestIssueRefusesABadNameBeforeTouchingTheCluster(t *testing.T) {
	room := &Classroom{StateDir: t.TempDir()} // no client: nothing may be sent
	assert.ErrorContains(t, room.Issue(context.Background(), []string{"alice", "--ttl"}), `learner name "--ttl" cannot name a node`)
	roster, err := room.Roster()
	require.NoError(t, err)
	assert.Empty(t, roster)
}

func TestNodeOfCSRReadsTheNodeNameOfTheTokensKubeletCSR(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:alice-laptop", Organization: []string{"system:nodes"}}}, key)
	require.NoError(t, err)
	csr := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
		Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
		SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
		Username:   "system:bootstrap:abcdef",
	}}
	assert.Equal(t, "alice-laptop", NodeOfCSR(csr, "system:bootstrap:abcdef"))
	assert.Empty(t, NodeOfCSR(csr, "system:bootstrap:other1"), "another token's CSR")
	serving := csr.DeepCopy()
	serving.Spec.SignerName = certificatesv1.KubeletServingSignerName
	assert.Empty(t, NodeOfCSR(serving, "system:bootstrap:abcdef"), "not a kubelet client certificate")
	garbled := csr.DeepCopy()
	garbled.Spec.Request = []byte("not PEM")
	assert.Empty(t, NodeOfCSR(garbled, "system:bootstrap:abcdef"))
}
