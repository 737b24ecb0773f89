package sandboxproc

import (
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

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
//     gRPC's goroutines), the runtime's own work for the container (its
//     log, its CRI calls), and what a container with no CPU limit runs
//     past its share of metered threads (begin).
//   - Memory: the figure the limits charge (shell_limits.go): the shell
//     variables of the last command checked, what stress holds, and the
//     bytes of the writable layer.
//   - Network: the bytes its servers' connections read and wrote.
//
// The CPU limit (limits.cpu): where no cgroup holds the container's
// scripts, the meter enforces it itself, as the kernel's CFS bandwidth
// control enforces a cgroup's cpu.max (throttle below). Where it does:
// the runtime sends a run the quota (RunLimits.CPUQuota) only when no
// cgroup will enforce it: always to its own scripts (a runtime not root,
// or on a fake clock), to a sandbox process only when its pod got no
// cgroup (no CgroupParent: a runtime driven by crictl). A pod's cgroup
// has the kubelet's cpu.max already: the kernel throttles its process.

// cpuMeter is a container's CPU time: the segments that ended, and the
// ones running now, each on an OS thread locked to its goroutine; and its
// CPU limit, which it enforces (throttle).
type cpuMeter struct {
	mu   sync.Mutex
	done int64           // nanoseconds of the segments that ended
	live map[int]segment // by thread ID

	// slots is its share of meteredThreads: a token per goroutine of it
	// metered now (maxMeteredPerContainer), made on first use.
	slots     chan struct{}
	slotsOnce sync.Once

	// CFS bandwidth: quota nanoseconds of CPU in each period of wall
	// time; a quota of 0 is no limit. The rest is guarded by mu.
	quota, period  atomic.Int64
	periodEnd      time.Time // when the current period ends (zero: none began)
	periodStart    int64     // the CPU time (total) the period started with, less its debt
	nextCheck      time.Time // the meter reads the threads' clocks again then
	throttledUntil time.Time // the end of the period the container is throttled in
	// As cpu.stat counts them: periods that began, periods in which the
	// container was throttled, and how long it was (nanoseconds).
	nrPeriods, nrThrottled, throttledTime int64
}

// segment is a goroutine's run on its locked thread: the thread's CPU
// clock when it began, and what ends the goroutine's wait for a metered
// thread again when it resumes after an idle spell (nil: it does not wait).
type segment struct {
	at   int64
	stop <-chan struct{}
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
// thread is in live.
func (m *cpuMeter) measuring() bool {
	_, ok := m.ownSegment()
	return ok
}

// ownSegment is the calling goroutine's segment, if it is counted now. The
// goroutine is locked to its thread while it looks: only the goroutine
// locked to a thread runs on it, so a thread in live is the caller's own.
// (Unlocked, a goroutine could read its thread's ID, lose the thread while
// it waits for mu, and find the ID in live, locked by another since.)
func (m *cpuMeter) ownSegment() (segment, bool) {
	runtime.LockOSThread() // nested in begin's lock, if any: the unlock keeps begin's
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	m.mu.Lock()
	defer m.mu.Unlock()
	seg, ok := m.live[tid]
	return seg, ok
}

// maxMeteredThreads bounds how many goroutines of this process are
// metered at once, each on an OS thread of its own. Go ends a process
// that makes 10,000 threads (debug.SetMaxThreads), and a container may run
// up to its pids limit of busy jobs: without the bound, a few such
// containers would end the runtime and every container with it.
const maxMeteredThreads = 512

// maxMeteredPerContainer is one container's share of them: its jobs
// blocked in a read (`{ sleep 100000 | read v; } &`, each holding its
// thread) cannot take the threads the other containers' limits need.
const maxMeteredPerContainer = 64

// meteredThreads holds a token for each goroutine metered now.
var meteredThreads = make(chan struct{}, maxMeteredThreads)

// begin locks the calling goroutine to its thread and counts it from now,
// once a metered thread is free, of its container's share and of the
// process's. A container with a CPU limit waits for one until stop is
// closed (unmetered, it would run past its quota); one without runs on
// unmetered at once. False: nothing is counted.
func (m *cpuMeter) begin(stop <-chan struct{}) bool {
	m.slotsOnce.Do(func() { m.slots = make(chan struct{}, maxMeteredPerContainer) })
	if m.quota.Load() <= 0 {
		stop = nil
	}
	if !takeSlot(m.slots, stop) {
		return false
	}
	if !takeSlot(meteredThreads, stop) {
		<-m.slots
		return false
	}
	runtime.LockOSThread()
	tid := unix.Gettid()
	at, ok := threadCPU(tid)
	if !ok { // cannot happen for a live thread of ours
		runtime.UnlockOSThread()
		<-meteredThreads
		<-m.slots
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.live == nil {
		m.live = map[int]segment{}
	}
	m.live[tid] = segment{at: at, stop: stop}
	return true
}

// takeSlot puts a token into slots: at once, or false if it is full; with
// stop not nil, it waits for room (the waiting goroutine holds no thread)
// until stop is closed.
func takeSlot(slots chan struct{}, stop <-chan struct{}) bool {
	if stop == nil {
		select {
		case slots <- struct{}{}:
			return true
		default:
			return false
		}
	}
	select {
	case slots <- struct{}{}:
		return true
	case <-stop:
		return false
	}
}

// end adds the calling goroutine's segment to done, and unlocks it from
// its thread. Only a counted goroutine calls it (start's stop, idle), one
// locked to its thread, whose ID in live is its own. It reads the thread's
// clock under mu: read before, a total read in between would count more
// of the segment than end adds, and the next total would go back.
func (m *cpuMeter) end() {
	tid := unix.Gettid()
	m.mu.Lock()
	now, ok := threadCPU(tid)
	seg, live := m.live[tid]
	if live {
		if ok && now > seg.at {
			m.done += now - seg.at
		}
		delete(m.live, tid)
	}
	m.mu.Unlock()
	if live {
		runtime.UnlockOSThread()
		<-meteredThreads
		<-m.slots
	}
}

// start counts the calling goroutine's work until stop is called (on the
// same goroutine), locked to its OS thread; the wait for a metered thread
// (begin) ends when done is closed (the script's end: its context's
// Done). On a goroutine counted already (a nested sh -c, a utility of the
// script itself) it does nothing.
func (m *cpuMeter) start(done <-chan struct{}) (stop func()) {
	if m.measuring() || !m.begin(done) {
		return func() {}
	}
	return m.end
}

// idle stops counting the calling goroutine while it waits (a sleep, a
// server waiting for its end) and gives its thread back, so that an idle
// container holds no OS thread; resume (idempotent, on the same
// goroutine) counts it again, once a metered thread is free (begin: a
// container with a CPU limit waits for one). On a goroutine not counted
// it does nothing.
func (m *cpuMeter) idle() (resume func()) {
	seg, ok := m.ownSegment()
	if !ok {
		return func() {}
	}
	m.end()
	resumed := false
	return func() {
		if !resumed {
			resumed = true
			m.begin(seg.stop)
		}
	}
}

// total is the CPU time so far, in nanoseconds: the segments that ended
// and, up to now, the ones running.
func (m *cpuMeter) total() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.totalLocked()
}

// totalLocked is total; the caller holds m.mu.
func (m *cpuMeter) totalLocked() int64 {
	n := m.done
	for tid, seg := range m.live {
		// The thread is alive: its goroutine takes it out of live, under
		// mu, before it lets it go.
		if now, ok := threadCPU(tid); ok && now > seg.at {
			n += now - seg.at
		}
	}
	return n
}

// setLimit sets the container's CPU limit, as the CRI gives it (the
// kubelet's quota = milliCPU*period/1000, period 100,000 µs): quota µs of
// CPU every period µs. A quota <= 0 is no limit; a period <= 0 is the
// kernel's default, 100 ms.
func (m *cpuMeter) setLimit(quotaUs, periodUs int64) {
	if periodUs <= 0 {
		periodUs = defaultCFSPeriod
	}
	m.period.Store(periodUs * 1000)
	m.quota.Store(max(quotaUs, 0) * 1000)
}

// defaultCFSPeriod is the kernel's (and the kubelet's) CFS period, in µs.
const defaultCFSPeriod = 100000

// bandwidthSlice is how often, in wall time, a check reads the
// container's thread clocks (the kernel hands a CPU its quota in slices of
// 5 ms, sched_cfs_bandwidth_slice_us): between two reads, each busy thread
// may run at most that much past the quota, which the next period repays.
const bandwidthSlice = time.Millisecond

// throttle is the CFS bandwidth control of a container with a CPU limit,
// called where its scripts pass (each command, stress's spin loop): in
// each period of wall time its threads may run for quota; once they did,
// the container is throttled, and every goroutine of it that checks
// waits, idle (its thread given back, nothing counted), until the next
// period starts (or done is closed: the container is killed). Time is the
// real one, never the runtime's clock: CPU time is real even on a fake
// clock. A goroutine not metered (a pipeline's left side) waits too while
// the container is throttled, but what it runs is not counted.
func (m *cpuMeter) throttle(done <-chan struct{}) {
	if m.quota.Load() <= 0 {
		return // no limit: one atomic read per check
	}
	for {
		wait := m.throttled()
		if wait <= 0 {
			return
		}
		resume := m.idle()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-done:
		}
		t.Stop()
		resume()
		select {
		case <-done:
			return
		default:
		}
	}
}

// throttled is how long a goroutine of the container must wait now: 0
// while the current period's quota lasts. A period that ends refills the
// quota, less what the container ran past it (its debt, as the kernel
// carries a negative runtime_remaining into the next period).
func (m *cpuMeter) throttled() time.Duration {
	quota, period := m.quota.Load(), m.period.Load()
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if now.Before(m.throttledUntil) {
		return m.throttledUntil.Sub(now)
	}
	if now.Before(m.nextCheck) {
		return 0
	}
	m.nextCheck = now.Add(bandwidthSlice)
	used := m.totalLocked()
	switch {
	case m.periodEnd.IsZero(): // the first check: the first period begins
		m.periodEnd, m.periodStart = now.Add(time.Duration(period)), used
		m.nrPeriods++
	case !now.Before(m.periodEnd): // n periods ended: n quotas refilled
		n := 1 + int64(now.Sub(m.periodEnd))/period
		debt := max(used-m.periodStart-n*quota, 0)
		m.periodEnd = m.periodEnd.Add(time.Duration(n * period))
		m.periodStart = used - debt
		m.nrPeriods += n
	}
	if used-m.periodStart < quota {
		return 0
	}
	m.throttledUntil = m.periodEnd
	wait := m.periodEnd.Sub(now)
	m.nrThrottled++
	m.throttledTime += int64(wait)
	return wait
}

// CPUStat is what cpu.stat says of the throttling: nr_periods,
// nr_throttled, throttled_time (nanoseconds).
type CPUStat struct {
	NrPeriods, NrThrottled, ThrottledTime int64
}

// stat is the meter's throttling so far.
func (m *cpuMeter) stat() CPUStat {
	m.mu.Lock()
	defer m.mu.Unlock()
	return CPUStat{m.nrPeriods, m.nrThrottled, m.throttledTime}
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

// SetCPULimit sets the container's CPU limit, which its scripts' meter
// enforces (throttle): quota µs of CPU every period µs, as the CRI's
// CpuQuota and CpuPeriod; a quota <= 0 is none.
func (t *ProcTable) SetCPULimit(quotaUs, periodUs int64) { t.cpu.setLimit(quotaUs, periodUs) }

// CPUQuota is the container's CPU limit, as SetCPULimit took it (µs).
func (t *ProcTable) CPUQuota() (quotaUs, periodUs int64) {
	return t.cpu.quota.Load() / 1000, t.cpu.period.Load() / 1000
}

// CPUStat is how often, and how long, the container was throttled.
func (t *ProcTable) CPUStat() CPUStat { return t.cpu.stat() }
