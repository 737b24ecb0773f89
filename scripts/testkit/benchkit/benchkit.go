// Package benchkit holds what the pod-startup benchmarks share
// (scripts/capstone-bench, scripts/realnode-bench): a watch of the burst's
// pods that outlives the API server's watch time-out, a process's CPU time
// from /proc, and nearest-rank quantiles.
package benchkit

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Quantile of sorted durations by nearest rank: the smallest value with at
// least p of them at or below it (the p99 of 100 is the 99th, of 10 the
// 10th); 0 for none.
func Quantile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times (100 on Linux).
const clockTicks = 100

// ParseStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/PID/stat line; the command name, field 2, may hold spaces and
// parentheses, so the count starts after its last ')'.
func ParseStatCPU(stat string) (time.Duration, error) {
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

// CPUTime is process pid's user and system CPU time so far (0 for pid 0 or
// less: not measured).
func CPUTime(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, nil
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return ParseStatCPU(string(raw))
}

// WatchPods watches the pods with the selector until ctx ends. When the API
// server ends a watch (its time-out, or an error event: a burst can take
// longer than a watch lasts), it watches again from the last resource
// version seen, from afresh if that is too old (410 Gone); who names the
// program in the lines it prints about that. Only pod events reach the
// channel, which closes when ctx ends.
func WatchPods(ctx context.Context, pods corev1.PodInterface, selector, who string) (<-chan watch.Event, error) {
	w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("watch pods: %w", err)
	}
	out := make(chan watch.Event)
	go func() {
		defer close(out)
		rv := ""
		for {
			for e := range w.ResultChan() {
				switch o := e.Object.(type) {
				case *v1.Pod:
					rv = o.ResourceVersion
				case *metav1.Status:
					if ctx.Err() == nil {
						fmt.Fprintf(os.Stderr, "%s: watch: %s (watching again)\n", who, o.Message)
					}
					if o.Code == 410 {
						rv = ""
					}
					continue
				}
				select {
				case out <- e:
				case <-ctx.Done():
					w.Stop()
					return
				}
			}
			for {
				if ctx.Err() != nil {
					return
				}
				if w, err = pods.Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: rv}); err == nil {
					break
				}
				fmt.Fprintf(os.Stderr, "%s: watch pods again: %v\n", who, err)
				time.Sleep(time.Second)
			}
		}
	}()
	return out, nil
}
