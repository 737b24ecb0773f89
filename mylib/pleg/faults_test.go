package pleg_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/pleg"
)

// countingRuntime counts the relists that ended because a CRI call timed out.
type countingRuntime struct {
	kubecontainer.Runtime
	timedOut atomic.Int64
}

func (r *countingRuntime) GetPods(ctx context.Context, all bool) ([]*kubecontainer.Pod, error) {
	pods, err := r.Runtime.GetPods(ctx, all)
	if status.Code(err) == codes.DeadlineExceeded {
		r.timedOut.Add(1)
	}
	return pods, err
}

// waitFor polls cond every 10 ms until it holds or ctx ends.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting until %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// TestPLEGHealthWhenTheRuntimeHangsOrGoesAway runs the PLEG against a
// runtime on a real unix socket, with a small threshold (1 s), and breaks
// the runtime twice:
//
//  1. it hangs (as under SIGSTOP): relists end at the CRI request timeout,
//     and Healthy turns false with the reason, then true once it answers;
//  2. it goes away until the CRI client has failed to connect 7 times (its
//     back-off has grown), and comes back just after a failed try: relists
//     resume within the capped back-off (3 s) — the test allows 10 s, while
//     gRPC's default back-off would wait 13 s or more at that point.
//
// Every wait is bounded by a context; the recovery time is logged.
func TestPLEGHealthWhenTheRuntimeHangsOrGoesAway(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test: about 10 s")
	}
	clk := clock.RealClock{}
	rt := fakeruntime.New(clk)
	require.NoError(t, rt.Seed(context.Background()))
	f := fakeruntimetest.ServeFaulty(t, rt)
	m, err := kuberuntime.Connect(context.Background(), "unix://"+f.Socket(), clk,
		kuberuntime.WithRuntimeRequestTimeout(300*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	runtime := &countingRuntime{Runtime: m}

	const threshold = time.Second
	g := pleg.NewGenericPLEG(runtime, make(chan *pleg.PodLifecycleEvent, pleg.ChannelCapacity),
		&pleg.RelistDuration{RelistPeriod: 100 * time.Millisecond, RelistThreshold: threshold},
		kubecontainer.NewCache(), clk)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); g.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })

	healthy := func() bool { ok, _ := g.Healthy(); return ok }
	waitFor(ctx, t, "the PLEG is healthy", healthy)

	// 1. The runtime hangs.
	f.Hang(true)
	waitFor(ctx, t, "the PLEG is unhealthy while the runtime hangs", func() bool { return !healthy() })
	_, err = g.Healthy()
	require.ErrorContains(t, err, "pleg was last seen active")
	require.ErrorContains(t, err, "threshold is 1s")
	waitFor(ctx, t, "two relists ended at the request timeout", func() bool { return runtime.timedOut.Load() >= 2 })
	f.Hang(false)
	waitFor(ctx, t, "the PLEG is healthy after the runtime answers again", healthy)

	// 2. The runtime goes away.
	f.Down()
	waitFor(ctx, t, "the PLEG is unhealthy while the runtime is down", func() bool { return !healthy() })
	require.NoError(t, f.WaitForAttempts(ctx, 7), "the CRI client keeps trying to connect")
	f.Up()
	back := time.Now()
	resumeCtx, cancelResume := context.WithTimeout(ctx, 10*time.Second)
	defer cancelResume()
	waitFor(resumeCtx, t, "relists resume after the runtime's return", healthy)
	t.Logf("relists resumed %v after the runtime came back (after %d failed connection attempts)",
		time.Since(back).Round(10*time.Millisecond), 7)
}
