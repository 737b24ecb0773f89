package fakeruntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// BenchmarkTickers runs 1,000 containers that each print a line every
// second into their CRI log, `while true; do echo tick; sleep 1; done`, on
// the real clock, and reports what the runtime costs per container: CPU
// (milliseconds of CPU per second of wall time), Go heap, and goroutines.
// Each iteration measures a 5 s window once the containers are running.
//
//	go test -run '^$' -bench BenchmarkTickers -benchtime 1x ./mylib/fakeruntime/
//
// MYKUBELET_BENCH_TICKERS sets another number of containers (each its own
// pod, so, as root, its own sandbox process: 100 is kinder to a small
// machine than 1,000).
//
// It runs twice: with the scripts in the runtime's own process, and (as
// root) in the sandbox process, whose CPU and memory it adds (its RSS:
// what the scripts cost there, since its Go heap is not ours to read).
// Both report how many containers a second it created and started.
func BenchmarkTickers(b *testing.B) {
	b.Run("in-process", func(b *testing.B) { benchmarkTickers(b, IsolationInProcess) })
	b.Run("sandbox-process", func(b *testing.B) {
		if os.Geteuid() != 0 {
			b.Skip("the sandbox process needs root")
		}
		benchmarkTickers(b, IsolationAuto)
	})
}

func benchmarkTickers(b *testing.B, iso Isolation) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("MYKUBELET_BENCH_TICKERS")); err == nil && v > 0 {
		n = v
	}
	const window = 5 * time.Second
	ctx := context.Background()
	r, err := NewRuntime(Config{Clock: clock.RealClock{}, StateDir: b.TempDir(), Isolation: iso})
	if err != nil {
		b.Fatal(err)
	}
	benchSandboxBinary(b, r)
	defer r.Close()
	logDir := b.TempDir()
	if _, err := r.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}}); err != nil {
		b.Fatal(err)
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()
	started := time.Now()
	for i := range n {
		name := fmt.Sprintf("ticker-%d", i)
		sb, err := r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "bench", Uid: name}, LogDirectory: filepath.Join(logDir, name)}})
		if err != nil {
			b.Fatal(err)
		}
		c, err := r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "tick"}, Image: &runtimeapi.ImageSpec{Image: "busybox"}, LogPath: "tick/0.log",
			Command: []string{"sh", "-c", "while true; do echo tick; sleep 1; done"}}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
			b.Fatal(err)
		}
	}
	perSecond := float64(n) / time.Since(started).Seconds()
	time.Sleep(2 * time.Second) // let every script reach its loop
	b.ResetTimer()
	var cpu time.Duration
	for range b.N {
		start, t0 := cpuTime()+sandboxCPU(), time.Now()
		time.Sleep(window)
		cpu += time.Duration(float64(cpuTime()+sandboxCPU()-start) / time.Since(t0).Seconds())
	}
	b.StopTimer()
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	list, err := r.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil || len(list.Containers) != n {
		b.Fatalf("want %d running containers, got %d (%v)", n, len(list.Containers), err)
	}
	b.ReportMetric(float64(cpu)/float64(b.N)/float64(time.Millisecond)/float64(n), "cpu-ms/s/container")
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1024/float64(n), "heap-KiB/container")
	b.ReportMetric(float64(after.Sys)/1024/1024, "go-sys-MiB")
	b.ReportMetric(float64(runtime.NumGoroutine()-goroutines)/float64(n), "goroutines/container")
	b.ReportMetric(perSecond, "containers-started/s")
	if rss, procs := sandboxRSS(); procs > 0 {
		b.ReportMetric(float64(rss)/1024/float64(n), "sandbox-rss-KiB/container")
		b.ReportMetric(float64(procs), "sandbox-processes")
	}
}

// sandboxCPU is the user and system CPU time of this process's sandbox
// processes, summed.
func sandboxCPU() time.Duration {
	var sum time.Duration
	for _, pid := range sandboxPIDs() {
		sum += childCPU(pid)
	}
	return sum
}

// childCPU is the user and system CPU time of process pid (0: none).
func childCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64) // fields 14 and 15 of the line
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // clock ticks: 100 a second on Linux
}

// childRSS is the resident memory of process pid, in bytes.
func childRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
