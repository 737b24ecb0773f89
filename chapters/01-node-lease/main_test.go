package main

import (
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
	"k8s.io/client-go/kubernetes"

	"mykubelet/mylib/nodestatus"
	"mykubelet/scripts/docscheck"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

// TestChapter01 runs the chapter's program against a real control plane and
// checks what its README says: the node is Ready while the lease is
// renewed; stopped, the node lifecycle controller marks it NotReady with
// conditions Unknown and the unreachable taints after the grace period;
// started again, it is Ready and the taints go.
func TestChapter01(t *testing.T) {
	const node = "n1"
	const grace = 20 * time.Second // the README's 50 s, shortened
	c := testcluster.Start(t, testcluster.WithNodeMonitorGracePeriod(grace))
	bin := testcluster.BuildChapter(t, "./chapters/01-node-lease")
	cs := c.Clientset(t)
	ctx := context.Background()
	readme := filepath.Join(testcluster.RepoRoot(t), "chapters/01-node-lease/README.md")
	kubectl := func(args ...string) string {
		t.Helper()
		return chaptertest.Kubectl(t, c.AdminKubeconfig, args...)
	}
	// start runs the chapter in the background with the test's own
	// environment (KUBECONFIG included: --kubeconfig wins).
	start := func(args ...string) *chaptertest.Process {
		t.Helper()
		return chaptertest.StartWithEnv(t, os.Environ(), bin, args...)
	}
	base := []string{"--kubeconfig", c.AdminKubeconfig, "--node-name", node, "--state-dir", t.TempDir()}

	// First run, with the defaults the README shows: created, conditions
	// posted, lease created and renewed 10 s later.
	p := start(base...)
	p.WaitForOutput("lease kube-node-lease/n1: renewed", 30*time.Second)

	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	chaptertest.CheckReadyConditions(t, n)

	lease, err := cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, node, *lease.Spec.HolderIdentity)
	assert.Equal(t, int32(40), *lease.Spec.LeaseDurationSeconds)
	assert.Equal(t, []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: n.UID}}, lease.OwnerReferences)

	chaptertest.MatchSection(t, readme, "kubectl get node", kubectl("get", "node", node))
	chaptertest.MatchSection(t, readme, "kubectl get lease", kubectl("get", "lease", "-n", "kube-node-lease", node))

	require.Equal(t, 0, p.Stop(), "Ctrl-C ends the program cleanly")
	require.NoError(t, docscheck.Match(chaptertest.ExpectedOutput(t, readme), p.Stdout()), "README Expected output")

	// Stopped, and the only node: after the grace period the node
	// lifecycle controller marks every condition Unknown and taints the node
	// unreachable:NoSchedule, but evicts nothing ("master disruption mode"),
	// so no NoExecute taint.
	waitNotReady := func(what string, taintsWanted ...v1.TaintEffect) {
		t.Helper()
		waitNode(t, cs, node, 3*grace+30*time.Second, what, func(n *v1.Node) bool {
			for _, typ := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure, v1.NodeReady} {
				if _, c := nodestatus.GetNodeCondition(&n.Status, typ); c == nil || c.Status != v1.ConditionUnknown || c.Reason != "NodeStatusUnknown" {
					return false
				}
			}
			for _, e := range taintsWanted {
				if !hasTaint(n, e) {
					return false
				}
			}
			return true
		})
	}
	waitNotReady("NotReady, conditions Unknown, unreachable:NoSchedule", v1.TaintEffectNoSchedule)
	chaptertest.MatchSection(t, readme, "the node goes NotReady", kubectl("get", "node", node))
	chaptertest.MatchSection(t, readme, "conditions are Unknown", kubectl("get", "node", node, "-o", conditionsJSONPath))
	// The NoExecute taint would come at the controller's next pass (every
	// 5 s); give it three.
	time.Sleep(15 * time.Second)
	chaptertest.MatchSection(t, readme, "the unreachable taint", kubectl("get", "node", node, "-o", taintsJSONPath))

	// Started again, with a short lease, while a second node is Ready:
	// adopted, Ready, taints removed, and the lease's renewTime moves every 2 s.
	other := start("--kubeconfig", c.AdminKubeconfig, "--node-name", "other-node", "--state-dir", t.TempDir(), "--lease-duration", "8s")
	other.WaitForOutput("lease kube-node-lease/other-node: created", 30*time.Second)
	p = start(append(base, "--lease-duration", "8s")...)
	p.WaitForOutput("lease kube-node-lease/n1: renewed", 30*time.Second)
	waitReady := func() {
		t.Helper()
		waitNode(t, cs, node, 60*time.Second, "Ready without taints", func(n *v1.Node) bool {
			_, r := nodestatus.GetNodeCondition(&n.Status, v1.NodeReady)
			return r != nil && r.Status == v1.ConditionTrue && len(n.Spec.Taints) == 0
		})
	}
	waitReady()
	first, err := cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(8), *first.Spec.LeaseDurationSeconds)
	require.Eventually(t, func() bool {
		l, err := cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(first.Spec.RenewTime.Time)
	}, 10*time.Second, 200*time.Millisecond, "renewTime advances")
	require.Equal(t, 0, p.Stop())
	chaptertest.MatchSection(t, readme, "Run it again", p.Stdout())

	// Stopped while another node is Ready: both unreachable taints.
	waitNotReady("NotReady with both unreachable taints", v1.TaintEffectNoSchedule, v1.TaintEffectNoExecute)
	chaptertest.MatchSection(t, readme, "With another node Ready", kubectl("get", "node", node, "-o", taintsJSONPath))

	// And back.
	p = start(base...)
	waitReady()
	require.Equal(t, 0, p.Stop())
	require.Equal(t, 0, other.Stop())

	// Cleanup as the README says: deleting the Node deletes its Lease (the
	// garbage collector follows the owner reference).
	kubectl("delete", "node", node)
	require.Eventually(t, func() bool {
		_, err := cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 60*time.Second, 500*time.Millisecond, "the lease is garbage-collected with its node")
}

const (
	conditionsJSONPath = `jsonpath={range .status.conditions[*]}{.type}={.status} {.reason}{"\n"}{end}`
	taintsJSONPath     = `jsonpath={range .spec.taints[*]}{.key}:{.effect}{"\n"}{end}`
)

func hasTaint(n *v1.Node, effect v1.TaintEffect) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == v1.TaintNodeUnreachable && t.Effect == effect {
			return true
		}
	}
	return false
}

func waitNode(t *testing.T, cs kubernetes.Interface, name string, timeout time.Duration, what string, cond func(*v1.Node) bool) {
	t.Helper()
	var last *v1.Node
	ok := assert.Eventually(t, func() bool {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		last = n
		return cond(n)
	}, timeout, time.Second, "node %s: %s", name, what)
	if !ok {
		t.Fatalf("last seen: conditions %+v taints %+v", last.Status.Conditions, last.Spec.Taints)
	}
}
