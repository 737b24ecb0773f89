package nodelease

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "uid-" + "n1"}}
}

// recordingClock is a fake clock that remembers every wait asked of it.
type recordingClock struct {
	*testingclock.FakeClock
	mu    sync.Mutex
	waits []time.Duration
}

func (c *recordingClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	return c.FakeClock.NewTimer(d)
}

func (c *recordingClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// start runs a controller for node n1 on a fake clock and returns them with
// a function that counts the lease actions of a verb seen so far.
func start(t *testing.T, cs *fake.Clientset) (*recordingClock, func(verb string) int) {
	t.Helper()
	var mu sync.Mutex
	counts := map[string]int{}
	cs.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		counts[a.GetVerb()]++
		mu.Unlock()
		return false, nil, nil
	})
	fc := &recordingClock{FakeClock: testingclock.NewFakeClock(t0)}
	c, err := NewController(Config{Client: cs, NodeName: "n1", Clock: fc})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return fc, func(verb string) int { mu.Lock(); defer mu.Unlock(); return counts[verb] }
}

// waitFor polls cond (in real time) for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, time.Millisecond, what)
}

func getLease(t *testing.T, cs *fake.Clientset) *coordinationv1.Lease {
	t.Helper()
	// Read the tracker directly, so the test's reads are not counted as
	// the controller's.
	obj, err := cs.Tracker().Get(coordinationv1.SchemeGroupVersion.WithResource("leases"), corev1.NamespaceNodeLease, "n1")
	require.NoError(t, err)
	return obj.(*coordinationv1.Lease)
}

func TestDefaults(t *testing.T) {
	assert.Equal(t, int32(40), DefaultLeaseDurationSeconds)
	assert.Equal(t, 10*time.Second, RenewInterval(DefaultLeaseDurationSeconds))
	c, err := NewController(Config{Client: fake.NewClientset(), NodeName: "n1"})
	require.NoError(t, err)
	assert.Equal(t, 10*time.Second, c.RenewInterval())
	assert.Equal(t, int32(40), c.LeaseDurationSeconds())
}

func TestNewControllerRejectsBadConfig(t *testing.T) {
	cs := fake.NewClientset()
	for name, cfg := range map[string]Config{
		"no client":          {NodeName: "n1"},
		"no node name":       {Client: cs},
		"negative duration":  {Client: cs, NodeName: "n1", LeaseDurationSeconds: -1},
		"renew after expiry": {Client: cs, NodeName: "n1", LeaseDurationSeconds: 10, RenewInterval: 10 * time.Second},
		"negative renew":     {Client: cs, NodeName: "n1", RenewInterval: -time.Second},
	} {
		_, err := NewController(cfg)
		assert.Error(t, err, name)
	}
}

func TestCreatesLeaseAndRenewsEveryTenSeconds(t *testing.T) {
	cs := fake.NewClientset(newNode("n1"))
	fc, count := start(t, cs)

	waitFor(t, "lease created and controller waiting", func() bool { return count("create") == 1 && fc.HasWaiters() })
	l := getLease(t, cs)
	assert.Equal(t, "n1", *l.Spec.HolderIdentity)
	assert.Equal(t, int32(40), *l.Spec.LeaseDurationSeconds)
	assert.True(t, l.Spec.RenewTime.Time.Equal(t0), "renewTime %v", l.Spec.RenewTime)
	require.Len(t, l.OwnerReferences, 1)
	assert.Equal(t, metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "uid-n1"}, l.OwnerReferences[0])
	assert.Equal(t, 0, count("update"), "a just-created lease is not updated")

	for i := 1; i <= 3; i++ {
		fc.Step(10*time.Second - time.Millisecond)
		// The controller sleeps on the fake clock: nothing can happen
		// before the full 10 s.
		assert.True(t, fc.HasWaiters(), "the renewal timer fired before 10 s")
		assert.Equal(t, i-1, count("update"), "renewed before 10 s")
		fc.Step(time.Millisecond)
		waitFor(t, "renewal", func() bool { return count("update") == i && fc.HasWaiters() })
		l := getLease(t, cs)
		assert.True(t, l.Spec.RenewTime.Time.Equal(t0.Add(time.Duration(i)*10*time.Second)), "renewal %d: renewTime %v", i, l.Spec.RenewTime)
	}
	assert.Equal(t, []time.Duration{10 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second}, fc.Waits())
	// Renewals update the lease the controller holds: no GET each time.
	assert.Equal(t, 1, count("get"), "one GET (before the create), none per renewal")
}

func TestBackoffFrom200msDoublingTo7s(t *testing.T) {
	cs := fake.NewClientset(newNode("n1"))
	var mu sync.Mutex
	failures := 9
	cs.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if failures > 0 {
			failures--
			return true, nil, errors.New("the server is on fire")
		}
		return false, nil, nil
	})
	fc, count := start(t, cs)

	waitFor(t, "first attempt", func() bool { return count("get") == 1 && fc.HasWaiters() })
	want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond,
		3200 * time.Millisecond, 6400 * time.Millisecond, 7 * time.Second, 7 * time.Second, 7 * time.Second}
	for i, d := range want {
		fc.Step(d - time.Millisecond)
		assert.True(t, fc.HasWaiters(), "the backoff timer fired before %v", d)
		assert.Equal(t, i+1, count("get"), "attempt %d came before %v", i+2, d)
		fc.Step(time.Millisecond)
		waitFor(t, "next attempt", func() bool { return count("get") == i+2 && fc.HasWaiters() })
	}
	// The tenth GET succeeds (not found), so the lease is created, and
	// the controller goes back to renewing every 10 s.
	waitFor(t, "lease created after the failures", func() bool { return count("create") == 1 && fc.HasWaiters() })
	assert.Equal(t, append(want, 10*time.Second), fc.Waits())
}

func TestRecreatesDeletedLease(t *testing.T) {
	cs := fake.NewClientset(newNode("n1"))
	fc, count := start(t, cs)
	waitFor(t, "lease created", func() bool { return count("create") == 1 && fc.HasWaiters() })

	require.NoError(t, cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(context.Background(), "n1", metav1.DeleteOptions{}))
	fc.Step(10 * time.Second)
	waitFor(t, "lease recreated", func() bool { return count("create") == 2 && fc.HasWaiters() })
	l := getLease(t, cs)
	assert.True(t, l.Spec.RenewTime.Time.Equal(t0.Add(10*time.Second)))
}

func TestNoLeaseWithoutItsNode(t *testing.T) {
	// Upstream does not create a lease it cannot give an owner reference;
	// it tries again at the next renewal.
	cs := fake.NewClientset()
	fc, count := start(t, cs)
	waitFor(t, "first attempt", func() bool { return count("get") == 1 && fc.HasWaiters() })
	assert.Equal(t, 0, count("create"))

	_, err := cs.CoreV1().Nodes().Create(context.Background(), newNode("n1"), metav1.CreateOptions{})
	require.NoError(t, err)
	fc.Step(10 * time.Second)
	waitFor(t, "lease created once the node exists", func() bool { return count("create") == 1 && fc.HasWaiters() })
	assert.Len(t, getLease(t, cs).OwnerReferences, 1)
}

func TestDurationSecondsFlag(t *testing.T) {
	d := DurationSeconds(DefaultLeaseDurationSeconds)
	assert.Equal(t, "40s", d.String())
	require.NoError(t, d.Set("15s"))
	assert.Equal(t, DurationSeconds(15), d)
	require.NoError(t, d.Set("1m"))
	assert.Equal(t, DurationSeconds(60), d)
	for _, bad := range []string{"1.5s", "0s", "-3s", "500ms", "soon"} {
		assert.Error(t, d.Set(bad), bad)
	}
}

func TestSyncRenewsOnceWithoutWaiting(t *testing.T) {
	cs := fake.NewClientset(newNode("n1"))
	fc := &recordingClock{FakeClock: testingclock.NewFakeClock(t0)}
	c, err := NewController(Config{Client: cs, NodeName: "n1", Clock: fc})
	require.NoError(t, err)

	c.Sync(context.Background())
	assert.True(t, getLease(t, cs).Spec.RenewTime.Time.Equal(t0), "the first Sync creates the lease")
	fc.Step(7 * time.Second)
	c.Sync(context.Background())
	assert.True(t, getLease(t, cs).Spec.RenewTime.Time.Equal(t0.Add(7*time.Second)), "the second Sync renews it, whenever it is called")
	assert.Empty(t, fc.Waits(), "Sync never waits on the clock: the caller schedules it")
}

// TestAStopMidRequestLogsNoError: a node stopped while a lease request is
// in flight (the request fails with the context) logs no error: it is a
// shutdown, not a failed heartbeat.
func TestAStopMidRequestLogsNoError(t *testing.T) {
	for _, verb := range []string{"update", "get"} {
		t.Run(verb, func(t *testing.T) {
			cs := fake.NewClientset(newNode("n1"))
			c, err := NewController(Config{Client: cs, NodeName: "n1", Clock: testingclock.NewFakeClock(t0)})
			require.NoError(t, err)
			c.Sync(context.Background()) // creates the lease
			if verb == "get" {
				c.latestLease = nil // the next sync reads the lease first
			}
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
			ctx, stop := context.WithCancel(klog.NewContext(context.Background(), logger))
			cs.PrependReactor(verb, "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
				stop() // the node stops while the request is in flight
				return true, nil, context.Canceled
			})
			c.Sync(ctx)
			logged := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
			assert.NotContains(t, logged, "ERROR", "a stop is not an error:\n%s", logged)
		})
	}
}
