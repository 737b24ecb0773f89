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
//
// At most limit beats run at a time (0: no limit). When the API server is
// slow, beats come due faster than they end; without a limit each would
// wait in a goroutine of its own, with its stack and its request's buffers,
// and a thousand agents' beats would pile up in memory. Beats beyond the
// limit wait in a queue instead, in order, holding no goroutine; a beat
// that ends takes the next one. The limit delays a beat only while limit
// others are under way.
type beats struct {
	clock clock.WithDelayedExecution
	limit int

	mu      sync.Mutex
	stopped bool
	active  int      // beats running, at most limit
	queue   []func() // beats due, waiting for one of those to end
	loops   []*loop
	running sync.WaitGroup // the beats (and start-ups) running or queued
}

// loop is one periodic job: its latest timer.
type loop struct {
	mu    sync.Mutex
	timer clock.Timer
}

// spawn runs fn in a goroutine, counted in running, unless stop has begun:
// at once if fewer than limit beats run, else after those queued before it.
func (b *beats) spawn(fn func()) {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	b.running.Add(1)
	if b.limit > 0 && b.active >= b.limit {
		b.queue = append(b.queue, fn)
		b.mu.Unlock()
		return
	}
	b.active++
	b.mu.Unlock()
	go b.run(fn)
}

// run runs fn, then the queued beats, until the queue is empty.
func (b *beats) run(fn func()) {
	for {
		fn()
		b.running.Done()
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.active--
			b.mu.Unlock()
			return
		}
		fn = b.queue[0]
		b.queue[0] = nil
		b.queue = b.queue[1:]
		b.mu.Unlock()
	}
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

// stop lets no new beat begin, drops the queued ones, waits for those under
// way, and stops every timer: after it, no goroutine of the beats is left.
func (b *beats) stop() {
	b.mu.Lock()
	b.stopped = true
	for range b.queue {
		b.running.Done()
	}
	b.queue = nil
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
