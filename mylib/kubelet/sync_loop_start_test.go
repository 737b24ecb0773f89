package kubelet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/kubetypes"
)

// gatedRuntime is an empty runtime whose GetPods waits until open is
// closed: the PLEG's first relist lasts as long as the test wants.
type gatedRuntime struct {
	emptyRuntime
	open chan struct{}
}

func (r *gatedRuntime) GetPods(ctx context.Context, all bool) ([]*kubecontainer.Pod, error) {
	select {
	case <-r.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return r.emptyRuntime.GetPods(ctx, all)
}

// TestSyncLoopStartsQuietlyBeforeTheFirstRelist: at start the PLEG has not
// relisted yet; during the first relist period the sync loop waits for it
// without an error line ("Skipping pod synchronization" … "pleg has yet
// to be successful" is what every chapter printed at start), and syncs the
// waiting update once the relist is done.
func TestSyncLoopStartsQuietlyBeforeTheFirstRelist(t *testing.T) {
	f := newPodFixture(t)
	rt := &gatedRuntime{open: make(chan struct{})}
	updates := make(chan kubetypes.PodUpdate, 1)
	require.NoError(t, f.kl.newPodHalf(PodsConfig{Updates: updates, Runtime: rt, Out: f.out}))
	f.kl.podWorkers = f.workers

	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(2)))
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer()
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), logger), time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.kl.RunPods(runCtx) }()
	defer func() { stop(); <-done }()
	updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{apiPod("a", "1")}}

	waits := func() int { return strings.Count(logs.String(), "Waiting for the first relist") }
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		require.Eventually(t, cond, 10*time.Second, time.Millisecond, "%s; the log:\n%s", what, logs.String())
	}
	// The loop looks at once, then after 100 ms, 300 ms and 700 ms (its
	// back-off doubles from 100 ms): four looks inside the first second.
	waitFor("the loop looks at once, quietly", func() bool { return waits() == 1 })
	for i, step := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		f.clock.Step(step)
		waitFor("the loop looks again after its back-off", func() bool { return waits() == i+2 })
	}
	assert.NotContains(t, logs.String(), "Skipping pod synchronization", "no error line in the first relist period")
	assert.Empty(t, f.workers.dispatched(), "nothing synced before the first relist")

	close(rt.open) // the first relist succeeds
	waitFor("the PLEG is healthy", func() bool { ok, _ := f.kl.PLEG().Healthy(); return ok })
	f.clock.Step(800 * time.Millisecond)
	waitFor("the waiting update is synced", func() bool { return len(f.workers.dispatched()) > 0 })
	assert.Equal(t, []string{"create a"}, f.workers.dispatched())
	assert.NotContains(t, logs.String(), "Skipping pod synchronization")
}
