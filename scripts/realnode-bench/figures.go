package main

// The figures of a run: pod startup latency percentiles, the time until
// every pod ran, and the CPU time per pod of the kubelet (and containerd),
// from /proc/PID/stat.

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// burstResult is what one burst measured.
type burstResult struct {
	// lat is each pod's startup latency: created (the watch's ADDED)
	// until Running with every container running, seen through the watch.
	lat []time.Duration
	// allRunning is from the first create call until the last pod ran.
	allRunning time.Duration
	// kubeletCPU and containerdCPU are the processes' CPU time (user +
	// system) over the burst, from before the creates until every pod ran.
	kubeletCPU, containerdCPU time.Duration
}

// summary is the figures of a kubelet's measured bursts together.
type summary struct {
	pods                      int
	p50, p90, p99, max        time.Duration
	allRunning                []time.Duration // per burst
	kubeletCPU, containerdCPU time.Duration   // per pod
}

// quantile of sorted durations by nearest rank: the smallest value with at
// least p of them at or below it (the p99 of 100 is the 99th, of 10 the
// 10th); 0 for none.
func quantile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// summarize puts the bursts' latencies together and divides the CPU time
// by the pods started.
func summarize(bursts []burstResult) summary {
	var s summary
	var all []time.Duration
	var kcpu, ccpu time.Duration
	for _, b := range bursts {
		all = append(all, b.lat...)
		s.allRunning = append(s.allRunning, b.allRunning)
		kcpu += b.kubeletCPU
		ccpu += b.containerdCPU
	}
	slices.Sort(all)
	s.pods = len(all)
	if s.pods == 0 {
		return s
	}
	s.p50, s.p90, s.p99, s.max = quantile(all, .5), quantile(all, .9), quantile(all, .99), all[len(all)-1]
	s.kubeletCPU = kcpu / time.Duration(s.pods)
	s.containerdCPU = ccpu / time.Duration(s.pods)
	return s
}

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s" }

// header and row are the summary as a Markdown table, one row per kubelet.
const header = "| kubelet | pods | p50 | p90 | p99 | max | all Running (per burst) | kubelet CPU-s per pod | containerd CPU-s per pod |\n|---|---|---|---|---|---|---|---|---|"

func (s summary) row(label string) string {
	per := make([]string, len(s.allRunning))
	for i, d := range s.allRunning {
		per[i] = secs(d)
	}
	return fmt.Sprintf("| %s | %d | %s | %s | %s | %s | %s | %.4f | %.4f |", label, s.pods,
		secs(s.p50), secs(s.p90), secs(s.p99), secs(s.max), strings.Join(per, ", "),
		s.kubeletCPU.Seconds(), s.containerdCPU.Seconds())
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on Linux
// (sysconf(_SC_CLK_TCK), which Go cannot ask without cgo).
const clockTicks = 100

// parseStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/PID/stat line; the command name, field 2, may hold spaces and
// parentheses, so the count starts after its last ')'.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("not a /proc/PID/stat line: %.40q", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/PID/stat has %d fields after the command, want 13 or more", len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/PID/stat: utime %q, stime %q are not numbers", f[11], f[12])
	}
	return time.Duration(u+s) * time.Second / clockTicks, nil
}
