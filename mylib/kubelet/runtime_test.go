package kubelet

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
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

// switchRuntime is an empty runtime whose GetPods fails while broken.
type switchRuntime struct {
	emptyRuntime
	broken atomic.Bool
}

func (r *switchRuntime) GetPods(ctx context.Context, all bool) ([]*kubecontainer.Pod, error) {
	if r.broken.Load() {
		return nil, errors.New("rpc error: code = Unavailable desc = the runtime is down")
	}
	return r.emptyRuntime.GetPods(ctx, all)
}

// TestSyncLoopSkipsSyncsWhileThePLEGIsUnhealthy: while the PLEG cannot
// relist, the sync loop takes no update and logs why ("Skipping pod
// synchronization" … "PLEG is not healthy: …"); once a relist succeeds it
// takes the waiting update.
func TestSyncLoopSkipsSyncsWhileThePLEGIsUnhealthy(t *testing.T) {
	f := newPodFixture(t)
	rt := &switchRuntime{}
	rt.broken.Store(true)
	updates := make(chan kubetypes.PodUpdate, 1)
	require.NoError(t, f.kl.newPodHalf(PodsConfig{Updates: updates, Runtime: rt, Out: f.out}))
	f.kl.podWorkers = f.workers

	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer()
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), logger), time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.kl.RunPods(runCtx) }()
	defer func() { stop(); <-done }()

	updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{apiPod("a", "1")}}
	// stepUntil advances the fake clock (the loop's back-off, the PLEG's
	// relist timer) until cond holds; the test's context bounds it.
	stepUntil := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("gave up waiting until %s", what)
			case <-time.After(time.Millisecond):
			}
			f.clock.Step(time.Second)
		}
	}
	skips := func() int { return strings.Count(logs.String(), "Skipping pod synchronization") }
	stepUntil("the loop skipped three times", func() bool { return skips() >= 3 })
	assert.Contains(t, logs.String(), "PLEG is not healthy: pleg has yet to be successful")
	assert.Empty(t, f.workers.dispatched(), "nothing synced while the PLEG is unhealthy")
	assert.Len(t, updates, 1, "the update waits")

	rt.broken.Store(false)
	stepUntil("the waiting update is synced", func() bool { return len(f.workers.dispatched()) > 0 })
	assert.Equal(t, []string{"create a"}, f.workers.dispatched())
}

func TestRuntimeErrorsNamesEachFailingCheck(t *testing.T) {
	s := &runtimeState{}
	assert.NoError(t, s.runtimeErrors())
	s.addHealthCheck("PLEG", func() (bool, error) {
		return false, errors.New("pleg was last seen active 3m1s ago; threshold is 3m0s")
	})
	s.addHealthCheck("other", func() (bool, error) { return true, nil })
	assert.EqualError(t, s.runtimeErrors(), "PLEG is not healthy: pleg was last seen active 3m1s ago; threshold is 3m0s")
}
