package sandboxproc

// TestCPUMeterCountsOnlyWhileMeasuring: the meter of a goroutine that
// burns counts it; idle stops it; another goroutine's work is not
// counted.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestCPUMeterCountsOnlyWhileMeasuring(t *testing.T) {
	var m cpuMeter
	burn := func(d time.Duration) { // d of this thread's CPU
		var ts unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) // cannot fail: the calling thread's clock
		start := ts.Nano()
		for {
			_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
			if time.Duration(ts.Nano()-start) >= d {
				return
			}
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		stop := m.start(nil)
		defer stop()
		assert.True(t, m.measuring())
		nested := m.start(nil) // a nested sh: counted once
		burn(50 * time.Millisecond)
		nested()
		live := time.Duration(m.total())
		assert.GreaterOrEqual(t, live, 50*time.Millisecond, "read while it runs")
		resume := m.idle()
		assert.False(t, m.measuring())
		burn(50 * time.Millisecond) // not counted: idle
		resume()
		resume() // idempotent
		burn(10 * time.Millisecond)
	}()
	<-done
	got := time.Duration(m.total())
	assert.GreaterOrEqual(t, got, 60*time.Millisecond)
	assert.Less(t, got, 100*time.Millisecond, "the idle burn was not counted")
	assert.False(t, m.measuring(), "this goroutine is not")
	assert.Empty(t, m.live)
}

// TestServersCountTheirBytes: a container's servers count what their
// connections read and wrote, on loopback here.
func TestServersCountTheirBytes(t *testing.T) {
	var c netCounters
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "0123456789")
	})}
	go func() { _ = srv.Serve(countingListener{Listener: l, c: &c}) }()
	t.Cleanup(func() { srv.Close() })
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + l.Addr().String() + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "0123456789", string(body))
	assert.Eventually(t, func() bool { return c.tx.Load() > 0 }, 10*time.Second, time.Millisecond, "a write counts once it returned")
	assert.Greater(t, c.Rx.Load(), int64(len("GET / HTTP/1.1\r\n")), "the request")
	assert.Greater(t, c.tx.Load(), int64(len(body)), "the response, headers and body")
}

// At most maxMeteredThreads goroutines are metered at once, each on an OS
// thread of its own: past that, a goroutine runs unlocked and uncounted,
// so busy jobs cannot make the thousands of threads that end a Go process.
func TestMeteredThreadsAreBounded(t *testing.T) {
	taken := 0
	for full := false; !full; {
		select {
		case meteredThreads <- struct{}{}:
			taken++
		default:
			full = true
		}
	}
	t.Cleanup(func() {
		for ; taken > 0; taken-- {
			<-meteredThreads
		}
	})
	var m cpuMeter
	stop := m.start(nil)
	assert.False(t, m.measuring(), "every metered thread taken: not counted")
	stop()

	<-meteredThreads // one is free again
	taken--
	stop = m.start(nil)
	assert.True(t, m.measuring(), "a free metered thread: counted")
	resume := m.idle()
	assert.False(t, m.measuring(), "idle gives the thread back")
	assert.Len(t, meteredThreads, maxMeteredThreads-1, "and its token")
	resume()
	assert.True(t, m.measuring(), "resumed on a free one")
	stop()
	assert.False(t, m.measuring())
	assert.Len(t, meteredThreads, maxMeteredThreads-1, "stop gives the token back")
}

// TestAContainerHoldsItsShareOfMeteredThreads: one container's goroutines
// take at most maxMeteredPerContainer metered threads, whatever the
// process has left; past its share, one without a CPU limit runs
// unmetered, and one with a limit waits for a thread of its share (until
// its script ends), instead of running past its quota unmetered.
func TestAContainerHoldsItsShareOfMeteredThreads(t *testing.T) {
	// The scripts of the tests before may still be ending: wait for room
	// for two containers' shares.
	require.Eventually(t, func() bool { return len(meteredThreads) <= maxMeteredThreads-2*maxMeteredPerContainer }, time.Minute, 10*time.Millisecond,
		"the earlier tests' scripts give their metered threads back")
	var hog cpuMeter
	release := make(chan struct{})
	var held sync.WaitGroup
	for range maxMeteredPerContainer {
		held.Add(1)
		go func() {
			stop := hog.start(nil)
			held.Done()
			<-release
			stop()
		}()
	}
	held.Wait()
	t.Cleanup(func() { close(release) })
	assert.Len(t, hog.slots, maxMeteredPerContainer)
	assert.Less(t, len(meteredThreads), maxMeteredThreads, "the process has threads left")

	stop := hog.start(nil)
	assert.False(t, hog.measuring(), "past its share, no limit: unmetered")
	stop()

	var other cpuMeter
	stop = other.start(nil)
	assert.True(t, other.measuring(), "another container gets one")
	stop()

	hog.setLimit(10000, 100000)
	scriptEnded := make(chan struct{})
	got := make(chan bool)
	go func() {
		defer hog.start(scriptEnded)()
		got <- hog.measuring()
	}()
	select {
	case <-got:
		t.Fatal("past its share, with a CPU limit: it ran at once")
	case <-time.After(100 * time.Millisecond):
	}
	close(scriptEnded)
	assert.False(t, <-got, "its script ended while it waited: it runs nothing metered")
}

// TestThrottleHoldsAMeterToItsQuota: a metered goroutine that burns and
// checks, with a quota of 10 ms every 100 ms, runs about 10 ms a period
// (its thread idle, uncounted, while throttled) and says it was
// throttled, as cpu.stat's nr_throttled; with no quota it is never held.
func TestThrottleHoldsAMeterToItsQuota(t *testing.T) {
	spin := func(m *cpuMeter, d time.Duration) {
		defer m.start(nil)()
		for end := time.Now().Add(d); time.Now().Before(end); {
			for i := 0; i < 1000; i++ {
			}
			m.throttle(nil)
		}
	}
	var limited, free cpuMeter
	limited.setLimit(10000, 100000)
	const wall = time.Second
	spin(&limited, wall)
	spin(&free, 100*time.Millisecond)
	got := time.Duration(limited.total())
	t.Logf("a second with 10 ms every 100 ms: %v of CPU, %+v", got, limited.stat())
	assert.LessOrEqual(t, got, 150*time.Millisecond, "about a tenth of its wall time")
	assert.Positive(t, got)
	assert.GreaterOrEqual(t, limited.stat().NrThrottled, int64(5), "throttled in most of its periods")
	assert.Zero(t, free.stat().NrThrottled, "no quota: never throttled")
	assert.Empty(t, limited.live, "its thread given back")
}

// TestEachLoopTicksOnce: each turn of a loop passes the call handler
// (tickCommand first in its body), and a script printed and parsed again
// (eval, a background job) gets no second tick.
func TestEachLoopTicksOnce(t *testing.T) {
	src := "while 2>&1; do 2>&1; done; until :; do f() { :; }; done; for i in 1 2; do case x in esac; done"
	f, err := ParseScript(src)
	require.NoError(t, err)
	once := PrintScript(f)
	assert.Equal(t, 3, strings.Count(once, tickCommand), once)
	f, err = ParseScript(once)
	require.NoError(t, err)
	assert.Equal(t, once, PrintScript(f), "printed and parsed again: the same")
}

// The CPU time read while segments end never goes back: a cgroup's
// cpuacct.usage only grows, and the stats' rates are differences of it.
func TestCPUTotalNeverGoesBack(t *testing.T) {
	var m cpuMeter
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				end := m.start(nil)
				for i := 0; i < 1000; i++ { // a little CPU in each segment
					_ = i * i
				}
				end()
			}
		})
	}
	var last int64
	for i := 0; i < 200000; i++ {
		n := m.total()
		if n < last {
			close(stop)
			wg.Wait()
			t.Fatalf("read %d: the CPU time went back from %d to %d", i, last, n)
		}
		last = n
	}
	close(stop)
	wg.Wait()
}
