package kubelet

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"mykubelet/mylib/nodestatus"
)

// TestDisableNodeLeaseWritesStatusEveryTenSeconds is the kubelet before
// v1.14: no Lease at all, and the whole status patched at every sync.
func TestDisableNodeLeaseWritesStatusEveryTenSeconds(t *testing.T) {
	cs := fake.NewClientset()
	var mu sync.Mutex
	counts := map[string]int{}
	cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		counts[a.GetResource().Resource+" "+a.GetVerb()]++
		mu.Unlock()
		return false, nil, nil
	})
	count := func(k string) int { mu.Lock(); defer mu.Unlock(); return counts[k] }
	clk := testingclock.NewFakeClock(t0)
	kl, err := New(Config{Client: cs, NodeName: "n1", Clock: clk, Node: &NodeConfig{
		Setters:                   []nodestatus.Setter{nodestatus.ReadyCondition(clk.Now, nil, nil)},
		NodeStatusReportFrequency: DefaultNodeStatusUpdateFrequency,
		DisableNodeLease:          true,
	}})
	require.NoError(t, err)
	assert.Zero(t, kl.LeaseRenewInterval())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- kl.RunNode(ctx) }()
	for i := 1; i <= 3; i++ {
		require.Eventually(t, func() bool { return count("nodes patch") == i && clk.HasWaiters() }, 5*time.Second, time.Millisecond)
		clk.Step(10 * time.Second)
	}
	require.Eventually(t, func() bool { return count("nodes patch") == 4 }, 5*time.Second, time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	mu.Lock()
	defer mu.Unlock()
	for k := range counts {
		assert.NotContains(t, k, "leases", "no lease with DisableNodeLease")
	}
}

// TestStatusReadFromTheWatchCacheFirst: the first read of a sync may be
// served from the API server's cache (resourceVersion 0); a retry after a
// failed write reads from etcd, and so does the first report, right after
// the registration (the cache may not hold the new Node yet).
func TestStatusReadFromTheWatchCacheFirst(t *testing.T) {
	cs := fake.NewClientset()
	var mu sync.Mutex
	var versions []string
	failPatch := true
	cs.PrependReactor("get", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		versions = append(versions, a.(k8stesting.GetActionImpl).GetOptions.ResourceVersion)
		mu.Unlock()
		return false, nil, nil
	})
	cs.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failPatch {
			failPatch = false
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n1", errors.New("changed"))
		}
		return false, nil, nil
	})
	clk := testingclock.NewFakeClock(t0)
	kl, err := New(Config{Client: cs, NodeName: "n1", Clock: clk, Node: &NodeConfig{
		Setters: []nodestatus.Setter{nodestatus.ReadyCondition(clk.Now, nil, nil)},
	}})
	require.NoError(t, err)
	kl.SyncNodeStatus(context.Background()) // registers; the first report fails once
	mu.Lock()
	assert.Equal(t, []string{"", ""}, versions, "the first report and its retry read etcd")
	versions = nil
	mu.Unlock()
	clk.Step(10 * time.Second)
	kl.SyncNodeStatus(context.Background()) // a later sync: nothing changed, nothing written
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"0"}, versions, "a later sync reads the watch cache")
}
