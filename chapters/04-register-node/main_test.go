package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/nodestatus"
	"mykubelet/mylib/statedir"
	"mykubelet/scripts/docscheck"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

// TestChapter04 runs the chapter's program as node n1, with a client
// certificate for system:node:n1 in group system:nodes (what chapter 03
// writes), and checks the README: the node is registered and complete, the
// lease is renewed, the status is written once and not again while nothing
// changes, the credentials cannot touch another node, Ctrl-C stops it and a
// second run adopts the node.
func TestChapter04(t *testing.T) {
	const node = "n1"
	c := testcluster.Start(t)
	bin := testcluster.BuildChapter(t, "./chapters/04-register-node")
	admin := c.Clientset(t)
	ctx := context.Background()
	readme := filepath.Join(testcluster.RepoRoot(t), "chapters/04-register-node/README.md")
	markdown, err := os.ReadFile(readme)
	require.NoError(t, err)

	// Without chapter 03's kubeconfig: one clear line, exit 1.
	empty := t.TempDir()
	out, err := exec.Command(bin, "--state-dir", empty, "--node-name", node).CombinedOutput()
	require.Error(t, err)
	assert.Equal(t, 1, err.(*exec.ExitError).ExitCode())
	assert.Equal(t, "04-register-node: error: no node kubeconfig at "+filepath.Join(empty, statedir.NodeKubeconfig)+": run `go run ./chapters/03-tls-bootstrap` first, or pass --kubeconfig to use another one\n", string(out))
	// Bad numbers are refused locally, in one line, before any request.
	for _, args := range [][]string{{"--max-pods=-1"}, {"--port=99999"}, {"--node-status-update-frequency=0"}} {
		out, err := exec.Command(bin, append([]string{"--state-dir", empty}, args...)...).CombinedOutput()
		require.Error(t, err, args)
		assert.Equal(t, 2, err.(*exec.ExitError).ExitCode(), args)
		assert.Equal(t, 1, strings.Count(string(out), "\n"), "one line: %q", out)
		assert.Contains(t, string(out), "(see --help)", args)
	}
	trouble, err := docscheck.ExpectedOutputOf(string(markdown), "Troubleshooting")
	require.NoError(t, err)
	require.Len(t, trouble, 2)
	require.NoError(t, docscheck.Match(trouble[:1], string(out)), "README Troubleshooting")

	// The node kubeconfig where chapter 03 leaves it; $KUBECONFIG (admin)
	// must be ignored.
	stateDir := t.TempDir()
	nodeCfg := c.UserConfig(t, "system:node:"+node, "system:nodes")
	chaptertest.WriteNodeKubeconfig(t, stateDir, nodeCfg)
	env := append(os.Environ(), "KUBECONFIG="+c.AdminKubeconfig)
	args := []string{"--state-dir", stateDir, "--node-name", node}

	p := chaptertest.StartWithEnv(t, env, bin, args...)
	p.WaitForOutput("lease kube-node-lease/n1: renewed", 40*time.Second)

	n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	checkCompleteNode(t, n)
	lease, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, node, *lease.Spec.HolderIdentity)
	assert.Equal(t, int32(40), *lease.Spec.LeaseDurationSeconds)
	assert.Equal(t, []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: n.UID}}, lease.OwnerReferences)

	chaptertest.MatchSection(t, readme, "kubectl describe node", chaptertest.Kubectl(t, c.AdminKubeconfig, "describe", "node", node))
	checkNodeRestriction(t, c.Clientset(t), kubernetes.NewForConfigOrDie(nodeCfg), node)

	require.Equal(t, 0, p.Stop(), "Ctrl-C ends the program cleanly")
	require.NoError(t, docscheck.Match(chaptertest.ExpectedOutput(t, readme), p.Stdout()), "README Expected output")
	// Over 10 s and more, with nothing changing: one status write.
	assert.Equal(t, 1, strings.Count(p.Stdout(), "status written"), p.Stdout())

	// A second run adopts the node and writes no create.
	p = chaptertest.StartWithEnv(t, env, bin, args...)
	p.WaitForOutput("lease kube-node-lease/n1: renewed", 20*time.Second)
	require.Equal(t, 0, p.Stop())
	chaptertest.MatchSection(t, readme, "Run it again", p.Stdout())

	// The node's credentials with another node's name: one clear error.
	out, err = exec.Command(bin, "--state-dir", stateDir, "--node-name", "n2").CombinedOutput()
	require.Error(t, err, "%s", out)
	assert.Contains(t, string(out), `04-register-node: error: create node n2: nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"`)
	require.NoError(t, docscheck.Match(trouble[1:], string(out)), "README Troubleshooting")
	chaptertest.MatchSection(t, readme, "only the node", string(out))
}

// checkCompleteNode checks every part of the status chapter 04 claims.
func checkCompleteNode(t *testing.T, n *v1.Node) {
	t.Helper()
	ready := chaptertest.CheckReadyConditions(t, n)
	assert.False(t, ready.LastHeartbeatTime.IsZero())
	assert.False(t, ready.LastTransitionTime.IsZero())

	require.Len(t, n.Status.Addresses, 2)
	assert.Equal(t, v1.NodeInternalIP, n.Status.Addresses[0].Type)
	assert.NotEmpty(t, n.Status.Addresses[0].Address)
	assert.Equal(t, v1.NodeAddress{Type: v1.NodeHostName, Address: n.Name}, n.Status.Addresses[1])

	for _, r := range nodestatus.RequiredCapacities {
		cap, alloc := n.Status.Capacity[r], n.Status.Allocatable[r]
		assert.Positive(t, cap.Sign(), "capacity %s", r)
		assert.Positive(t, alloc.Sign(), "allocatable %s", r)
		assert.LessOrEqual(t, alloc.Cmp(cap), 0, "allocatable %s <= capacity", r)
	}
	assert.Equal(t, int64(runtime.NumCPU()), n.Status.Capacity.Cpu().Value())
	assert.Equal(t, int64(110), n.Status.Capacity.Pods().Value())
	mem, allocMem := n.Status.Capacity[v1.ResourceMemory], n.Status.Allocatable[v1.ResourceMemory]
	mem.Sub(allocMem)
	assert.Equal(t, "100Mi", mem.String(), "memory reserved for hard eviction")

	info := n.Status.NodeInfo
	assert.Equal(t, kubelet.KubeletVersion, info.KubeletVersion)
	assert.Equal(t, "mock://0.1.0", info.ContainerRuntimeVersion)
	assert.Equal(t, runtime.GOOS, info.OperatingSystem)
	assert.Equal(t, runtime.GOARCH, info.Architecture)
	assert.NotEmpty(t, info.KernelVersion)
	assert.NotEmpty(t, info.BootID)
	assert.Equal(t, int32(10250), n.Status.DaemonEndpoints.KubeletEndpoint.Port)
	assert.Equal(t, n.Name, n.Labels[v1.LabelHostname])
	assert.Equal(t, runtime.GOOS, n.Labels[v1.LabelOSStable])
	assert.Equal(t, "true", n.Annotations[kubelet.ControllerManagedAttachAnnotation])
}

// checkNodeRestriction proves the program's credentials are a node's: they
// may not create, patch or delete another Node, nor touch its Lease.
func checkNodeRestriction(t *testing.T, admin, asNode kubernetes.Interface, node string) {
	t.Helper()
	ctx := context.Background()
	_, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: v1.NamespaceNodeLease}}
	_, err = admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Create(ctx, lease, metav1.CreateOptions{})
	require.NoError(t, err)

	_, err = asNode.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsForbidden(err), "create another node: %v", err)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{"hijacked": "true"}}})
	_, err = asNode.CoreV1().Nodes().Patch(ctx, "other", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	assert.True(t, apierrors.IsForbidden(err), "patch another node's status: %v", err)
	err = asNode.CoreV1().Nodes().Delete(ctx, "other", metav1.DeleteOptions{})
	assert.True(t, apierrors.IsForbidden(err), "delete another node: %v", err)
	_, err = asNode.CoordinationV1().Leases(v1.NamespaceNodeLease).Update(ctx, lease, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsForbidden(err), "update another node's lease: %v", err)

	// Its own node it may patch (what the program does).
	_, err = asNode.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status")
	assert.NoError(t, err)
}
