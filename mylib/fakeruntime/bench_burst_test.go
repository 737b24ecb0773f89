package fakeruntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// BenchmarkSandboxBurst starts a burst of 100 pods at once, each one
// container running `sleep 3600`, as root (the sandbox process), and
// reports how long the burst took to have every container running, the
// time of one pod's start alone (RunPodSandbox to its container running,
// before the burst), and the resident memory of the sandbox processes,
// summed and per pod.
//
//	go test -run '^$' -bench BenchmarkSandboxBurst -benchtime 1x ./mylib/fakeruntime/
//
// MYKUBELET_BENCH_SANDBOX=self starts the sandbox processes from the test
// binary, as a runtime without the go toolchain does (benchSandboxBinary).
func BenchmarkSandboxBurst(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the sandbox process needs root")
	}
	const n = 100
	ctx := context.Background()
	for range b.N {
		r, err := NewRuntime(Config{Clock: clock.RealClock{}, StateDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		benchSandboxBinary(b, r)
		if _, err := r.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}}); err != nil {
			b.Fatal(err)
		}
		logDir := b.TempDir()
		startPod := func(name string) string {
			sb, err := r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
				Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "bench", Uid: name}, LogDirectory: filepath.Join(logDir, name)}})
			if err != nil {
				b.Error(err)
				return ""
			}
			c, err := r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: "sleep"}, Image: &runtimeapi.ImageSpec{Image: "busybox"}, LogPath: "sleep/0.log",
				Command: []string{"sh", "-c", "echo up; sleep 3600"}}})
			if err != nil {
				b.Error(err)
				return ""
			}
			if _, err := r.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
				b.Error(err)
				return ""
			}
			return c.ContainerId
		}
		t0 := time.Now()
		first := startPod("first")
		waitLogged(b, r, first)
		one := time.Since(t0)

		b.ResetTimer()
		t0 = time.Now()
		ids := make(chan string, n)
		for i := range n {
			go func() { ids <- startPod(fmt.Sprintf("burst-%d", i)) }()
		}
		for range n {
			if id := <-ids; id != "" {
				waitLogged(b, r, id)
			}
		}
		burst := time.Since(t0)
		b.StopTimer()
		rss, procs := sandboxRSS()
		pss, anon := sandboxPSS()
		b.ReportMetric(float64(one)/float64(time.Millisecond), "ms-one-pod")
		b.ReportMetric(float64(burst)/float64(time.Millisecond), "ms-burst-of-100")
		b.ReportMetric(float64(procs), "sandbox-processes")
		b.ReportMetric(float64(rss)/1024/1024, "sandbox-rss-MiB")
		b.ReportMetric(float64(rss)/1024/(n+1), "sandbox-rss-KiB/pod")
		b.ReportMetric(float64(pss)/1024/(n+1), "sandbox-pss-KiB/pod")
		b.ReportMetric(float64(anon)/1024/(n+1), "sandbox-anon-KiB/pod")
		_ = r.Close()
	}
}

// waitLogged waits until container id has written its first line.
func waitLogged(b *testing.B, r *Runtime, id string) {
	r.mu.Lock()
	path := r.containers[id].logPath
	r.mu.Unlock()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), "up") {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.Fatalf("container %s wrote nothing in 2 minutes", id)
}

// sandboxRSS is the resident memory of this process's sandbox processes,
// summed, and how many there are.
func sandboxRSS() (int64, int) {
	pids := sandboxPIDs()
	var sum int64
	for _, pid := range pids {
		sum += childRSS(pid)
	}
	return sum, len(pids)
}

// sandboxPSS is the proportional set size of this process's sandbox
// processes (their shared pages, the binary's text, divided among them)
// and their anonymous memory, summed, in bytes.
func sandboxPSS() (pss, anon int64) {
	for _, pid := range sandboxPIDs() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "Pss:":
				pss += kb * 1024
			case "Anonymous:":
				anon += kb * 1024
			}
		}
	}
	return pss, anon
}

// sandboxPIDs are the process IDs of this process's sandbox processes.
func sandboxPIDs() []int {
	entries, _ := os.ReadDir("/proc")
	self := strconv.Itoa(os.Getpid())
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if string(cmd) != "mykubelet-sandbox\x00" || !strings.Contains(string(status), "\nPPid:\t"+self+"\n") {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// benchSandboxBinary makes r start its sandbox processes from this test
// binary when MYKUBELET_BENCH_SANDBOX is "self" (the fallback of
// sandboxproc_binary.go), to compare with the small binary.
func benchSandboxBinary(b *testing.B, r *Runtime) {
	if os.Getenv("MYKUBELET_BENCH_SANDBOX") != "self" || r.sandbox == nil {
		return
	}
	exe, err := openExe("/proc/self/exe")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { exe.Close() })
	r.sandbox.exe = exe
}
