package status

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/testutil"

	"mykubelet/mylib/metrics"
)

// The status manager's write of a running pod is the pod start SLI's
// observedRunning; the watch event that follows it observes the SLI.
func TestWrittenRunningStatusFeedsThePodStartSLI(t *testing.T) {
	pod := newPod("p", "uid-1")
	pod.CreationTimestamp = metav1.NewTime(t0.Add(-5 * time.Second))
	f := newFixture(t, pod)
	m := metrics.NewWithClock(f.clk)
	f.m.metrics = m
	m.ObservedPodOnWatch(pod, t0) // the kubelet sees it, not started

	f.m.SetPodStatus(pod, runningStatus(true))
	f.clk.Step(2 * time.Second) // the write waits 2 s
	require.Equal(t, 1, f.m.syncBatch(context.Background(), false))

	// Before the watch shows the write, nothing is observed.
	sli, err := testutil.GetHistogramVecFromGatherer(m.Gatherer(), "kubelet_pod_start_sli_duration_seconds", nil)
	require.NoError(t, err)
	require.Zero(t, sli.GetAggregatedSampleCount())

	m.ObservedPodOnWatch(f.apiPod(t, "default", "p"), t0.Add(3*time.Second))
	sli, err = testutil.GetHistogramVecFromGatherer(m.Gatherer(), "kubelet_pod_start_sli_duration_seconds", nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, sli.GetAggregatedSampleCount())
	require.InDelta(t, 8.0, sli.GetAggregatedSampleSum(), 1e-9, "created 5 s before t0, seen running on the watch at t0+3s")

	sync, err := testutil.GetHistogramVecFromGatherer(m.Gatherer(), "kubelet_pod_status_sync_duration_seconds", nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, sync.GetAggregatedSampleCount())
	require.InDelta(t, 2.0, sync.GetAggregatedSampleSum(), 1e-9, "from the status change to its write")
}

// A pending status written is no observedRunning: a later watch event of
// the pod still pending observes nothing.
func TestWrittenPendingStatusObservesNothing(t *testing.T) {
	pod := newPod("p", "uid-1")
	f := newFixture(t, pod)
	m := metrics.NewWithClock(f.clk)
	f.m.metrics = m
	m.ObservedPodOnWatch(pod, t0)
	st := runningStatus(false)
	st.Phase = "Pending"
	st.ContainerStatuses[0].State.Running = nil
	f.m.SetPodStatus(pod, st)
	require.Equal(t, 1, f.m.syncBatch(context.Background(), false))
	m.ObservedPodOnWatch(f.apiPod(t, "default", "p"), t0.Add(time.Second))
	sli, err := testutil.GetHistogramVecFromGatherer(m.Gatherer(), "kubelet_pod_start_sli_duration_seconds", nil)
	require.NoError(t, err)
	require.Zero(t, sli.GetAggregatedSampleCount())
}
