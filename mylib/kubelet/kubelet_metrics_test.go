package kubelet

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"

	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/metrics"
)

// scrapeMetrics is what a Prometheus server reads from h.
func scrapeMetrics(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// TestMetricsFollowAPodFromWatchToRunning runs the pod half with Metrics
// on the mock runtime: one pod, added as the API server's watch would,
// runs; the test then hands the kubelet the pod as the API server holds
// it (what the watch delivers after the status write), and the series
// show what happened: the pod start SLI observed once, the running pod and
// container, the sandbox and container started, the CRI calls, the PLEG's
// relists, the pod worker's syncs, and the readiness probes on
// /metrics/probes.
func TestMetricsFollowAPodFromWatchToRunning(t *testing.T) {
	rt := fakeruntime.New(clock.RealClock{})
	crm, err := kuberuntime.Connect(context.Background(), "unix://"+fakeruntimetest.Serve(t, rt), clock.RealClock{})
	require.NoError(t, err)
	t.Cleanup(func() { crm.Close() })
	created := metav1.NewTime(time.Now().Add(-time.Second).Truncate(time.Second))
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web", CreationTimestamp: created,
		Annotations: map[string]string{kubetypes.ConfigFirstSeenAnnotationKey: kubetypes.Timestamp(time.Now())}},
		Spec: v1.PodSpec{NodeName: "n1", RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "c", Image: "busybox",
			Command: []string{"sh", "-c", "sleep 600"}, ReadinessProbe: execProbe("true")}}},
		Status: v1.PodStatus{Phase: v1.PodPending}}
	client := fake.NewClientset(pod.DeepCopy())
	m := metrics.New()
	updates := make(chan kubetypes.PodUpdate, 1)
	kl, err := New(Config{Client: client, NodeName: "n1", Pods: &PodsConfig{
		Updates: updates, RemoteRuntimeService: crm.RuntimeService(), RemoteImageService: crm.ImageService(),
		RelistPeriod: 100 * time.Millisecond, RunContainers: true, Probes: true, PodLogsDirectory: t.TempDir(), Metrics: m}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = kl.RunPods(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{pod}}
	var api *v1.Pod
	require.Eventually(t, func() bool {
		api, err = client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		return len(api.Status.ContainerStatuses) == 1 && api.Status.ContainerStatuses[0].State.Running != nil
	}, 30*time.Second, 20*time.Millisecond, "the pod runs and the API shows it")
	assert.NotContains(t, scrapeMetrics(t, m.Handler()), "kubelet_pod_start_sli_duration_seconds_count 1",
		"not before the watch shows the pod running")

	// What the watch delivers next: the pod with the status just written.
	// (The fake API server gives no resource versions, so an event that
	// comes before the status manager has the patch's answer cannot be
	// matched to the write: events are sent until one comes after it, as
	// a real watch's later events would; see the integration test for
	// the real race.)
	api.Annotations = pod.Annotations
	require.Eventually(t, func() bool {
		select {
		case updates <- kubetypes.PodUpdate{Op: kubetypes.RECONCILE, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{api}}:
		default:
		}
		return strings.Contains(scrapeMetrics(t, m.Handler()), "kubelet_pod_start_sli_duration_seconds_count 1\n")
	}, 10*time.Second, 20*time.Millisecond, "the SLI is observed when the watch shows the pod running")
	updates <- kubetypes.PodUpdate{Op: kubetypes.RECONCILE, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{api}} // once only
	updates <- kubetypes.PodUpdate{Op: kubetypes.RECONCILE, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{api}} // the one before is taken

	require.Eventually(t, func() bool {
		return strings.Contains(scrapeMetrics(t, m.ProbeHandler()),
			`prober_probe_total{container="c",namespace="default",pod="web",pod_uid="uid-web",probe_type="Readiness",result="successful"}`)
	}, 10*time.Second, 20*time.Millisecond, "the readiness probe is counted on /metrics/probes")

	wants := []string{
		`kubelet_node_name{node="n1"} 1`,
		"kubelet_pod_start_sli_duration_seconds_count 1",
		"kubelet_pod_start_total_duration_seconds_count 1",
		"kubelet_pod_start_duration_seconds_count 1",
		"kubelet_running_pods 1",
		`kubelet_running_containers{container_state="running"} 1`,
		"kubelet_started_pods_total 1",
		`kubelet_started_containers_total{container_type="container"} 1`,
		`kubelet_runtime_operations_total{operation_type="run_podsandbox"} 1`,
		`kubelet_runtime_operations_total{operation_type="start_container"} 1`,
		`kubelet_pod_worker_duration_seconds_count{operation_type="create"} 1`,
	}
	// The running gauges follow the PLEG's relists: on a busy machine the
	// scrape can come before the relist that saw the container start.
	var body string
	assert.Eventually(t, func() bool {
		body = scrapeMetrics(t, m.Handler())
		for _, want := range wants {
			if !strings.Contains(body, want+"\n") {
				return false
			}
		}
		return true
	}, 10*time.Second, 50*time.Millisecond, "every series below")
	for _, want := range wants {
		assert.Contains(t, body, want+"\n")
	}
	for _, want := range []string{"kubelet_pleg_relist_duration_seconds_count", `kubelet_runtime_operations_total{operation_type="list_podsandbox"}`,
		`kubelet_runtime_operations_total{operation_type="exec_sync"}`} {
		assert.Contains(t, body, want, "the relists and the exec probes are counted")
	}
	assert.NotContains(t, body, "kubelet_started_pods_errors_total 1")
}

// A kubelet without Metrics talks to the CRI clients it was given, not
// through wrappers.
func TestWithoutMetricsTheCRIIsNotWrapped(t *testing.T) {
	rt := fakeruntime.New(clock.RealClock{})
	crm, err := kuberuntime.Connect(context.Background(), "unix://"+fakeruntimetest.Serve(t, rt), clock.RealClock{})
	require.NoError(t, err)
	t.Cleanup(func() { crm.Close() })
	kl, err := New(Config{Client: fake.NewClientset(), NodeName: "n1", Pods: &PodsConfig{Updates: make(chan kubetypes.PodUpdate),
		RemoteRuntimeService: crm.RuntimeService(), RemoteImageService: crm.ImageService(), RunContainers: true, PodLogsDirectory: t.TempDir()}})
	require.NoError(t, err)
	assert.Equal(t, crm.RuntimeService(), kl.cri)
	assert.Nil(t, kl.metrics)
}
