package metrics

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

// scrape is what a Prometheus server reads from h.
func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

func TestNilMetricsRecordsNothingAndServes404(t *testing.T) {
	var m *Metrics
	m.SetNodeName("n")
	m.ObservePodWorkerDuration("sync", time.Second)
	m.ObservePLEGRelist(time.Second, time.Second)
	m.SetRunningPodsAndContainers(1, map[string]int{"running": 1})
	m.RecordRuntimeOperation("version", time.Time{}, errors.New("x"))
	m.StartedPod(nil)
	m.StartedContainer(Container, nil)
	m.RecordProbe(ProbeLabels{}, ProbeResultSuccessful, time.Second)
	m.ObservedPodOnWatch(&v1.Pod{}, time.Time{})
	m.RecordStatusUpdated(&v1.Pod{})
	m.DeletePodStartupState("uid")
	if m.Gatherer() != nil || m.ProbeGatherer() != nil {
		t.Error("a nil Metrics has no registry")
	}
	for _, h := range []http.Handler{m.Handler(), m.ProbeHandler()} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("nil Metrics: got %d, want 404", rec.Code)
		}
	}
}

func TestHandlerServesUpstreamNamesHelpAndLabels(t *testing.T) {
	m := NewWithClock(clocktesting.NewFakeClock(time.Unix(1000, 0)))
	m.SetNodeName("node-a")
	m.SetRunningPodsAndContainers(2, map[string]int{"running": 3, "exited": 1})
	m.StartedPod(nil)
	m.StartedPod(errors.New("boom"))
	m.StartedContainer(Container, nil)
	m.StartedContainer(InitContainer, errors.New("CreateContainerError"))
	body := scrape(t, m.Handler())
	for _, want := range []string{
		"# HELP kubelet_node_name [ALPHA] The node's name. The count is always 1.",
		`kubelet_node_name{node="node-a"} 1`,
		"# HELP kubelet_running_pods [ALPHA] Number of pods that have a running pod sandbox",
		"kubelet_running_pods 2",
		`kubelet_running_containers{container_state="running"} 3`,
		`kubelet_running_containers{container_state="exited"} 1`,
		`kubelet_running_containers{container_state="created"} 0`,
		"kubelet_started_pods_total 2",
		"kubelet_started_pods_errors_total 1",
		`kubelet_started_containers_total{container_type="container"} 1`,
		`kubelet_started_containers_total{container_type="init_container"} 1`,
		`kubelet_started_containers_errors_total{code="CreateContainerError",container_type="init_container"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q; got:\n%s", want, body)
		}
	}
	// A state nobody is in any more reads 0, not its last count.
	m.SetRunningPodsAndContainers(0, nil)
	if body := scrape(t, m.Handler()); !strings.Contains(body, `kubelet_running_containers{container_state="running"} 0`+"\n") {
		t.Errorf("running containers not reset to 0:\n%s", body)
	}
}

func TestEachKubeletHasItsOwnRegistry(t *testing.T) {
	a, b := New(), New() // a second registration in one registry would panic
	a.StartedPod(nil)
	if body := scrape(t, b.Handler()); strings.Contains(body, "kubelet_started_pods_total 1") {
		t.Errorf("b shows a's pod:\n%s", body)
	}
}

func TestRuntimeOperationsCountDurationAndErrors(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m := NewWithClock(clk)
	start := m.Now()
	clk.Step(30 * time.Millisecond)
	m.RecordRuntimeOperation("list_podsandbox", start, nil)
	m.RecordRuntimeOperation("list_podsandbox", start, errors.New("unavailable"))
	want := `
# HELP kubelet_runtime_operations_total [ALPHA] Cumulative number of runtime operations by operation type.
# TYPE kubelet_runtime_operations_total counter
kubelet_runtime_operations_total{operation_type="list_podsandbox"} 2
# HELP kubelet_runtime_operations_errors_total [ALPHA] Cumulative number of runtime operation errors by operation type.
# TYPE kubelet_runtime_operations_errors_total counter
kubelet_runtime_operations_errors_total{operation_type="list_podsandbox"} 1
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want),
		"kubelet_runtime_operations_total", "kubelet_runtime_operations_errors_total"); err != nil {
		t.Fatal(err)
	}
	// Upstream's buckets: 5 ms × 2.5^n; 30 ms falls in le=0.03125.
	body := scrape(t, m.Handler())
	for _, want := range []string{
		`kubelet_runtime_operations_duration_seconds_bucket{operation_type="list_podsandbox",le="0.0125"} 0`,
		`kubelet_runtime_operations_duration_seconds_bucket{operation_type="list_podsandbox",le="0.03125"} 2`,
		`kubelet_runtime_operations_duration_seconds_sum{operation_type="list_podsandbox"} 0.06`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

func TestPLEGRelistIntervalNotObservedForTheFirstRelist(t *testing.T) {
	m := NewWithClock(clocktesting.NewFakeClock(time.Unix(1000, 0)))
	m.ObservePLEGRelist(2*time.Millisecond, 0)
	m.ObservePLEGRelist(3*time.Millisecond, time.Second)
	body := scrape(t, m.Handler())
	for _, want := range []string{"kubelet_pleg_relist_duration_seconds_count 2", "kubelet_pleg_relist_interval_seconds_count 1",
		"kubelet_pleg_relist_interval_seconds_sum 1"} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

func TestProbeSeriesOnTheirOwnHandlerAndDeletedWithTheirWorker(t *testing.T) {
	m := NewWithClock(clocktesting.NewFakeClock(time.Unix(1000, 0)))
	l := ProbeLabels{ProbeType: "Readiness", Container: "web", Pod: "web", Namespace: "default", PodUID: "u1"}
	m.RecordProbe(l, ProbeResultSuccessful, 10*time.Millisecond)
	m.RecordProbe(l, ProbeResultFailed, time.Second)
	m.RecordProbe(l, ProbeResultSuccessful, 10*time.Millisecond)
	want := `
# HELP prober_probe_total [BETA] Cumulative number of a liveness, readiness or startup probe for a container by result.
# TYPE prober_probe_total counter
prober_probe_total{container="web",namespace="default",pod="web",pod_uid="u1",probe_type="Readiness",result="failed"} 1
prober_probe_total{container="web",namespace="default",pod="web",pod_uid="u1",probe_type="Readiness",result="successful"} 2
`
	if err := testutil.GatherAndCompare(m.ProbeGatherer(), strings.NewReader(want), "prober_probe_total"); err != nil {
		t.Fatal(err)
	}
	body := scrape(t, m.ProbeHandler())
	if !strings.Contains(body, `prober_probe_duration_seconds_count{container="web",namespace="default",pod="web",probe_type="Readiness"} 2`) {
		t.Errorf("a failed probe's duration is not observed (upstream); got:\n%s", body)
	}
	if strings.Contains(scrape(t, m.Handler()), "prober_") {
		t.Error("probe series leak into /metrics")
	}
	m.DeleteProbe(l)
	if body := scrape(t, m.ProbeHandler()); strings.Contains(body, `pod_uid="u1"`) {
		t.Errorf("series of a stopped worker remain:\n%s", body)
	}
}

func TestPodLabelNameDropsGeneratedSuffixAndTemplateHash(t *testing.T) {
	for _, tc := range []struct {
		pod  v1.Pod
		want string
	}{
		{v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "static-web-node1"}}, "static-web-node1"},
		{v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job-x7k2p", GenerateName: "job-"}}, "job"},
		{v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-6d4cf56db6-x7k2p", GenerateName: "web-6d4cf56db6-",
			Labels: map[string]string{"pod-template-hash": "6d4cf56db6"}}}, "web"},
	} {
		if got := PodLabelName(&tc.pod); got != tc.want {
			t.Errorf("PodLabelName(%s) = %q, want %q", tc.pod.Name, got, tc.want)
		}
	}
}
