package stats

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"mykubelet/mylib/stats/statstest"
)

const (
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	mib     = 1 << 20
	gib     = 1 << 30
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newPod(ns, name string, volumes ...v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name + "-uid")},
		Spec:       v1.PodSpec{Volumes: volumes},
	}
}

// fixture is a provider over a fake runtime, a fake clock at t0 and a
// process that used 1s of CPU and holds 50 MiB.
type fixture struct {
	rt      *statstest.Runtime
	clock   *clocktesting.FakeClock
	pods    []*v1.Pod
	own     ProcessUsage
	root    string
	logs    string
	volumes map[types.UID][]VolumeInfo
	cfg     Config
}

func newFixture(t testing.TB) *fixture {
	f := &fixture{
		rt:      statstest.NewRuntime(),
		clock:   clocktesting.NewFakeClock(t0),
		own:     ProcessUsage{CPUNanoSeconds: 1e9, WorkingSetBytes: 50 * mib, PageFaults: 7, MajorPageFaults: 1},
		root:    t.TempDir(),
		logs:    t.TempDir(),
		volumes: map[types.UID][]VolumeInfo{},
	}
	f.rt.SetNow(t0.UnixNano())
	f.cfg = Config{
		NodeName:         "node-a",
		Runtime:          f.rt,
		Images:           &statstest.Images{Mountpoint: f.root, UsedBytes: 300 * mib, InodesUsed: 4000},
		Pods:             func() []*v1.Pod { return f.pods },
		Volumes:          func(uid types.UID) []VolumeInfo { return f.volumes[uid] },
		RootDirectory:    f.root,
		PodLogsDirectory: f.logs,
		MemoryCapacity:   func() int64 { return gib },
		Clock:            f.clock,
		ProcessUsage:     func() (ProcessUsage, error) { return f.own, nil },
	}
	return f
}

func (f *fixture) provider(t testing.TB) *Provider {
	p, err := NewProvider(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// addPod runs pod in the fake runtime with the containers' figures.
func (f *fixture) addPod(pod *v1.Pod, cs ...statstest.Container) {
	f.pods = append(f.pods, pod)
	for i := range cs {
		if cs[i].State == 0 {
			cs[i].State = running
		}
	}
	f.rt.Add(statstest.Sandbox{Pod: pod, State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: t0.Add(-time.Hour).UnixNano(), Containers: cs, RxBytes: 11, TxBytes: 22, Processes: uint64(len(cs))})
}

func u64(v uint64) *uint64 { return &v }

func val(t *testing.T, what string, p *uint64) uint64 {
	t.Helper()
	if p == nil {
		t.Fatalf("%s: nil", what)
	}
	return *p
}

func wantVal(t *testing.T, what string, p *uint64, want uint64) {
	t.Helper()
	if got := val(t, what, p); got != want {
		t.Errorf("%s = %d, want %d", what, got, want)
	}
}

func TestNewProviderNeedsItsRequiredFields(t *testing.T) {
	f := newFixture(t)
	for name, breakIt := range map[string]func(*Config){
		"NodeName":       func(c *Config) { c.NodeName = "" },
		"Runtime":        func(c *Config) { c.Runtime = nil },
		"Images":         func(c *Config) { c.Images = nil },
		"Pods":           func(c *Config) { c.Pods = nil },
		"MemoryCapacity": func(c *Config) { c.MemoryCapacity = nil },
	} {
		cfg := f.cfg
		breakIt(&cfg)
		if _, err := NewProvider(cfg); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("without %s: err = %v, want one naming it", name, err)
		}
	}
}

func TestGetReportsPodsContainersAndTheNodeAsTheirSumPlusTheKubelet(t *testing.T) {
	f := newFixture(t)
	web := newPod("default", "web")
	f.addPod(web,
		statstest.Container{Name: "app", CPU: 2e9, NanoCores: u64(5e8), WorkingSet: 10 * mib, CreatedAt: t0.Add(-30 * time.Minute).UnixNano()},
		statstest.Container{Name: "sidecar", CPU: 1e9, NanoCores: u64(1e8), WorkingSet: 5 * mib})
	f.addPod(newPod("default", "db"), statstest.Container{Name: "db", CPU: 4e9, NanoCores: u64(2e8), WorkingSet: 100 * mib})
	p := f.provider(t)

	s, err := p.Get(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 2 || s.Pods[0].PodRef.Name != "db" || s.Pods[1].PodRef.Name != "web" {
		t.Fatalf("pods = %+v, want db and web, by name", s.Pods)
	}
	ps := s.Pods[1]
	if ps.PodRef != (statsapi.PodReference{Name: "web", Namespace: "default", UID: "web-uid"}) {
		t.Errorf("PodRef = %+v", ps.PodRef)
	}
	if !ps.StartTime.Time.Equal(t0.Add(-time.Hour)) {
		t.Errorf("pod StartTime = %v, want the sandbox's creation", ps.StartTime)
	}
	if len(ps.Containers) != 2 {
		t.Fatalf("containers = %+v", ps.Containers)
	}
	app := ps.Containers[0]
	if app.Name != "app" || !app.StartTime.Time.Equal(t0.Add(-30*time.Minute)) {
		t.Errorf("app = %s started %v", app.Name, app.StartTime)
	}
	wantVal(t, "app CPU", app.CPU.UsageCoreNanoSeconds, 2e9)
	wantVal(t, "app nanoCores (the runtime's)", app.CPU.UsageNanoCores, 5e8)
	wantVal(t, "app working set", app.Memory.WorkingSetBytes, 10*mib)
	wantVal(t, "pod CPU", ps.CPU.UsageCoreNanoSeconds, 3e9)
	wantVal(t, "pod nanoCores (containers' sum)", ps.CPU.UsageNanoCores, 6e8)
	wantVal(t, "pod working set", ps.Memory.WorkingSetBytes, 15*mib)
	wantVal(t, "pod rx", ps.Network.RxBytes, 11)
	if ps.Network.Name != "eth0" {
		t.Errorf("network interface = %q", ps.Network.Name)
	}
	wantVal(t, "pod processes", ps.ProcessStats.ProcessCount, 2)

	n := s.Node
	if n.NodeName != "node-a" {
		t.Errorf("NodeName = %q", n.NodeName)
	}
	// pods 7s + kubelet 1s; 115 MiB + 50 MiB.
	wantVal(t, "node CPU", n.CPU.UsageCoreNanoSeconds, 8e9)
	wantVal(t, "node working set", n.Memory.WorkingSetBytes, 165*mib)
	wantVal(t, "node available", n.Memory.AvailableBytes, gib-165*mib)
	if !n.CPU.Time.Time.Equal(t0) {
		t.Errorf("node CPU time = %v, want the clock's", n.CPU.Time)
	}
	sys := map[string]statsapi.ContainerStats{}
	for _, c := range n.SystemContainers {
		sys[c.Name] = c
	}
	k, ok := sys[statsapi.SystemContainerKubelet]
	if !ok {
		t.Fatalf("no kubelet system container in %+v", n.SystemContainers)
	}
	wantVal(t, "kubelet CPU", k.CPU.UsageCoreNanoSeconds, 1e9)
	wantVal(t, "kubelet working set", k.Memory.WorkingSetBytes, 50*mib)
	if !k.StartTime.Time.Equal(t0) {
		t.Errorf("kubelet StartTime = %v, want the provider's creation", k.StartTime)
	}
	wantVal(t, "pods CPU", sys[statsapi.SystemContainerPods].CPU.UsageCoreNanoSeconds, 7e9)
	wantVal(t, "pods working set", sys[statsapi.SystemContainerPods].Memory.WorkingSetBytes, 115*mib)

	if n.Fs == nil || val(t, "nodefs capacity", n.Fs.CapacityBytes) == 0 || n.Fs.UsedBytes == nil || n.Fs.InodesUsed == nil {
		t.Errorf("node Fs = %+v, want the root directory's filesystem", n.Fs)
	}
	img := n.Runtime.ImageFs
	wantVal(t, "imagefs used", img.UsedBytes, 300*mib)
	wantVal(t, "imagefs inodes used", img.InodesUsed, 4000)
	if img.CapacityBytes == nil || *img.CapacityBytes != *n.Fs.CapacityBytes {
		t.Errorf("imagefs capacity = %v, want its mountpoint's filesystem's (%d)", img.CapacityBytes, *n.Fs.CapacityBytes)
	}
	if n.Rlimit == nil || n.Rlimit.MaxPID == nil {
		t.Errorf("Rlimit = %+v, want pid_max", n.Rlimit)
	}
}

func TestTheKubeletIsWhatIsLeftOfTheProcessWhenThePodsRunInIt(t *testing.T) {
	f := newFixture(t)
	f.cfg.PodsInProcess = true
	f.own = ProcessUsage{CPUNanoSeconds: 10e9, WorkingSetBytes: 200 * mib}
	f.addPod(newPod("default", "busy"), statstest.Container{Name: "loop", CPU: 6e9, WorkingSet: 30 * mib})
	s, err := f.provider(t).GetCPUAndMemoryStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wantVal(t, "node CPU (the process's, the pod once)", s.Node.CPU.UsageCoreNanoSeconds, 10e9)
	wantVal(t, "node working set", s.Node.Memory.WorkingSetBytes, 200*mib)
	for _, c := range s.Node.SystemContainers {
		if c.Name == statsapi.SystemContainerKubelet {
			wantVal(t, "kubelet CPU", c.CPU.UsageCoreNanoSeconds, 4e9)
			wantVal(t, "kubelet working set", c.Memory.WorkingSetBytes, 170*mib)
		}
	}
}

func TestUsageNanoCoresComesFromTheCachedReadingWhenTheRuntimeGivesNone(t *testing.T) {
	f := newFixture(t)
	pod := newPod("default", "burner")
	f.addPod(pod, statstest.Container{Name: "loop", CPU: 1e9})
	p := f.provider(t)
	ctx := context.Background()
	nanoCores := func(s *statsapi.Summary) *uint64 { return s.Pods[0].Containers[0].CPU.UsageNanoCores }

	s, err := p.Get(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if nanoCores(s) != nil {
		t.Fatalf("first reading: nanoCores = %d, want none", *nanoCores(s))
	}
	// 1.5s of CPU in 2s: 750 millicores.
	f.clock.Step(2 * time.Second)
	f.rt.SetNow(f.clock.Now().UnixNano())
	f.rt.Update("sandbox-burner-uid", func(s *statstest.Sandbox) { s.Containers[0].CPU = 2.5e9 })
	s, err = p.Get(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	wantVal(t, "nanoCores", nanoCores(s), 750_000_000)
	wantVal(t, "pod nanoCores", s.Pods[0].CPU.UsageNanoCores, 750_000_000)

	// Without updateStats, and on /metrics/resource's path, the cached
	// rate is read, not recomputed.
	f.clock.Step(2 * time.Second)
	f.rt.SetNow(f.clock.Now().UnixNano())
	f.rt.Update("sandbox-burner-uid", func(s *statstest.Sandbox) { s.Containers[0].CPU = 2.5e9 })
	s, err = p.Get(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	wantVal(t, "nanoCores without update", nanoCores(s), 750_000_000)
	cm, err := p.GetCPUAndMemoryStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantVal(t, "nanoCores in GetCPUAndMemoryStats", cm.Pods[0].Containers[0].CPU.UsageNanoCores, 750_000_000)

	// A restarted container's figure goes back: no rate until the next.
	f.rt.Update("sandbox-burner-uid", func(s *statstest.Sandbox) { s.Containers[0].CPU = 1e8 })
	s, err = p.Get(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if nanoCores(s) != nil {
		t.Errorf("after the figure went back: nanoCores = %d, want none", *nanoCores(s))
	}
}

func TestCachedReadingsAreForgottenAfterTenMinutes(t *testing.T) {
	f := newFixture(t)
	f.addPod(newPod("default", "a"), statstest.Container{Name: "c", CPU: 1e9})
	p := f.provider(t)
	if _, err := p.Get(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if len(p.cpuUsageCache) != 1 {
		t.Fatalf("cache = %v, want the container's reading", p.cpuUsageCache)
	}
	f.rt.SetError(nil)
	f.pods = nil // the pod is gone; its reading stays until it is old
	f.clock.Step(defaultCachePeriod)
	if _, err := p.Get(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if len(p.cpuUsageCache) != 1 {
		t.Fatalf("at 10m: cache = %v, want it kept", p.cpuUsageCache)
	}
	f.clock.Step(time.Second)
	if _, err := p.Get(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if len(p.cpuUsageCache) != 0 {
		t.Errorf("past 10m: cache = %v, want it empty", p.cpuUsageCache)
	}
}

func TestOnlyRunningContainersOfTheKubeletsPodsLatestSandboxesCount(t *testing.T) {
	f := newFixture(t)
	pod := newPod("default", "web")
	f.pods = append(f.pods, pod)
	// An older, stopped sandbox of the same pod, and the ready one.
	f.rt.Add(statstest.Sandbox{ID: "old", Pod: pod, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, CreatedAt: 1,
		Containers: []statstest.Container{{Name: "app", State: runtimeapi.ContainerState_CONTAINER_EXITED, CPU: 9e9}}})
	f.rt.Add(statstest.Sandbox{ID: "new", Pod: pod, State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: 2,
		Containers: []statstest.Container{
			{Name: "app", State: running, CPU: 1e9},
			{Name: "init", State: runtimeapi.ContainerState_CONTAINER_EXITED, CPU: 3e9},
		}})
	// Another kubelet's pod in the same runtime.
	f.rt.Add(statstest.Sandbox{Pod: newPod("default", "elsewhere"), State: runtimeapi.PodSandboxState_SANDBOX_READY,
		Containers: []statstest.Container{{Name: "x", State: running, CPU: 5e9}}})

	for name, get := range map[string]func(context.Context) (*statsapi.Summary, error){
		"Get":                  func(ctx context.Context) (*statsapi.Summary, error) { return f.provider(t).Get(ctx, false) },
		"GetCPUAndMemoryStats": f.provider(t).GetCPUAndMemoryStats,
	} {
		s, err := get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Pods) != 1 || len(s.Pods[0].Containers) != 1 || s.Pods[0].Containers[0].Name != "app" {
			t.Fatalf("%s: pods = %+v, want web with app only", name, s.Pods)
		}
		wantVal(t, name+": app CPU", s.Pods[0].Containers[0].CPU.UsageCoreNanoSeconds, 1e9)
		wantVal(t, name+": node CPU", s.Node.CPU.UsageCoreNanoSeconds, 4e9 /* the sandbox's own sum (app, init) */ +1e9 /* kubelet */)
	}
}

func writeFile(t testing.TB, path string, n int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestVolumesLogsAndEphemeralStorage(t *testing.T) {
	f := newFixture(t)
	pod := newPod("shop", "cart",
		v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "cart-data"}}})
	scratch, data := filepath.Join(f.root, "pods", "cart-uid", "volumes", "scratch"), t.TempDir()
	writeFile(t, filepath.Join(scratch, "a"), 100_000)
	writeFile(t, filepath.Join(scratch, "sub", "b"), 50_000)
	writeFile(t, filepath.Join(data, "big"), 1_000_000)
	f.volumes[pod.UID] = []VolumeInfo{{Name: "data", Path: data}, {Name: "scratch", Path: scratch}}
	logDir := filepath.Join(f.logs, "shop_cart_cart-uid", "app")
	writeFile(t, filepath.Join(logDir, "0.log"), 20_000)
	writeFile(t, filepath.Join(logDir, "1.log"), 20_000)
	writeFile(t, filepath.Join(f.root, "pods", "cart-uid", "etc-hosts"), 200)
	f.addPod(pod, statstest.Container{Name: "app", CPU: 1, Rootfs: f.root, RootfsBytes: 7_000, RootfsInodes: 3})

	s, err := f.provider(t).Get(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	ps := s.Pods[0]
	if len(ps.VolumeStats) != 2 || ps.VolumeStats[0].Name != "scratch" || ps.VolumeStats[1].Name != "data" {
		t.Fatalf("volumes = %+v, want scratch (ephemeral) then data", ps.VolumeStats)
	}
	sv, dv := ps.VolumeStats[0], ps.VolumeStats[1]
	scratchBytes := val(t, "scratch used", sv.UsedBytes)
	if scratchBytes < 150_000 || scratchBytes > 150_000+64<<10 {
		t.Errorf("scratch used = %d, want its 150000 bytes in blocks", scratchBytes)
	}
	wantVal(t, "scratch inodes (dir, a, sub, b)", sv.InodesUsed, 4)
	if sv.PVCRef != nil || dv.PVCRef == nil || *dv.PVCRef != (statsapi.PVCReference{Name: "cart-data", Namespace: "shop"}) {
		t.Errorf("PVCRefs = %v, %v", sv.PVCRef, dv.PVCRef)
	}
	if sv.CapacityBytes == nil || sv.AvailableBytes == nil || sv.Inodes == nil {
		t.Errorf("scratch has no capacity: %+v", sv.FsStats)
	}

	c := ps.Containers[0]
	wantVal(t, "rootfs used", c.Rootfs.UsedBytes, 7_000)
	if c.Rootfs.CapacityBytes == nil {
		t.Error("rootfs has no capacity")
	}
	logBytes := val(t, "logs used", c.Logs.UsedBytes)
	if logBytes < 40_000 || logBytes > 40_000+64<<10 {
		t.Errorf("logs used = %d, want its 40000 bytes", logBytes)
	}
	wantVal(t, "logs inodes", c.Logs.InodesUsed, 2)

	// Ephemeral: writable layer, logs, the emptyDir, etc-hosts; not the PVC.
	eph := val(t, "ephemeral used", ps.EphemeralStorage.UsedBytes)
	etcHosts, _, err := du(filepath.Join(f.root, "pods", "cart-uid", "etc-hosts"))
	if err != nil {
		t.Fatal(err)
	}
	if want := 7_000 + logBytes + scratchBytes + etcHosts; eph != want {
		t.Errorf("ephemeral used = %d, want %d", eph, want)
	}
	wantVal(t, "ephemeral inodes", ps.EphemeralStorage.InodesUsed, 3+2+4+1)
}

func TestRuntimeErrorsFailTheSummary(t *testing.T) {
	f := newFixture(t)
	f.addPod(newPod("default", "a"), statstest.Container{Name: "c"})
	f.rt.SetError(status.Error(codes.Unavailable, "runtime down")) // not there: the summary fails, as upstream
	p := f.provider(t)
	if _, err := p.Get(context.Background(), false); err == nil || !strings.Contains(err.Error(), "runtime down") {
		t.Errorf("Get: err = %v", err)
	}
	if _, err := p.GetCPUAndMemoryStats(context.Background()); err == nil || !strings.Contains(err.Error(), "runtime down") {
		t.Errorf("GetCPUAndMemoryStats: err = %v", err)
	}
}

func TestTheKubeletsCPURateIsMeasuredBetweenReadings(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t)
	ctx := context.Background()
	if _, err := p.GetCPUAndMemoryStats(ctx); err != nil {
		t.Fatal(err)
	}
	f.own.CPUNanoSeconds += 5e8
	f.clock.Step(time.Second)
	s, err := p.GetCPUAndMemoryStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantVal(t, "node nanoCores", s.Node.CPU.UsageNanoCores, 5e8)
}

func TestTheRealProcessUsageIsReadable(t *testing.T) {
	u, err := readProcessUsage()
	if err != nil {
		t.Fatal(err)
	}
	if u.WorkingSetBytes == 0 {
		t.Errorf("usage = %+v, want a resident set", u)
	}
	if _, err := bootTime(); err != nil {
		t.Error(err)
	}
}

func TestVolumesFromMapSortsByName(t *testing.T) {
	got := VolumesFromMap(func(types.UID) map[string]string { return map[string]string{"b": "/x/b", "a": "/x/a"} })("u")
	if len(got) != 2 || got[0] != (VolumeInfo{"a", "/x/a"}) || got[1] != (VolumeInfo{"b", "/x/b"}) {
		t.Errorf("got %v", got)
	}
}

func TestScrapesMayRunTogether(t *testing.T) {
	f := newFixture(t)
	for i := range 5 {
		f.addPod(newPod("default", fmt.Sprintf("p%d", i)), statstest.Container{Name: "c", CPU: uint64(i) * 1e9})
	}
	p := f.provider(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			switch i % 3 {
			case 0:
				_, err = p.Get(ctx, true)
			case 1:
				_, err = p.Get(ctx, false)
			default:
				_, err = p.GetCPUAndMemoryStats(ctx)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
