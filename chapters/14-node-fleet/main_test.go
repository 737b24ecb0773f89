package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mykubelet/mylib/bootstraptoken"
	"mykubelet/mylib/fleet"
	"mykubelet/mylib/statedir"
	"mykubelet/scripts/docscheck"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

// matchBlock checks output against the n-th fenced block (from 0) under
// heading in the README, without its "$ command" lines.
func matchBlock(t *testing.T, readme, heading string, n int, output string) {
	t.Helper()
	markdown, err := os.ReadFile(readme)
	require.NoError(t, err)
	i := strings.Index(string(markdown), "# "+heading+"\n")
	require.GreaterOrEqual(t, i, 0, "README has no heading %q", heading)
	rest := string(markdown)[i+len(heading)+3:]
	parts := strings.Split(rest, "```")
	require.Greater(t, len(parts), 2*n+1, "README section %q has no block %d", heading, n)
	lines := strings.Split(parts[2*n+1], "\n")[1:] // the first line is the fence's info string
	var want []string
	for _, l := range lines {
		if !strings.HasPrefix(l, "$ ") {
			want = append(want, l)
		}
	}
	require.NoError(t, docscheck.Match(want, output), "README section %q, block %d", heading, n)
}

// klogError matches an error line of klog ("E1125 16:55:00.859856 …").
var klogError = regexp.MustCompile(`(?m)^E\d{4} `)

// TestChapter14 runs the chapter with three nodes in each mode against a
// real control plane and checks the README: the expected output, the
// nodes, leases and identities it shows, the restart that reuses the
// certificates, the cleanup, and the error without chapter 02's token.
func TestChapter14(t *testing.T) {
	c := testcluster.Start(t)
	admin := c.Clientset(t)
	ctx := context.Background()
	bin := testcluster.BuildChapter(t, "./chapters/14-node-fleet")
	readme := filepath.Join(testcluster.RepoRoot(t), "chapters/14-node-fleet/README.md")

	// Without chapter 02's bootstrap kubeconfig: one clear line, exit 1.
	empty := t.TempDir()
	_, stderr, code := chaptertest.Run(t, bin, "--state-dir", empty)
	assert.Equal(t, 1, code)
	assert.Equal(t, "14-node-fleet: error: no bootstrap kubeconfig at "+statedir.Path(empty, statedir.BootstrapKubeconfig)+": run chapter 02 first (go run ./chapters/02-bootstrap-token)\n", stderr)
	chaptertest.MatchSection(t, readme, "Troubleshooting", stderr)

	// What chapter 02 leaves: a bootstrap token whose CSRs are approved.
	stateDir := t.TempDir()
	_, err := bootstraptoken.Setup(ctx, admin, c.Config(t), bootstraptoken.SetupOptions{AutoApprove: true, Kubeconfig: statedir.Path(stateDir, statedir.BootstrapKubeconfig)})
	require.NoError(t, err)
	args := []string{"--state-dir", stateDir, "--nodes", "3"}

	// A memory limit that is not a size: one clear line, exit 1.
	_, stderr, code = chaptertest.Run(t, bin, append(args, "--memory-limit", "lots")...)
	assert.Equal(t, 1, code)
	assert.Equal(t, "14-node-fleet: error: --memory-limit: memory limit \"lots\": want a size of at least 1Mi, such as 80Mi\n", stderr)

	p := chaptertest.Start(t, bin, args...)
	// Two windows of 10 s after the start: the second holds only renewals.
	p.WaitForSubmatch(`(?m)^last 10s: .*\(PUT leases [0-9.]+\), `, 0, 90*time.Second)
	nodes, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: fleet.LabelFleet + "=fleet"})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 3)
	for _, n := range nodes.Items {
		chaptertest.CheckReadyConditions(t, &n)
		lease, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, n.Name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, n.Name, *lease.Spec.HolderIdentity)
	}
	whoami := chaptertest.Kubectl(t, filepath.Join(stateDir, "fleet/fleet/fleet-0001/kubelet.kubeconfig"), "auth", "whoami")
	chaptertest.MatchSection(t, readme, "Each node is itself", whoami)
	require.Equal(t, 0, p.Stop(), "Ctrl-C ends the program cleanly")
	assert.NotRegexp(t, klogError, p.Stderr(), "the README shows no error on stderr")
	chaptertest.MatchSection(t, readme, "Expected output", p.Stdout())

	// Again: the certificates in the state dir are reused, no new CSR.
	csrs, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	p = chaptertest.Start(t, bin, args...)
	p.WaitForOutput(`(?m)^registered: `, 60*time.Second)
	require.Equal(t, 0, p.Stop())
	matchBlock(t, readme, "Run it again", 1, p.Stdout())
	again, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, again.Items, len(csrs.Items), "no new CSR on restart")

	// The pre-1.14 heartbeat: status patches, no lease.
	p = chaptertest.Start(t, bin, "--state-dir", stateDir, "--nodes", "2", "--mode", "status", "--fleet-name", "old")
	line := p.WaitForSubmatch(`(?m)^last 10s: .*\(PATCH nodes/status [0-9.]+\), .*`, 0, 90*time.Second)
	require.Equal(t, 0, p.Stop())
	assert.NotRegexp(t, klogError, p.Stderr(), "the README shows no error on stderr")
	matchBlock(t, readme, "The same fleet, before v1.14", 1, p.Stdout())
	assert.NotContains(t, line[0], "leases")
	for _, n := range []string{"old-0001", "old-0002"} {
		_, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, n, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "no lease for %s in status mode: %v", n, err)
	}

	// Cleanup, with the admin's kubeconfig.
	out, _ := chaptertest.RunOK(t, bin, "--cleanup", "--kubeconfig", c.AdminKubeconfig)
	assert.Equal(t, "cleanup: fleet fleet: deleted 3 nodes, 3 leases, 3 certificate signing requests\n", out)
	left, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: fleet.LabelFleet + "=fleet"})
	require.NoError(t, err)
	assert.Empty(t, left.Items)
	old, _ := chaptertest.RunOK(t, bin, "--cleanup", "--kubeconfig", c.AdminKubeconfig, "--fleet-name", "old")
	assert.Equal(t, "cleanup: fleet old: deleted 2 nodes, 0 leases, 2 certificate signing requests\n", old)
	matchBlock(t, readme, "Going on to the next chapter", 0, out+old)
	_, err = os.Stat(filepath.Join(stateDir, "fleet/fleet/fleet-0001/kubelet.kubeconfig"))
	assert.NoError(t, err, "the identities stay in the state dir")
}
