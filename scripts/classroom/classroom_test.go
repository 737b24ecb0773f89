package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"mykubelet/mylib/bootstrap"
	"mykubelet/mylib/bootstraptoken"
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
// authorizer, NodeRestriction): two learners issued; each bootstrap
// kubeconfig does what the TLS bootstrap needs (a CSR, approved and
// signed) and nothing with the other's node; each node's credentials may
// annotate its own Node and not the other's; status lists both with their
// chapter; revoke deletes one token, which then no longer authenticates,
// while that learner's node keeps its credentials.
func TestTwoLearners(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx := context.Background()
	c := testcluster.Start(t)
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

	nodes := map[string]kubernetes.Interface{}
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

		// What the TLS bootstrap does with it: a CSR, approved and signed.
		dir := filepath.Join(t.TempDir(), name)
		res, err := bootstrap.LoadClientCert(ctx, bootstrap.Config{BootstrapKubeconfig: path, Kubeconfig: filepath.Join(dir, "kubelet.kubeconfig"),
			CertDir: filepath.Join(dir, "pki"), NodeName: name, Timeout: 2 * time.Minute})
		require.NoError(t, err, "learner %s bootstraps", name)
		assert.Equal(t, "system:node:"+name, res.Certificate.Subject.CommonName)
		ncfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubelet.kubeconfig"))
		require.NoError(t, err)
		nodes[name] = kubernetes.NewForConfigOrDie(ncfg)
		_, err = nodes[name].CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err, "learner %s registers its node", name)
	}

	annotate := func(as kubernetes.Interface, node, chapter string) error {
		patch := []byte(`{"metadata":{"annotations":{"` + ChapterAnnotation + `":"` + chapter + `"}}}`)
		_, err := as.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	require.NoError(t, annotate(nodes["alice"], "alice", "03-tls-bootstrap"), "a node annotates itself")
	err = annotate(nodes["alice"], "bob", "99")
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "alice's node may not patch bob's: %v", err)
	_, err = bootstrapClients["alice"].CoreV1().Nodes().Get(ctx, "bob", metav1.GetOptions{})
	assert.True(t, apierrors.IsForbidden(err), "alice's bootstrap token may not read bob's node: %v", err)

	out.Reset()
	require.NoError(t, room.Status(ctx))
	assert.Regexp(t, `(?m)^LEARNER\s+TOKEN\s+NODE\s+READY\s+CHAPTER\s+PODS RUNNING$`, out.String())
	assert.Regexp(t, `(?m)^alice\s+until \S+\s+alice\s+Unknown\s+03-tls-bootstrap\s+0$`, out.String())
	assert.Regexp(t, `(?m)^bob\s+until \S+\s+bob\s+Unknown\s+-\s+0$`, out.String())

	aliceToken, err := bootstraptoken.TokenFromKubeconfig(room.KubeconfigPath("alice"))
	require.NoError(t, err)
	out.Reset()
	require.NoError(t, room.Revoke(ctx, []string{"alice"}))
	assert.Contains(t, out.String(), "learner alice: token "+aliceToken.ID+" deleted\n")
	assert.Contains(t, out.String(), "note: a node that already joined keeps its client certificate")
	_, err = admin.CoreV1().Secrets("kube-system").Get(ctx, aliceToken.SecretName(), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the token's secret is gone: %v", err)
	require.Eventually(t, func() bool {
		_, err := bootstrapClients["alice"].CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		return apierrors.IsUnauthorized(err)
	}, 30*time.Second, 100*time.Millisecond, "the revoked token no longer authenticates")
	_, err = nodes["alice"].CoreV1().Nodes().Get(ctx, "alice", metav1.GetOptions{})
	assert.NoError(t, err, "the node that joined keeps its certificate")

	out.Reset()
	require.NoError(t, room.Status(ctx))
	assert.NotContains(t, out.String(), "alice")
	assert.Regexp(t, `(?m)^bob\s+until `, out.String())
	assert.EqualError(t, room.Revoke(ctx, []string{"carol"}), "no learner carol in "+filepath.Join(room.StateDir, "classroom"))
}

func TestIssueRefusesABadNameBeforeTouchingTheCluster(t *testing.T) {
	room := &Classroom{StateDir: t.TempDir()} // no client: nothing may be sent
	assert.ErrorContains(t, room.Issue(context.Background(), []string{"alice", "--ttl"}), `learner name "--ttl" cannot name a node`)
	roster, err := room.Roster()
	require.NoError(t, err)
	assert.Empty(t, roster)
}
