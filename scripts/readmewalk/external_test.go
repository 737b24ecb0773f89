package readmewalk

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"mykubelet/scripts/testkit/testcluster"
)

// Neighbour is the Node that TestWalkOnAnotherCluster keeps Ready beside
// the learner's, as kind's own node (or a classroom's other nodes) is.
const Neighbour = "kind-like-control-plane"

// ExternalNodeName is the learner's node name in TestWalkOnAnotherCluster:
// NODE_NAME, as a learner given the admin KUBECONFIG picks one.
const ExternalNodeName = "walker-elsewhere"

// ExternalChapters are the chapters TestWalkOnAnotherCluster walks.
var ExternalChapters = []string{"01", "02", "03", "04"}

// TestWalkOnAnotherCluster runs the tour as the README tells a learner on
// kind, or one given a classroom's admin KUBECONFIG, to: `KUBECONFIG=…
// NODE_NAME=… scripts/tour.sh 01 02 03 04`, in a fresh copy of the
// repository, against a control plane that is not the one
// scripts/cluster.sh starts and that already has another Ready node (a
// kubelet's heartbeat: its Lease renewed, its Ready condition posted). The
// steps marked local are skipped (nothing of scripts/cluster.sh runs, no
// .state/cluster), those marked external run, and every other step must
// hold there as written: with another node Ready, the node lifecycle
// controller never enters "master disruption mode" and taints an
// unreachable node NoExecute too.
//
// It runs beside TestWalkTheCourse (both are parallel): its own
// control plane on free ports in a directory of its own, its own copy of
// the repository (so its own .state), its own TMPDIR and node names.
func TestWalkOnAnotherCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("walks chapters 01 to 04 against a real control plane")
	}
	t.Parallel()
	root := testcluster.RepoRoot(t)
	dir := filepath.Join(t.TempDir(), "mykubelet")
	copyCheckout(t, root, dir)

	c := testcluster.Start(t, testcluster.WithNodeMonitorGracePeriod(GracePeriod))
	cs := c.Clientset(t)
	keepReady(t, cs, Neighbour)
	kubeconfig := testcluster.WriteKubeconfig(t, c.Config(t))

	// kubectl v1.37.1 on PATH, as kind's VM has it (on the local path,
	// `eval "$(scripts/cluster.sh env)"` puts it there: a local step).
	env := cleanEnv(os.Environ(), "MYKUBELET_STATE_DIR", "KUBECONFIG", "NODE_NAME", "TMPDIR", "PATH", "GOFLAGS")
	env = append(env,
		WalkGoFlags,
		"PATH="+testcluster.BinDir()+string(os.PathListSeparator)+os.Getenv("PATH"),
		"TMPDIR="+t.TempDir(),
		"KUBECONFIG="+kubeconfig,
		"NODE_NAME="+ExternalNodeName,
	)

	// End the tour before go test's deadline panics, so the transcript's
	// end is shown.
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-30*time.Second))
		defer cancel()
	}
	logFile := filepath.Join(t.TempDir(), "tour.out")
	out, err := os.Create(logFile)
	require.NoError(t, err)
	defer out.Close()
	tour := exec.CommandContext(ctx, filepath.Join(dir, "scripts", "tour.sh"), ExternalChapters...)
	tour.Cancel = func() error { return tour.Process.Signal(os.Interrupt) } // the tour stops its programs on SIGINT
	tour.WaitDelay = 20 * time.Second
	tour.Dir = dir
	tour.Env = env
	tour.Stdout, tour.Stderr = out, out
	start := time.Now()
	err = tour.Run()
	b, _ := os.ReadFile(logFile)
	printed := string(b)
	var walked []string
	for _, l := range strings.Split(printed, "\n") {
		if strings.HasPrefix(l, "=== ") && strings.Contains(l, " walked in ") {
			walked = append(walked, strings.TrimPrefix(l, "=== "))
		}
	}
	t.Logf("KUBECONFIG=%s NODE_NAME=%s scripts/tour.sh %s: %s\n%s", kubeconfig, ExternalNodeName,
		strings.Join(ExternalChapters, " "), time.Since(start).Round(time.Second), strings.Join(walked, "\n"))
	if err != nil {
		t.Fatalf("scripts/tour.sh %s on another cluster failed after %s: %v\n%s",
			strings.Join(ExternalChapters, " "), time.Since(start).Round(time.Second), err, lastLines(printed, 150))
	}

	readmes, err := Plan(dir, ExternalChapters)
	require.NoError(t, err)
	require.Equal(t, []string{"README.md", "chapters/01-node-lease/README.md", "chapters/02-bootstrap-token/README.md",
		"chapters/03-tls-bootstrap/README.md", "chapters/04-register-node/README.md"}, readmes)
	for _, r := range readmes {
		require.Contains(t, printed, "=== "+r+" walked in", "the tour did not walk %s", r)
	}
	require.Contains(t, printed, fmt.Sprintf("=== Done: %d READMEs walked", len(readmes)))
	require.Contains(t, printed, "(not run here: on the local control plane only; this tour uses KUBECONFIG="+kubeconfig+")")
	require.NoDirExists(t, filepath.Join(dir, ".state", "cluster"), "the tour started a local cluster")
	require.NotContains(t, printed, "on another cluster only", "an external step was skipped")

	// The neighbour stayed Ready all along: the walk saw a cluster like kind's.
	n, err := cs.CoreV1().Nodes().Get(context.Background(), Neighbour, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.ConditionTrue, readyStatus(n), "%s is not Ready", Neighbour)
}

// keepReady creates the Node name with its Lease and, until the test
// ends, does what its kubelet would: renews the Lease every 2 s and posts
// Ready=True every 10 s. It returns once the node lifecycle controller has
// seen the node Ready (it removed the not-ready taint the API server's
// admission put on the new Node).
func keepReady(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })

	node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The controllers write the Node too (the TTL annotation, the pod
	// CIDR, taints): read it afresh on a conflict, as the kubelet does.
	postStatusOnce := func() error {
		now := metav1.Now()
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Conditions = nil
		for _, c := range []struct {
			typ    corev1.NodeConditionType
			status corev1.ConditionStatus
			reason string
		}{
			{corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"},
			{corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"},
			{corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"},
			{corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"},
		} {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: c.typ, Status: c.status, Reason: c.reason,
				LastHeartbeatTime: now, LastTransitionTime: node.CreationTimestamp})
		}
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	}
	postStatus := func() error { return retry.RetryOnConflict(retry.DefaultRetry, postStatusOnce) }
	require.NoError(t, postStatus())
	renew := func() error {
		now := metav1.NewMicroTime(time.Now())
		l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			_, err = cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease, OwnerReferences: []metav1.OwnerReference{
					{APIVersion: "v1", Kind: "Node", Name: name, UID: node.UID}}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now},
			}, metav1.CreateOptions{})
			return err
		}
		l.Spec.RenewTime = &now
		_, err = cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(ctx, l, metav1.UpdateOptions{})
		return err
	}
	require.NoError(t, renew())
	wg.Add(1)
	go func() {
		defer wg.Done()
		lease, status := time.NewTicker(2*time.Second), time.NewTicker(10*time.Second)
		defer lease.Stop()
		defer status.Stop()
		for {
			var err error
			select {
			case <-ctx.Done():
				return
			case <-lease.C:
				err = renew()
			case <-status.C:
				err = postStatus()
			}
			if err != nil && ctx.Err() == nil {
				t.Logf("%s's heartbeat: %v", name, err) // the next tick tries again, as a kubelet does
			}
		}
	}()
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && readyStatus(n) == corev1.ConditionTrue && len(n.Spec.Taints) == 0, nil
	})
	require.NoError(t, err, "the node lifecycle controller did not take %s for Ready (no taints)", name)
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}
