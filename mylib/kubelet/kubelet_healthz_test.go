package kubelet

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/podworkers"
	"mykubelet/mylib/server"
)

// stuckWorkers are pod workers whose first UpdatePod does not return
// until released: a sync loop handler that hangs.
type stuckWorkers struct {
	*fakePodWorkers
	once    sync.Once
	entered chan struct{} // closed when the first UpdatePod hangs
	release chan struct{} // closed to let it return
}

func (w *stuckWorkers) UpdatePod(ctx context.Context, o podworkers.UpdatePodOptions) {
	w.once.Do(func() {
		close(w.entered)
		<-w.release
	})
	w.fakePodWorkers.UpdatePod(ctx, o)
}

type allowEveryone struct{}

func (allowEveryone) AuthenticateRequest(*http.Request) (server.User, bool, error) {
	return server.User{Name: "admin"}, true, nil
}
func (allowEveryone) Authorize(context.Context, server.Attributes) (bool, string, error) {
	return true, "", nil
}

// TestSyncLoopHealthCheckFailsWhenTheLoopHangs: on the kubelet's (fake)
// clock, the syncloop check is healthy before the loop runs and while it
// turns; once a handler hangs, it stays healthy for 5 min (2 × the 1 min
// resync interval is less than upstream's 5 min floor) and fails just
// after, with upstream's words, /healthz saying so in upstream's format;
// it is healthy again as soon as the loop gets through its iteration.
func TestSyncLoopHealthCheckFailsWhenTheLoopHangs(t *testing.T) {
	f := newPodFixture(t)
	stuck := &stuckWorkers{fakePodWorkers: f.workers, entered: make(chan struct{}), release: make(chan struct{})}
	f.kl.podWorkers = stuck
	f.kl.runtimeState = &runtimeState{} // a healthy runtime: the loop iterates at once (the PLEG gate is TestSyncLoopStartsQuietlyBeforeTheFirstRelist's)
	srv, err := server.NewServer(server.Config{NodeName: "n1", Pods: f.kl.podManager, Runtime: struct {
		runtimeapi.RuntimeServiceClient
	}{},
		Authenticator: allowEveryone{}, Authorizer: allowEveryone{},
		HealthChecks: []server.HealthCheck{{Name: "syncloop", Check: f.kl.SyncLoopHealthCheck}}})
	require.NoError(t, err)
	healthz := func() (int, string) {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest("GET", "/healthz", nil))
		return w.Code, w.Body.String()
	}

	assert.True(t, f.kl.LatestLoopEntryTime().IsZero())
	assert.NoError(t, f.kl.SyncLoopHealthCheck(nil), "healthy before the loop ever ran, as upstream")

	ctx, cancel := context.WithCancel(context.Background())
	updates := make(chan kubetypes.PodUpdate, 1)
	done := make(chan struct{})
	go func() { defer close(done); f.kl.syncLoop(ctx, updates, nil) }()
	released := false
	defer func() {
		cancel()
		if !released {
			close(stuck.release)
		}
		<-done
	}()

	updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{apiPod("a", "uid-a")}}
	<-stuck.entered // the loop entered an iteration at t0 and hangs in it
	assert.Equal(t, t0, f.kl.LatestLoopEntryTime())

	f.clock.Step(5 * time.Minute)
	assert.NoError(t, f.kl.SyncLoopHealthCheck(nil), "5 min is still healthy")
	code, body := healthz()
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok", body)

	f.clock.Step(time.Nanosecond)
	assert.EqualError(t, f.kl.SyncLoopHealthCheck(nil), "sync Loop took longer than expected")
	code, body = healthz()
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Equal(t, "[+]ping ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n", body)

	close(stuck.release) // the handler returns; the loop notes the time it left the iteration
	released = true
	require.Eventually(t, func() bool { return f.kl.SyncLoopHealthCheck(nil) == nil }, 10*time.Second, time.Millisecond)
	assert.Equal(t, t0.Add(5*time.Minute+time.Nanosecond), f.kl.LatestLoopEntryTime())
	code, body = healthz()
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok", body)
	assert.Equal(t, "create a", f.workers.dispatched()[0])
}

// TestPLEGHealthCheck: unhealthy before the first relist and once the last
// relist is older than the 3 min threshold, with upstream's words.
func TestPLEGHealthCheck(t *testing.T) {
	f := newPodFixture(t)
	assert.EqualError(t, f.kl.PLEGHealthCheck(nil), "PLEG took longer than expected: pleg has yet to be successful")
	f.kl.PLEG().Relist(context.Background())
	assert.NoError(t, f.kl.PLEGHealthCheck(nil))
	f.clock.Step(3 * time.Minute)
	assert.NoError(t, f.kl.PLEGHealthCheck(nil), "3 min is the threshold")
	f.clock.Step(time.Second)
	assert.EqualError(t, f.kl.PLEGHealthCheck(nil), "PLEG took longer than expected: pleg was last seen active 3m1s ago; threshold is 3m0s")

	without := &Kubelet{}
	assert.NoError(t, without.PLEGHealthCheck(nil), "no PLEG, nothing to be unhealthy")
}
