package podworkers

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/component-base/metrics/testutil"

	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/metrics"
)

// workerDuration is kubelet_pod_worker_duration_seconds for one
// operation type: its sample count and sum.
func workerDuration(t *testing.T, m *metrics.Metrics, op string) (uint64, float64) {
	t.Helper()
	h, err := testutil.GetHistogramVecFromGatherer(m.Gatherer(), "kubelet_pod_worker_duration_seconds", map[string]string{"operation_type": op})
	if err != nil {
		return 0, 0 // no sample of that type yet
	}
	return h.GetAggregatedSampleCount(), h.GetAggregatedSampleSum()
}

func TestWorkerRecordsEachUpdatesDurationByType(t *testing.T) {
	e := newEnv(alwaysFresh{})
	m := metrics.NewWithClock(e.clock)
	WithMetrics(m)(e.pw)
	e.syncer.hook = func(context.Context, call) (bool, error) {
		e.clock.Step(2 * time.Second) // each sync takes 2 s
		return false, nil
	}
	start := e.clock.Now()
	e.pw.UpdatePod(context.Background(), UpdatePodOptions{UpdateType: kubetypes.SyncPodCreate, StartTime: start, Pod: newPod("a", "1")})
	eventually(t, func() bool { n, _ := workerDuration(t, m, "create"); return n == 1 }, "the create is recorded")
	_, sum := workerDuration(t, m, "create")
	require.InDelta(t, 2.0, sum, 1e-9, "from the update's StartTime to the end of its sync")

	e.pw.UpdatePod(context.Background(), UpdatePodOptions{UpdateType: kubetypes.SyncPodSync, StartTime: e.clock.Now(), Pod: newPod("a", "2")})
	eventually(t, func() bool { n, _ := workerDuration(t, m, "sync"); return n == 1 }, "the sync is recorded")

	// An update without a StartTime (a test's, say) is not measured.
	e.pw.UpdatePod(context.Background(), UpdatePodOptions{UpdateType: kubetypes.SyncPodUpdate, Pod: newPod("a", "3")})
	eventually(t, func() bool { return e.syncer.last("a").Version == "3" }, "the update is synced")
	n, _ := workerDuration(t, m, "update")
	require.Zero(t, n)
}

func TestWorkerRecordsTheTerminatedPhase(t *testing.T) {
	e := newEnv(alwaysFresh{})
	m := metrics.NewWithClock(e.clock)
	WithMetrics(m)(e.pw)
	e.pw.UpdatePod(context.Background(), UpdatePodOptions{UpdateType: kubetypes.SyncPodCreate, StartTime: e.clock.Now(), Pod: newPod("a", "1")})
	e.pw.UpdatePod(context.Background(), UpdatePodOptions{UpdateType: kubetypes.SyncPodUpdate, StartTime: e.clock.Now(), Pod: deleted(newPod("a", "2"), 1)})
	eventually(t, func() bool { n, _ := workerDuration(t, m, "terminated"); return n == 1 }, "the end of the pod is recorded as terminated")
}
