package fleet

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// beats runs the agents' periodic work (status syncs, Lease renewals) from
// timers instead of from a goroutine per loop. Upstream's kubelet has a
// goroutine per loop (wait.JitterUntil), and so did this fleet: three per
// agent, waiting, each with a stack of its own. Here an agent holds no
// goroutine between two beats: a timer fires, one goroutine does that
// agent's work and schedules the next beat, and ends. A slow or failing
// agent delays only its own next beat; the others' timers are apart.
//
// Like upstream's "sliding" wait.JitterUntil, the interval counts from the
// end of a beat, and a beat never overlaps the previous one of its loop.
type beats struct {
	clock clock.WithDelayedExecution

	mu      sync.Mutex
	stopped bool
	loops   []*loop
	running sync.WaitGroup // the beats (and start-ups) under way
}

// loop is one periodic job: its latest timer.
type loop struct {
	mu    sync.Mutex
	timer clock.Timer
}

// enter counts one unit of work in, unless stop has begun.
func (b *beats) enter() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return false
	}
	b.running.Add(1)
	return true
}

// spawn runs fn in a goroutine of its own, counted in running, unless stop
// has begun.
func (b *beats) spawn(fn func()) {
	if !b.enter() {
		return
	}
	go func() {
		defer b.running.Done()
		fn()
	}()
}

// every runs fn at once and then every interval after the end of the
// previous run, until stop.
func (b *beats) every(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	l := &loop{}
	b.mu.Lock()
	b.loops = append(b.loops, l)
	b.mu.Unlock()
	var beat func()
	beat = func() {
		fn(ctx)
		l.mu.Lock()
		defer l.mu.Unlock()
		// A fake clock calls the function while it holds its own lock (a
		// real one, in a goroutine of its own): the beat goes on in a new
		// goroutine either way.
		l.timer = b.clock.AfterFunc(interval, func() { b.spawn(beat) })
	}
	b.spawn(beat)
}

// stop lets no new beat begin, waits for those under way, and stops every
// timer: after it, no goroutine of the beats is left.
func (b *beats) stop() {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
	b.running.Wait()
	b.mu.Lock()
	loops := b.loops
	b.mu.Unlock()
	// Not under b.mu: a fake clock holds its lock while it calls spawn,
	// which takes b.mu.
	for _, l := range loops {
		l.mu.Lock()
		if l.timer != nil {
			l.timer.Stop()
		}
		l.mu.Unlock()
	}
}
