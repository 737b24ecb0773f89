package main

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

// TestAPIServerKilledAndRestarted runs the node half (chapter 04) and the
// pod half (this chapter) as one node, kills the API server with SIGKILL,
// keeps it away for 10 s and starts it again. Afterwards the node's Lease
// is renewed again and the node is Ready, a pod bound after the restart
// reaches the pod workers, and nothing that happens once happened twice:
// the Node and its Lease are the same objects, the node registered once,
// the pod bound before the kill was added and synced once, the static
// pod's mirror pod created once.
//
// Every wait is bounded; the recovery times are logged (client-go's
// reflector waits up to about a minute before it lists again after the API
// server comes back, so the pod may take that long).
func TestAPIServerKilledAndRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test: starts a control plane and kills its API server")
	}
	const node = "fault-node"
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := testcluster.Start(t)
	admin := c.Clientset(t)
	agentBin := testcluster.BuildChapter(t, "./chapters/04-register-node")
	podsBin := testcluster.BuildChapter(t, "./chapters/08-pod-workers")
	nodeCfg := chaptertest.RegisterNode(t, c, node)

	agentState, podsState := t.TempDir(), chaptertest.ShortTempDir(t)
	chaptertest.WriteNodeKubeconfig(t, agentState, nodeCfg)
	chaptertest.WriteNodeKubeconfig(t, podsState, nodeCfg)
	chaptertest.AddStaticPod(t, podsState, "yaml/static/static-web.yaml")

	agent := chaptertest.Start(t, agentBin, "--node-name", node, "--state-dir", agentState, "--node-ip", "127.0.0.1")
	agent.WaitForOutput(`lease kube-node-lease/`+node+`: (created|renewed)`, time.Minute)
	pods := chaptertest.Start(t, podsBin, "--node-name", node, "--state-dir", podsState, "--debug-address", "127.0.0.1:0")
	pods.WaitForOutput(`mirror pod default/static-web-`+node+` created`, time.Minute)
	createPod(ctx, t, admin, "before", node)
	pods.WaitForOutput(`syncPod create default/before: would start containers`, time.Minute)

	nodeBefore, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	leaseBefore, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)

	c.KillAPIServer(t)
	time.Sleep(10 * time.Second) // the outage; not an assertion
	require.True(t, agent.Running(), "the node agent survives the outage:\n%s", agent.Stderr())
	require.True(t, pods.Running(), "the pod chapter survives the outage:\n%s", pods.Stderr())
	c.RestartAPIServer(t)
	back := time.Now()

	// The heartbeat resumes: a renewTime after the restart.
	chaptertest.EventuallyTrue(t, 2*time.Minute, 200*time.Millisecond, "the lease is renewed after the restart", func() bool {
		l, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(back)
	})
	t.Logf("lease renewed %v after the API server came back", time.Since(back).Round(100*time.Millisecond))
	chaptertest.EventuallyTrue(t, 2*time.Minute, 200*time.Millisecond, "the node is Ready", func() bool {
		n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == v1.NodeReady {
				return cond.Status == v1.ConditionTrue
			}
		}
		return false
	})

	// A pod bound after the restart reaches the pod workers.
	createPod(ctx, t, admin, "after", node)
	created := time.Now()
	pods.WaitForOutput(`syncPod create default/after: would start containers`, 2*time.Minute)
	t.Logf("pod bound after the restart reached its worker %v after it was created (%v after the API server came back)",
		time.Since(created).Round(100*time.Millisecond), time.Since(back).Round(100*time.Millisecond))

	// Once is once.
	nodeAfter, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, nodeBefore.UID, nodeAfter.UID, "the same Node")
	leaseAfter, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, leaseBefore.UID, leaseAfter.UID, "the same Lease")
	assert.Equal(t, 1, count(agent.Stdout(), `node `+node+`: registered`), agent.Stdout())
	assert.Equal(t, 1, count(agent.Stdout(), `lease kube-node-lease/`+node+`: created`), "the lease was created once, before the kill")
	assert.Equal(t, 1, count(pods.Stdout(), `SyncLoop ADD source=api pods=\[default/before\]`), pods.Stdout())
	assert.Equal(t, 1, count(pods.Stdout(), `syncPod create default/before:`), pods.Stdout())
	assert.Equal(t, 1, count(pods.Stdout(), `mirror pod default/static-web-`+node+` created`), pods.Stdout())
	mirrors, err := admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=static-web-" + node})
	require.NoError(t, err)
	assert.Len(t, mirrors.Items, 1, "one mirror pod")

	assert.Equal(t, 0, pods.Stop())
	assert.Equal(t, 0, agent.Stop())
}

func createPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, name, node string) {
	t.Helper()
	_, err := cs.CoreV1().Pods("default").Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func count(out, re string) int { return len(regexp.MustCompile(re).FindAllStringIndex(out, -1)) }
