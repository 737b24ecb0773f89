package stats

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"mykubelet/mylib/cadvisor"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
)

// TestTheMockRuntimesFiguresReachTheSummary reads the seeded mock runtime
// over its CRI socket, as the kubelet does: each pod's containers carry the
// figures the runtime answers for them.
func TestTheMockRuntimesFiguresReachTheSummary(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	rt := fakeruntime.New(clk)
	if err := rt.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("unix://"+fakeruntimetest.Serve(t, rt), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rs, is := runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)

	var pods []*v1.Pod
	for _, sp := range fakeruntime.SeedPods {
		pods = append(pods, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: sp.Name, Namespace: sp.Namespace, UID: types.UID(sp.UID)}})
	}
	p, err := NewProvider(Config{NodeName: "node-a", Runtime: rs, Images: is, Pods: func() []*v1.Pod { return pods },
		RootDirectory: t.TempDir(), PodLogsDirectory: t.TempDir(), MemoryCapacity: func() int64 { return gib }, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	// The runtime's own answers just before and just after the summary
	// bound what the summary may say (a live figure moves between reads).
	runtimeStats := func() map[string]*runtimeapi.ContainerStats {
		resp, err := rs.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*runtimeapi.ContainerStats{}
		for _, st := range resp.Stats {
			out[st.Attributes.Labels["io.kubernetes.pod.uid"]] = st
		}
		return out
	}
	before := runtimeStats()
	s, err := p.Get(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	after := runtimeStats()
	if len(s.Pods) != len(pods) {
		t.Fatalf("pods = %d, want the %d seeded", len(s.Pods), len(pods))
	}
	between := func(what string, got *uint64, lo, hi *runtimeapi.UInt64Value) {
		t.Helper()
		if got == nil || *got < lo.GetValue() || *got > hi.GetValue() {
			t.Errorf("%s = %v, want the runtime's, in [%d, %d]", what, got, lo.GetValue(), hi.GetValue())
		}
	}
	for _, ps := range s.Pods {
		if len(ps.Containers) != 1 {
			t.Fatalf("%s: containers = %+v", ps.PodRef.Name, ps.Containers)
		}
		c := ps.Containers[0]
		lo, hi := before[ps.PodRef.UID], after[ps.PodRef.UID]
		if lo == nil || hi == nil || c.Name != lo.Attributes.Metadata.Name {
			t.Fatalf("%s: container %q, runtime's %v", ps.PodRef.Name, c.Name, lo)
		}
		between(ps.PodRef.Name+" CPU", c.CPU.UsageCoreNanoSeconds, lo.Cpu.UsageCoreNanoSeconds, hi.Cpu.UsageCoreNanoSeconds)
		if c.Memory == nil || c.Memory.WorkingSetBytes == nil {
			t.Errorf("%s: no working set", ps.PodRef.Name)
		} else if ws, a, b := *c.Memory.WorkingSetBytes, lo.Memory.WorkingSetBytes.GetValue(), hi.Memory.WorkingSetBytes.GetValue(); ws != a && ws != b {
			t.Errorf("%s: working set %d, want the runtime's (%d or %d)", ps.PodRef.Name, ws, a, b)
		}
		if c.Rootfs == nil || c.Rootfs.CapacityBytes == nil {
			t.Errorf("%s: rootfs %+v, want its directory's filesystem", ps.PodRef.Name, c.Rootfs)
		}
		if ps.Network == nil || ps.CPU == nil || ps.Memory == nil || ps.EphemeralStorage == nil {
			t.Errorf("%s: pod figures missing: %+v", ps.PodRef.Name, ps)
		}
	}
	if s.Node.Runtime.ImageFs.UsedBytes == nil || *s.Node.Runtime.ImageFs.UsedBytes == 0 {
		t.Errorf("imagefs = %+v, want the seeded images' bytes", s.Node.Runtime.ImageFs)
	}
}

// TestAGrowingPodFillsTheMockMachinesMemory: the e2e tests' memory hog
// (agnhost stress) in the mock runtime, read over its CRI socket by a
// provider with a mock machine of 100 MiB: the node's available memory
// goes down one step at a time, as the eviction manager would see it.
func TestAGrowingPodFillsTheMockMachinesMemory(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	rt := fakeruntime.New(clk)
	t.Cleanup(func() { rt.Close() })
	hog := fakeruntime.SeedPod{Namespace: "default", Name: "hog", UID: "uid-hog", Container: "hog",
		Image:   "registry.k8s.io/e2e-test-images/agnhost:2.53",
		Command: []string{"/agnhost", "stress", "--mem-alloc-size", "20Mi", "--mem-alloc-sleep", "10s", "--mem-total", "1Gi"}}
	if err := rt.RunPod(ctx, hog); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("unix://"+fakeruntimetest.Serve(t, rt), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	pods := []*v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: hog.Name, Namespace: hog.Namespace, UID: types.UID(hog.UID)}}}
	p, err := NewProvider(Config{NodeName: "node-a", Runtime: runtimeapi.NewRuntimeServiceClient(conn), Images: runtimeapi.NewImageServiceClient(conn),
		Pods: func() []*v1.Pod { return pods }, RootDirectory: t.TempDir(), PodLogsDirectory: t.TempDir(),
		MemoryCapacity: func() int64 { return 64 * gib }, Clock: clk,
		MockMachine: cadvisor.MockMachine{MemoryCapacity: 100 * mib}})
	if err != nil {
		t.Fatal(err)
	}
	available := func() uint64 {
		s, err := p.Get(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		return val(t, "available", s.Node.Memory.AvailableBytes)
	}
	for step := uint64(1); step <= 6; step++ {
		// Each step: 20 MiB more, less the hog's few bytes of variables.
		want := sub(100*mib, step*20*mib)
		deadline := time.Now().Add(30 * time.Second)
		for got := available(); got > want || (step < 6 && !clk.HasWaiters()); got = available() {
			if time.Now().After(deadline) {
				t.Fatalf("step %d: available %d, want at most %d and the hog waiting", step, got, want)
			}
			time.Sleep(time.Millisecond)
		}
		if got := available(); got+mib < want {
			t.Fatalf("step %d: available %d, want about %d", step, got, want)
		}
		clk.Step(10 * time.Second)
	}
}

// BenchmarkGet110PodsOverTheMockRuntime is /stats/summary of 110 pods of
// the mock runtime, over its CRI socket: what a scrape costs the kubelet
// and the runtime together (the runtime walks each writable layer).
func BenchmarkGet110PodsOverTheMockRuntime(b *testing.B) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	rt := fakeruntime.New(clk)
	b.Cleanup(func() { rt.Close() })
	var pods []*v1.Pod
	for i := range 110 {
		sp := fakeruntime.SeedPod{Namespace: "default", Name: fmt.Sprintf("pod-%03d", i), UID: fmt.Sprintf("uid-%03d", i),
			Container: "app", Image: "docker.io/library/busybox:1.36", Command: []string{"sh", "-c", "while true; do sleep 10; done"}}
		if err := rt.RunPod(ctx, sp); err != nil {
			b.Fatal(err)
		}
		pods = append(pods, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: sp.Name, Namespace: sp.Namespace, UID: types.UID(sp.UID)}})
	}
	conn, err := grpc.NewClient("unix://"+fakeruntimetest.Serve(b, rt), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	p, err := NewProvider(Config{NodeName: "node-a", Runtime: runtimeapi.NewRuntimeServiceClient(conn), Images: runtimeapi.NewImageServiceClient(conn),
		Pods: func() []*v1.Pod { return pods }, RootDirectory: b.TempDir(), PodLogsDirectory: b.TempDir(),
		MemoryCapacity: func() int64 { return gib }, Clock: clk})
	if err != nil {
		b.Fatal(err)
	}
	for _, get := range []struct {
		name string
		f    func() (int, error)
	}{
		{"Get", func() (int, error) { s, err := p.Get(ctx, false); return len(s.Pods), err }},
		{"GetCPUAndMemoryStats", func() (int, error) { s, err := p.GetCPUAndMemoryStats(ctx); return len(s.Pods), err }},
	} {
		b.Run(get.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if n, err := get.f(); err != nil || n != 110 {
					b.Fatal(n, err)
				}
			}
		})
	}
}
