package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/localcluster"
	"mykubelet/scripts/testkit/testcluster"
)

// TestNodeDeletedWhileTheAgentRuns: `kubectl delete node` under a running
// node agent. As upstream's kubelet, it does not register the node again
// while it runs (registration happens once): every status sync logs that
// the node is not found (five tries each time), and the agent keeps
// running. Started again, it registers the node anew.
func TestNodeDeletedWhileTheAgentRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test: starts a control plane")
	}
	const node = "deleted-node"
	c := testcluster.Start(t)
	bin := testcluster.BuildChapter(t, "./chapters/04-register-node")
	admin := c.Clientset(t)
	ctx := context.Background()
	state := t.TempDir()
	chaptertest.WriteNodeKubeconfig(t, state, c.UserConfig(t, "system:node:"+node, "system:nodes"))
	args := []string{"--node-name", node, "--state-dir", state, "--node-ip", "127.0.0.1"}

	p := chaptertest.Start(t, bin, args...)
	p.WaitForOutput(`lease kube-node-lease/`+node+`: created`, time.Minute)
	require.NoError(t, admin.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}))

	p.WaitForLog(`"Error updating node status, will retry" err="get node `+node+` \(try 5\): nodes \\"`+node+`\\" not found"`, time.Minute)
	require.True(t, p.Running(), "the agent keeps running")
	assert.Equal(t, 1, strings.Count(p.Stdout(), "node "+node+": registered"), "no second registration while it runs")
	assert.Equal(t, 0, p.Stop())

	p = chaptertest.Start(t, bin, args...)
	p.WaitForOutput(`node `+node+`: registered \(created\)`, time.Minute)
	_, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err, "a restart registers the node again")
	assert.Equal(t, 0, p.Stop())
}

// TestExpiredCertificateIsOneClearLine: the node's client certificate has
// expired (the node was off longer than its certificate lives, and nothing
// rotated it). The API server refuses it (401); the chapter says so in one
// line and exits 1. Chapter 03, run again, sees the expired certificate and
// bootstraps a new one (TestClientConfigIsValidOnlyWhileTheCertificateIs).
func TestExpiredCertificateIsOneClearLine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	const node = "expired-node"
	c := testcluster.Start(t)
	bin := testcluster.BuildChapter(t, "./chapters/04-register-node")
	crt, key, err := c.CA().Issue(localcluster.CertSpec{CommonName: "system:node:" + node, Organizations: []string{"system:nodes"}, Validity: -30 * time.Minute})
	require.NoError(t, err)
	state := t.TempDir()
	chaptertest.WriteNodeKubeconfig(t, state, &rest.Config{Host: c.Host, TLSClientConfig: rest.TLSClientConfig{CAData: c.CA().CertPEM, CertData: crt, KeyData: key}})

	stdout, stderr, code := chaptertest.Run(t, bin, "--node-name", node, "--state-dir", state, "--node-ip", "127.0.0.1")
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	require.Len(t, lines, 1, stderr)
	assert.Regexp(t, `^04-register-node: error: the API server at .* refused our credentials \(expired or revoked\?\): the server has asked for the client to provide credentials$`, lines[0])
	t.Logf("the learner sees: %s", lines[0])
}
