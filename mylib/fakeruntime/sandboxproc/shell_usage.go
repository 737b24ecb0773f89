package sandboxproc

import (
	"net"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// What a container's scripts use, as the stats report it (cri_stats.go).
// A container's processes are goroutines, so the runtime counts for them
// what a cgroup counts for a real container's processes:
//
//   - CPU: the time the kernel ran the OS threads of its scripts. A script
//     runs on a goroutine locked to an OS thread (runtime.LockOSThread)
//     while it works, and the thread's own CPU clock (clock_gettime with
//     the thread's CPU clock ID, readable from every thread of the process)
//     says how long it ran: a busy loop burns it, a sleep does not (a
//     sleeping script gives its thread back). The script's goroutine,
//     its background jobs (each on a goroutine of its own), the utilities
//     a pipeline runs, and stress --cpu's workers are counted; not counted
//     are the builtins of a pipeline's left side (`while :; do :; done |
//     cat`: the interpreter runs them on a goroutine of its own, which
//     this runtime does not see start), the interpreter's here-document
//     writers, the server commands' request handling (net/http's and
//     gRPC's goroutines) and the runtime's own work for the container
//     (its log, its CRI calls).
//   - Memory: the figure the limits charge (shell_limits.go): the shell
//     variables of the last command checked, what stress holds, and the
//     bytes of the writable layer.
//   - Network: the bytes its servers' connections read and wrote.

// cpuMeter is a container's CPU time: the segments that ended, and the
// ones running now, each on an OS thread locked to its goroutine.
type cpuMeter struct {
	mu   sync.Mutex
	done int64         // nanoseconds of the segments that ended
	live map[int]int64 // thread ID -> its CPU clock when its segment began
}

// threadClock is the CPU clock ID of thread tid of this process:
// CPUCLOCK_SCHED with CPUCLOCK_PERTHREAD_MASK, as the kernel's
// MAKE_THREAD_CPUCLOCK makes it (pthread_getcpuclockid's).
func threadClock(tid int) int32 { return int32((^tid)<<3 | 6) }

// threadCPU is how long thread tid has run, in nanoseconds.
func threadCPU(tid int) (int64, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(threadClock(tid), &ts); err != nil {
		return 0, false
	}
	return ts.Nano(), true
}

// measuring reports whether the calling goroutine is counted now: its
// thread is in live. Only the goroutine locked to a thread runs on it, so
// a thread in live is the calling goroutine's own.
func (m *cpuMeter) measuring() bool {
	tid := unix.Gettid()
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.live[tid]
	return ok
}

// maxMeteredThreads bounds how many goroutines of this process are
// metered at once, each on an OS thread of its own. Go ends a process
// that makes 10,000 threads (debug.SetMaxThreads), and a container may run
// up to its pids limit of busy jobs: without the bound, a few such
// containers would end the runtime and every container with it. Past it,
// a goroutine runs unlocked and its CPU time is not counted.
const maxMeteredThreads = 512

// meteredThreads holds a token for each goroutine metered now.
var meteredThreads = make(chan struct{}, maxMeteredThreads)

// begin locks the calling goroutine to its thread and counts it from now,
// if a metered thread is free; false if none is (nothing is counted).
func (m *cpuMeter) begin() bool {
	select {
	case meteredThreads <- struct{}{}:
	default:
		return false
	}
	runtime.LockOSThread()
	tid := unix.Gettid()
	at, ok := threadCPU(tid)
	if !ok { // cannot happen for a live thread of ours
		runtime.UnlockOSThread()
		<-meteredThreads
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.live == nil {
		m.live = map[int]int64{}
	}
	m.live[tid] = at
	return true
}

// end adds the calling goroutine's segment to done, and unlocks it from
// its thread. On a goroutine not counted it does nothing: its thread is
// in live only if the goroutine is locked to it (no other goroutine runs
// on a locked thread).
func (m *cpuMeter) end() {
	tid := unix.Gettid()
	now, ok := threadCPU(tid)
	m.mu.Lock()
	at, live := m.live[tid]
	if live {
		if ok && now > at {
			m.done += now - at
		}
		delete(m.live, tid)
	}
	m.mu.Unlock()
	if live {
		runtime.UnlockOSThread()
		<-meteredThreads
	}
}

// start counts the calling goroutine's work until stop is called (on the
// same goroutine), locked to its OS thread. On a goroutine counted already
// (a nested sh -c, a utility of the script itself) it does nothing.
func (m *cpuMeter) start() (stop func()) {
	if m.measuring() || !m.begin() {
		return func() {}
	}
	return m.end
}

// idle stops counting the calling goroutine while it waits (a sleep, a
// server waiting for its end) and gives its thread back, so that an idle
// container holds no OS thread; resume (idempotent, on the same
// goroutine) counts it again, if a metered thread is free. On a goroutine
// not counted it does nothing.
func (m *cpuMeter) idle() (resume func()) {
	if !m.measuring() {
		return func() {}
	}
	m.end()
	resumed := false
	return func() {
		if !resumed {
			resumed = true
			m.begin()
		}
	}
}

// total is the CPU time so far, in nanoseconds: the segments that ended
// and, up to now, the ones running.
func (m *cpuMeter) total() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.done
	for tid, at := range m.live {
		// The thread is alive: its goroutine takes it out of live, under
		// mu, before it lets it go.
		if now, ok := threadCPU(tid); ok && now > at {
			n += now - at
		}
	}
	return n
}

// netCounters are the bytes a container's servers read (rx) and wrote (tx).
type netCounters struct {
	Rx, tx atomic.Int64
}

// countingListener counts the bytes of each connection it accepts.
type countingListener struct {
	net.Listener
	c *netCounters
}

func (l countingListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: conn, c: l.c}, nil
}

type countingConn struct {
	net.Conn
	c *netCounters
}

func (c countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.c.Rx.Add(int64(n))
	return n, err
}

func (c countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.c.tx.Add(int64(n))
	return n, err
}

// ScriptUsage is what a container's scripts use now; the sandbox process
// reports it for its containers. The writable layer is not in it: the
// runtime measures it on disk.
type ScriptUsage struct {
	CPU  int64 `json:"cpu"`            // nanoseconds, cumulative
	Mem  int64 `json:"mem,omitempty"`  // shell variables and stress's bytes
	Pids int64 `json:"pids,omitempty"` // processes running
	Rx   int64 `json:"rx,omitempty"`   // bytes its servers read
	Tx   int64 `json:"tx,omitempty"`   // bytes its servers wrote
}

// Usage is what t's container uses now.
func (t *ProcTable) Usage() ScriptUsage {
	return ScriptUsage{
		CPU:  t.cpu.total(),
		Mem:  t.vars.Load() + t.stress.Load(),
		Pids: t.Pids.Load(),
		Rx:   t.Traffic.Rx.Load(),
		Tx:   t.Traffic.tx.Load(),
	}
}
