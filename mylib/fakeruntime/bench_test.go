package fakeruntime

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
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
func BenchmarkTickers(b *testing.B) {
	const n = 1000
	const window = 5 * time.Second
	ctx := context.Background()
	r, err := NewRuntime(Config{Clock: clock.RealClock{}, StateDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	logDir := b.TempDir()
	if _, err := r.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}}); err != nil {
		b.Fatal(err)
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()
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
	time.Sleep(2 * time.Second) // let every script reach its loop
	b.ResetTimer()
	var cpu time.Duration
	for range b.N {
		start, t0 := cpuTime(), time.Now()
		time.Sleep(window)
		cpu += time.Duration(float64(cpuTime()-start) / time.Since(t0).Seconds())
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
	b.ReportMetric(float64(cpu)/float64(b.N)/float64(time.Millisecond)/n, "cpu-ms/s/container")
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1024/n, "heap-KiB/container")
	b.ReportMetric(float64(after.Sys)/1024/1024, "go-sys-MiB")
	b.ReportMetric(float64(runtime.NumGoroutine()-goroutines)/n, "goroutines/container")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
