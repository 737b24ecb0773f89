package kuberuntime_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/testutil"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/metrics"
)

// stubCRI answers the calls the tests make; any other one panics (nil
// embedded interface).
type stubCRI struct {
	runtimeapi.RuntimeServiceClient
	runtimeapi.ImageServiceClient
	clk      *clocktesting.FakeClock
	pullTook time.Duration
}

func (s *stubCRI) Version(context.Context, *runtimeapi.VersionRequest, ...grpc.CallOption) (*runtimeapi.VersionResponse, error) {
	s.clk.Step(20 * time.Millisecond)
	return &runtimeapi.VersionResponse{RuntimeName: "stub"}, nil
}

func (s *stubCRI) RunPodSandbox(context.Context, *runtimeapi.RunPodSandboxRequest, ...grpc.CallOption) (*runtimeapi.RunPodSandboxResponse, error) {
	return nil, errors.New("no network")
}

func (s *stubCRI) PullImage(context.Context, *runtimeapi.PullImageRequest, ...grpc.CallOption) (*runtimeapi.PullImageResponse, error) {
	s.clk.Step(s.pullTook)
	return &runtimeapi.PullImageResponse{ImageRef: "sha256:1"}, nil
}

func TestInstrumentedServicesCountOperationsUnderUpstreamNames(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m := metrics.NewWithClock(clk)
	stub := &stubCRI{clk: clk}
	rs := kuberuntime.NewInstrumentedRuntimeService(stub, m)
	ctx := context.Background()
	for range 2 {
		_, err := rs.Version(ctx, &runtimeapi.VersionRequest{})
		require.NoError(t, err)
	}
	_, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{RuntimeHandler: "runc"})
	require.EqualError(t, err, "no network", "the error passes through")

	want := `
# HELP kubelet_runtime_operations_total [ALPHA] Cumulative number of runtime operations by operation type.
# TYPE kubelet_runtime_operations_total counter
kubelet_runtime_operations_total{operation_type="run_podsandbox"} 1
kubelet_runtime_operations_total{operation_type="version"} 2
# HELP kubelet_runtime_operations_errors_total [ALPHA] Cumulative number of runtime operation errors by operation type.
# TYPE kubelet_runtime_operations_errors_total counter
kubelet_runtime_operations_errors_total{operation_type="run_podsandbox"} 1
# HELP kubelet_run_podsandbox_errors_total [ALPHA] Cumulative number of the run_podsandbox operation errors by RuntimeClass.Handler.
# TYPE kubelet_run_podsandbox_errors_total counter
kubelet_run_podsandbox_errors_total{runtime_handler="runc"} 1
`
	require.NoError(t, testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want),
		"kubelet_runtime_operations_total", "kubelet_runtime_operations_errors_total", "kubelet_run_podsandbox_errors_total"))
	h, err := testutil.GetHistogramVecFromGatherer(m.Gatherer(), "kubelet_runtime_operations_duration_seconds",
		map[string]string{"operation_type": "version"})
	require.NoError(t, err)
	require.EqualValues(t, 2, h.GetAggregatedSampleCount())
	require.InDelta(t, 0.04, h.GetAggregatedSampleSum(), 1e-9, "two calls of 20 ms on the fake clock")
}

func TestInstrumentedImageServiceLeavesPullsOutOfThePodStartSLI(t *testing.T) {
	created := time.Unix(1000, 0)
	clk := clocktesting.NewFakeClock(created)
	m := metrics.NewWithClock(clk)
	stub := &stubCRI{clk: clk, pullTook: 4 * time.Second}
	is := kuberuntime.NewInstrumentedImageService(stub, m)

	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", CreationTimestamp: metav1.NewTime(created)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	m.ObservedPodOnWatch(pod, created)
	_, err := is.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"},
		SandboxConfig: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u1"}}})
	require.NoError(t, err)
	clk.Step(time.Second)
	running := pod.DeepCopy()
	started := metav1.NewTime(clk.Now())
	running.Status.StartTime = &started
	running.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}}}}
	m.RecordStatusUpdated(running)
	m.ObservedPodOnWatch(running, clk.Now())

	h, err := testutil.GetHistogramVecFromGatherer(m.Gatherer(), "kubelet_pod_start_sli_duration_seconds", nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, h.GetAggregatedSampleCount())
	require.InDelta(t, 1.0, h.GetAggregatedSampleSum(), 1e-9, "5 s from creation to running, less the 4 s pull")
}

func TestInstrumentedServicesWithoutMetricsAreTheClientsThemselves(t *testing.T) {
	stub := &stubCRI{}
	require.Same(t, runtimeapi.RuntimeServiceClient(stub), kuberuntime.NewInstrumentedRuntimeService(stub, nil))
	require.Same(t, runtimeapi.ImageServiceClient(stub), kuberuntime.NewInstrumentedImageService(stub, nil))
}
