package fleet_test

import (
	"context"
	"fmt"
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

	"mykubelet/mylib/bootstrap"
	"mykubelet/mylib/bootstraptoken"
	"mykubelet/mylib/fleet"
	"mykubelet/scripts/testkit/testcluster"
)

// fixture is a real control plane with a bootstrap token whose node CSRs
// are approved automatically, as the bootstrap-token step of the course
// leaves it.
type fixture struct {
	admin     *kubernetes.Clientset
	stateDir  string
	bootstrap string
}

func newFixture(t *testing.T) *fixture {
	c := testcluster.Start(t)
	f := &fixture{admin: c.Clientset(t), stateDir: t.TempDir()}
	f.bootstrap = filepath.Join(f.stateDir, "bootstrap-kubelet.kubeconfig")
	_, err := bootstraptoken.Setup(context.Background(), f.admin, c.Config(t), bootstraptoken.SetupOptions{AutoApprove: true, Kubeconfig: f.bootstrap})
	require.NoError(t, err)
	return f
}

func (f *fixture) config(name string, n int, mode fleet.Mode, counter *fleet.Counter) fleet.Config {
	return fleet.Config{
		Name: name, Nodes: n, Mode: mode,
		BootstrapKubeconfig: f.bootstrap, StateDir: f.stateDir,
		// Seconds instead of tens of seconds, so that the test is short.
		NodeStatusUpdateFrequency: 2 * time.Second,
		LeaseDurationSeconds:      4, // renewed every second
		Counter:                   counter,
	}
}

// serverCounts reads the API server's request counts.
func (f *fixture) serverCounts(t *testing.T) fleet.ServerCounts {
	t.Helper()
	b, err := f.admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	require.NoError(t, err)
	return fleet.ParseServerCounts(string(b))
}

// running is a fleet run in the background.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, fl *fleet.Fleet) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- fl.Run(ctx) }()
	select {
	case <-fl.AllRegistered():
	case <-time.After(60 * time.Second):
		t.Fatalf("only %d nodes registered after 60 s", fl.Registered())
	}
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the fleet did not stop within 30 s of its context ending")
	}
}

func (r *running) stillRunning(t *testing.T) {
	t.Helper()
	select {
	case err := <-r.done:
		t.Fatalf("the fleet stopped: %v", err)
	default:
	}
}

func renewTime(t *testing.T, cs kubernetes.Interface, node string) time.Time {
	t.Helper()
	l, err := cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(context.Background(), node, metav1.GetOptions{})
	require.NoError(t, err)
	return l.Spec.RenewTime.Time
}

func fleetCSRs(t *testing.T, cs kubernetes.Interface, name string) int {
	t.Helper()
	l, err := cs.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	n := 0
	for _, c := range l.Items {
		if strings.HasPrefix(c.Spec.Username, bootstraptoken.BootstrapUserPrefix) && c.Status.Certificate != nil {
			n++
		}
	}
	return n
}

// TestLeaseFleet runs three agents in lease mode against a real control
// plane and checks identities, NodeRestriction between agents, isolation,
// the write counter against the API server's metrics, clean shutdown,
// reuse of the certificates, and cleanup.
func TestLeaseFleet(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	counter := fleet.NewCounter()
	fl, err := fleet.New(ctx, f.config("lf", 3, fleet.ModeLease, counter))
	require.NoError(t, err)
	assert.Equal(t, fleet.Identities{Requested: 3, Reused: 0, Took: fl.Identities().Took}, fl.Identities())
	assert.Equal(t, 3, fleetCSRs(t, f.admin, "lf"), "one CSR per node")
	agents := fl.Agents()
	names := []string{"lf-0001", "lf-0002", "lf-0003"}
	for i, a := range agents {
		require.Equal(t, names[i], a.Name)
		me, err := bootstrap.WhoAmI(ctx, a.Config)
		require.NoError(t, err)
		assert.Equal(t, "system:node:"+a.Name, me.Username)
		assert.Contains(t, me.Groups, "system:nodes")
	}
	server0, count0 := f.serverCounts(t), counter.Snapshot()
	// WhoAmI above made clients of its own; their idle connections are not
	// the fleet's, so count from here.
	before := runtime.NumGoroutine()

	r := start(t, fl)
	nodes, err := f.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: fleet.LabelFleet + "=lf"})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 3)
	require.Eventually(t, func() bool {
		l, err := f.admin.CoordinationV1().Leases(v1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) >= 3
	}, 10*time.Second, 100*time.Millisecond)

	t.Run("NodeRestriction between agents", func(t *testing.T) {
		a, b := agents[0], agents[1]
		_, err := a.Client.CoreV1().Nodes().Patch(ctx, b.Name, types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"hijacked":"true"}}}`), metav1.PatchOptions{}, "status")
		assert.True(t, apierrors.IsForbidden(err), "%s patches %s's status: %v", a.Name, b.Name, err)
		_, err = a.Client.CoreV1().Nodes().Patch(ctx, b.Name, types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"hijacked":"true"}}}`), metav1.PatchOptions{})
		assert.True(t, apierrors.IsForbidden(err), "%s patches node %s: %v", a.Name, b.Name, err)
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: v1.NamespaceNodeLease}}
		_, err = a.Client.CoordinationV1().Leases(v1.NamespaceNodeLease).Update(ctx, lease, metav1.UpdateOptions{})
		assert.True(t, apierrors.IsForbidden(err), "%s updates %s's lease: %v", a.Name, b.Name, err)
		err = b.Client.CoreV1().Nodes().Delete(ctx, a.Name, metav1.DeleteOptions{})
		assert.True(t, apierrors.IsForbidden(err), "%s deletes node %s: %v", b.Name, a.Name, err)
		// Each may write its own.
		_, err = a.Client.CoreV1().Nodes().Patch(ctx, a.Name, types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status")
		assert.NoError(t, err)
	})

	t.Run("one agent failing does not stop the others", func(t *testing.T) {
		// Node lf-0002 disappears under its agent: its status sync and its
		// lease fail from now on (it may not recreate a Lease owned by a
		// Node that is gone); lf-0001 and lf-0003 must go on renewing.
		require.NoError(t, f.admin.CoreV1().Nodes().Delete(ctx, "lf-0002", metav1.DeleteOptions{}))
		t1, t3 := renewTime(t, f.admin, "lf-0001"), renewTime(t, f.admin, "lf-0003")
		require.Eventually(t, func() bool {
			return renewTime(t, f.admin, "lf-0001").After(t1.Add(2*time.Second)) && renewTime(t, f.admin, "lf-0003").After(t3.Add(2*time.Second))
		}, 20*time.Second, 200*time.Millisecond, "the other agents renew their leases")
		_, err := f.admin.CoreV1().Nodes().Get(ctx, "lf-0002", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "a deleted node is not registered again (as upstream): %v", err)
		r.stillRunning(t)
		assert.Equal(t, 0, fl.Failed())
	})

	r.stop(t)
	// Clean shutdown leaves no goroutine (checked here, not in a subtest,
	// whose own goroutine would count).
	// (A loop of our own: assert.Eventually runs its check in a goroutine.)
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(10 * time.Second); n > before && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(100 * time.Millisecond)
	}
	if n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines left, %d before the fleet:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}

	t.Run("the counter counts what the API server received", func(t *testing.T) {
		counted := fleet.Sub(counter.Snapshot(), count0)
		// Less the one Lease update of another node's Lease sent above: the
		// Node authorizer refused it, before any handler, so the API
		// server's apiserver_request_total does not count it (the counter
		// does: an answer came, 403).
		putLeases := fleet.RequestKey{Verb: "PUT", Resource: "leases"}
		c := counted[putLeases]
		c.Requests--
		counted[putLeases] = c
		checkCounts(t, f, counted, server0,
			// Only the agents create nodes and leases, and patch node status.
			[]fleet.RequestKey{{Verb: "POST", Resource: "nodes"}, {Verb: "POST", Resource: "leases"}, {Verb: "PATCH", Resource: "nodes", Subresource: "status"}},
			// The API server renews its own identity lease in kube-system too.
			fleet.RequestKey{Verb: "PUT", Resource: "leases"})
	})

	t.Run("a restart reuses the certificates", func(t *testing.T) {
		again, err := fleet.New(ctx, f.config("lf", 3, fleet.ModeLease, nil))
		require.NoError(t, err)
		assert.Equal(t, 3, again.Identities().Reused)
		assert.Equal(t, 0, again.Identities().Requested)
		assert.Equal(t, 3, fleetCSRs(t, f.admin, "lf"), "no new CSR")
	})

	t.Run("cleanup", func(t *testing.T) {
		var out strings.Builder
		removed, err := fleet.Cleanup(ctx, f.admin, "lf", &out)
		require.NoError(t, err)
		assert.Equal(t, fleet.Removed{Nodes: 2, Leases: removed.Leases, CSRs: 3}, removed)
		assert.Equal(t, fmt.Sprintf("cleanup: fleet lf: deleted 2 nodes, %d leases, 3 certificate signing requests\n", removed.Leases), out.String())
		nodes, err := f.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: fleet.LabelFleet + "=lf"})
		require.NoError(t, err)
		assert.Empty(t, nodes.Items)
		for _, n := range []string{"lf-0001", "lf-0003"} {
			_, err := f.admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, n, metav1.GetOptions{})
			assert.True(t, apierrors.IsNotFound(err), "lease %s: %v", n, err)
		}
		assert.Equal(t, 0, fleetCSRs(t, f.admin, "lf"))
	})
}

// TestStatusFleet runs two agents the pre-1.14 way: no Lease, the status
// patched at every sync.
func TestStatusFleet(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	counter := fleet.NewCounter()
	fl, err := fleet.New(ctx, f.config("sf", 2, fleet.ModeStatus, counter))
	require.NoError(t, err)
	server0, count0 := f.serverCounts(t), counter.Snapshot()
	r := start(t, fl)
	key := fleet.RequestKey{Verb: "PATCH", Resource: "nodes", Subresource: "status"}
	require.Eventually(t, func() bool { return counter.Snapshot()[key].Requests >= 8 }, 20*time.Second, 100*time.Millisecond,
		"two nodes, a status patch each every 2 s")
	r.stop(t)
	for _, n := range []string{"sf-0001", "sf-0002"} {
		_, err := f.admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, n, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "no lease in status mode: %v", err)
	}
	got := fleet.Sub(counter.Snapshot(), count0)
	for k := range got {
		assert.NotEqual(t, "leases", k.Resource, "no lease request in status mode: %v", k)
	}
	checkCounts(t, f, got, server0, []fleet.RequestKey{{Verb: "POST", Resource: "nodes"}, key}, fleet.RequestKey{})
}

// checkCounts compares the counter's writes with the API server's: exactly
// for the kinds only the agents send, at least for shared.
func checkCounts(t *testing.T, f *fixture, counted map[fleet.RequestKey]fleet.Count, server0 fleet.ServerCounts, exact []fleet.RequestKey, shared fleet.RequestKey) {
	t.Helper()
	// The API server counts a request once its handler returns, which can
	// be just after the client has its answer: give it a moment.
	var server map[fleet.RequestKey]fleet.Count
	caughtUp := func() bool {
		server = fleet.Sub(f.serverCounts(t), server0)
		for _, k := range append(exact, shared) {
			if server[k].Requests < counted[k].Requests {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(5 * time.Second); !caughtUp() && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	for _, k := range exact {
		require.Positive(t, counted[k].Requests, "%v counted", k)
		assert.Equal(t, counted[k].Requests, server[k].Requests, "%v: counted by the fleet and by the API server", k)
	}
	if shared != (fleet.RequestKey{}) {
		assert.Positive(t, counted[shared].Requests)
		assert.GreaterOrEqual(t, server[shared].Requests, counted[shared].Requests, "%v", shared)
	}
	// Body bytes: the API server sums them by verb and resource only, and
	// the controller manager patches nodes too (the ttl controller).
	byResource := map[fleet.RequestKey]int64{}
	for k, c := range counted {
		if k.IsWrite() {
			byResource[fleet.RequestKey{Verb: k.Verb, Resource: k.Resource}] += c.BodyBytes
		}
	}
	for _, k := range exact {
		rk := fleet.RequestKey{Verb: k.Verb, Resource: k.Resource}
		t.Logf("%v: %d requests, %d body bytes counted; API server: %d requests, %d body bytes", k, counted[k].Requests, byResource[rk], server[k].Requests, server[rk].BodyBytes)
		require.Positive(t, byResource[rk])
		if k.Verb == "POST" {
			assert.Equal(t, byResource[rk], server[rk].BodyBytes, "%v body bytes", rk)
		} else {
			assert.GreaterOrEqual(t, server[rk].BodyBytes, byResource[rk], "%v body bytes", rk)
		}
	}
}
