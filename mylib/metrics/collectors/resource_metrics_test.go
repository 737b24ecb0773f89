package collectors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"mykubelet/mylib/stats"
	"mykubelet/mylib/stats/statstest"
)

var (
	t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 = t0.Add(-10 * time.Minute)
)

// fakeSummary answers a fixed summary, or err.
type fakeSummary struct {
	s   *statsapi.Summary
	err error
}

func (f fakeSummary) GetCPUAndMemoryStats(context.Context) (*statsapi.Summary, error) {
	return f.s, f.err
}

func u64(v uint64) *uint64 { return &v }

func summary() *statsapi.Summary {
	at := metav1.NewTime(t0)
	return &statsapi.Summary{
		Node: statsapi.NodeStats{
			NodeName: "node-a",
			CPU:      &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: u64(12_500_000_000)},
			Memory:   &statsapi.MemoryStats{Time: at, WorkingSetBytes: u64(1 << 30)},
		},
		Pods: []statsapi.PodStats{{
			PodRef: statsapi.PodReference{Name: "web", Namespace: "default", UID: "web-uid"},
			CPU:    &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: u64(3_000_000_000)},
			Memory: &statsapi.MemoryStats{Time: at, WorkingSetBytes: u64(15 << 20)},
			Containers: []statsapi.ContainerStats{
				{Name: "app", StartTime: metav1.NewTime(t1),
					CPU:    &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: u64(2_000_000_000)},
					Memory: &statsapi.MemoryStats{Time: at, WorkingSetBytes: u64(10 << 20)}},
				// No figures and no start time: no series.
				{Name: "starting"},
			},
		}},
	}
}

func TestCollectsUpstreamsSeriesWithTheirTimestamps(t *testing.T) {
	ms := t0.UnixMilli()
	want := fmt.Sprintf(`
# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 2 %[1]d
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 1.048576e+07 %[1]d
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="app",namespace="default",pod="web"} %[2]d
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 12.5 %[1]d
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 1.073741824e+09 %[1]d
# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="default",pod="web"} 3 %[1]d
# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace="default",pod="web"} 1.572864e+07 %[1]d
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
# HELP scrape_error [ALPHA] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE scrape_error gauge
scrape_error 0
`, ms, t1.Unix())
	names := []string{"node_cpu_usage_seconds_total", "node_memory_working_set_bytes", "node_swap_usage_bytes",
		"container_cpu_usage_seconds_total", "container_memory_working_set_bytes", "container_start_time_seconds",
		"container_swap_usage_bytes", "pod_cpu_usage_seconds_total", "pod_memory_working_set_bytes", "pod_swap_usage_bytes",
		"scrape_error", "resource_scrape_error"}
	if err := testutil.CustomCollectAndCompare(NewResourceMetricsCollector(fakeSummary{s: summary()}), strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
}

func TestAFailedSummaryIsAScrapeErrorAndNoSeries(t *testing.T) {
	want := `
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 1
# HELP scrape_error [ALPHA] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE scrape_error gauge
scrape_error 1
`
	c := NewResourceMetricsCollector(fakeSummary{err: errors.New("runtime down")})
	if err := testutil.CustomCollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

func scrape(t testing.TB, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics/resource", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func TestEachHandlerHasARegistryOfItsOwn(t *testing.T) {
	// Two kubelets in one process: a shared (legacy) registry would
	// panic on the second registration, or mix the two nodes' series.
	a := NewResourceMetricsHandler(fakeSummary{s: summary()})
	b := NewResourceMetricsHandler(fakeSummary{err: errors.New("down")})
	outA, outB := scrape(t, a), scrape(t, b)
	if !strings.Contains(outA, "node_cpu_usage_seconds_total 12.5 ") || !strings.Contains(outA, "\nresource_scrape_error 0\n") {
		t.Errorf("first handler:\n%s", outA)
	}
	if strings.Contains(outB, "node_cpu_usage_seconds_total") || !strings.Contains(outB, "\nresource_scrape_error 1\n") {
		t.Errorf("second handler:\n%s", outB)
	}
}

// TestTheHandlerReadsTheProviderOverTheRuntime is the whole path: the
// fake runtime's figures, through stats.Provider, to the text a scraper
// reads.
func TestTheHandlerReadsTheProviderOverTheRuntime(t *testing.T) {
	p, _ := benchProvider(t, 1)
	out := scrape(t, NewResourceMetricsHandler(p))
	for _, want := range []string{
		`container_cpu_usage_seconds_total{container="app",namespace="default",pod="pod-000"} 2.5 `,
		`pod_memory_working_set_bytes{namespace="default",pod="pod-000"} 2.097152e+07 `,
		`container_start_time_seconds{container="app",namespace="default",pod="pod-000"} ` + strconv.FormatFloat(float64(t1.Unix()), 'g', -1, 64),
		"node_cpu_usage_seconds_total 3.5 ", // 2.5s of the pod + 1s of the kubelet
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

// benchProvider is a provider over a fake runtime running n pods of one
// container each (2.5s of CPU, 20 MiB), with an emptyDir and a log file.
func benchProvider(t testing.TB, n int) (*stats.Provider, *statstest.Runtime) {
	rt := statstest.NewRuntime()
	rt.SetNow(t0.UnixNano())
	root, logs := t.TempDir(), t.TempDir()
	var pods []*v1.Pod
	for i := range n {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("pod-%03d", i), UID: types.UID(fmt.Sprintf("uid-%03d", i))}}
		pods = append(pods, pod)
		rt.Add(statstest.Sandbox{Pod: pod, State: runtimeapi.PodSandboxState_SANDBOX_READY, Containers: []statstest.Container{{
			Name: "app", State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: t1.UnixNano(),
			CPU: 2_500_000_000, WorkingSet: 20 << 20, Rootfs: root, RootfsBytes: 4096, RootfsInodes: 1,
		}}})
	}
	p, err := stats.NewProvider(stats.Config{
		NodeName: "node-a", Runtime: rt, Images: &statstest.Images{Mountpoint: root},
		Pods: func() []*v1.Pod { return pods }, RootDirectory: root, PodLogsDirectory: logs,
		MemoryCapacity: func() int64 { return 8 << 30 }, Clock: clocktesting.NewFakeClock(t0),
		ProcessUsage: func() (stats.ProcessUsage, error) {
			return stats.ProcessUsage{CPUNanoSeconds: 1e9, WorkingSetBytes: 64 << 20}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p, rt
}

// BenchmarkResourceMetricsScrape110Pods is one /metrics/resource scrape
// of a node at the default max-pods (110).
func BenchmarkResourceMetricsScrape110Pods(b *testing.B) {
	p, _ := benchProvider(b, 110)
	h := NewResourceMetricsHandler(p)
	req := httptest.NewRequest(http.MethodGet, "/metrics/resource", nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
	}
}

// stats.Provider is what the resource handler reads.
var _ SummaryProvider = (*stats.Provider)(nil)
