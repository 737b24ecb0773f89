package fleet

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// waitFor polls cond (in real time) for up to 10 s: the beats run in
// goroutines of their own, the fake clock decides when.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, time.Millisecond, what)
}

func TestBeatsRunAtOnceThenEveryIntervalAfterTheLast(t *testing.T) {
	fc := testingclock.NewFakeClock(t0)
	b := &beats{clock: fc}
	var n atomic.Int32
	var at []time.Time
	b.every(context.Background(), 10*time.Second, func(context.Context) {
		at = append(at, fc.Now()) // beats of one loop never overlap
		n.Add(1)
	})
	waitFor(t, "first beat, at once", func() bool { return n.Load() == 1 && fc.Waiters() == 1 })
	for i := int32(2); i <= 4; i++ {
		fc.Step(10*time.Second - time.Millisecond)
		// A timer that fires leaves the fake clock's waiters at once.
		assert.Equal(t, 1, fc.Waiters(), "beat %d fired before 10 s", i)
		fc.Step(time.Millisecond)
		waitFor(t, "next beat", func() bool { return n.Load() == i && fc.Waiters() == 1 })
	}
	b.stop()
	assert.Equal(t, []time.Time{t0, t0.Add(10 * time.Second), t0.Add(20 * time.Second), t0.Add(30 * time.Second)}, at)
	assert.Equal(t, 0, fc.Waiters(), "stop stops the timers")
}

func TestBeatsAStuckLoopDoesNotHoldTheOthers(t *testing.T) {
	fc := testingclock.NewFakeClock(t0)
	b := &beats{clock: fc}
	ctx, cancel := context.WithCancel(context.Background())
	var stuck, healthy atomic.Int32
	b.every(ctx, 10*time.Second, func(ctx context.Context) {
		stuck.Add(1)
		<-ctx.Done() // a request that hangs until shutdown
	})
	b.every(ctx, 10*time.Second, func(context.Context) { healthy.Add(1) })
	waitFor(t, "both loops started", func() bool { return stuck.Load() == 1 && healthy.Load() == 1 && fc.Waiters() == 1 })
	for i := int32(2); i <= 5; i++ {
		fc.Step(10 * time.Second)
		waitFor(t, "the healthy loop beats", func() bool { return healthy.Load() == i && fc.Waiters() == 1 })
	}
	assert.Equal(t, int32(1), stuck.Load(), "the stuck loop's next beat waits for its first to end")
	cancel()
	b.stop()
	assert.Equal(t, 0, fc.Waiters())
}

func TestBeatsStopLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	fc := testingclock.NewFakeClock(t0)
	b := &beats{clock: fc}
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	for range 100 {
		b.spawn(func() { b.every(ctx, time.Second, func(context.Context) { n.Add(1) }) })
	}
	waitFor(t, "100 loops started", func() bool { return n.Load() == 100 && fc.Waiters() == 100 })
	fc.Step(time.Second)
	cancel()
	b.stop()
	assert.Equal(t, 0, fc.Waiters(), "every timer stopped")
	b.spawn(func() { t.Error("spawn after stop ran") })
	fc.Step(time.Hour)
	// Polled here, not with waitFor, whose own goroutines would count.
	n0 := runtime.NumGoroutine()
	for deadline := time.Now().Add(10 * time.Second); n0 > before && time.Now().Before(deadline); n0 = runtime.NumGoroutine() {
		time.Sleep(time.Millisecond)
	}
	assert.LessOrEqual(t, n0, before, "goroutines left behind")
}

// TestBeatsLimit: with a limit of 2, a third loop's beat waits, holding no
// goroutine, until one of the two running ends; then it runs.
func TestBeatsLimit(t *testing.T) {
	fc := testingclock.NewFakeClock(t0)
	b := &beats{clock: fc, limit: 2}
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	var started, third atomic.Int32
	for range 2 {
		b.every(ctx, 10*time.Second, func(context.Context) {
			started.Add(1)
			<-release
		})
	}
	waitFor(t, "two beats running", func() bool { return started.Load() == 2 })
	before := runtime.NumGoroutine()
	b.every(ctx, 10*time.Second, func(context.Context) { third.Add(1) })
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, "the queued beat holds no goroutine")
	assert.Equal(t, int32(0), third.Load(), "the third beat waits for a place")
	b.mu.Lock()
	assert.Len(t, b.queue, 1)
	b.mu.Unlock()
	close(release)
	waitFor(t, "the third beat ran", func() bool { return third.Load() == 1 && fc.Waiters() == 3 })
	cancel()
	b.stop()
	assert.Equal(t, 0, fc.Waiters())
}

// TestBeatsStopDropsTheQueue: beats still queued at stop do not run, and
// stop does not wait for them.
func TestBeatsStopDropsTheQueue(t *testing.T) {
	fc := testingclock.NewFakeClock(t0)
	b := &beats{clock: fc, limit: 1}
	release := make(chan struct{})
	var queuedRan atomic.Bool
	b.spawn(func() { <-release })
	b.spawn(func() { queuedRan.Store(true) })
	stopped := make(chan struct{})
	go func() {
		b.mu.Lock()
		for !b.stopped { // wait until stop has dropped the queue
			b.mu.Unlock()
			time.Sleep(time.Millisecond)
			b.mu.Lock()
		}
		b.mu.Unlock()
		close(release)
	}()
	go func() { b.stop(); close(stopped) }()
	<-stopped
	assert.False(t, queuedRan.Load(), "a queued beat ran after stop")
}
