package main

// The figures of a run: pod startup latency percentiles, the time until
// every pod ran, and the CPU time per pod of the kubelet (and containerd),
// from /proc/PID/stat.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"mykubelet/scripts/testkit/benchkit"
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
	s.p50, s.p90, s.p99, s.max = benchkit.Quantile(all, .5), benchkit.Quantile(all, .9), benchkit.Quantile(all, .99), all[len(all)-1]
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
