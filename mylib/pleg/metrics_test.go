package pleg

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/component-base/metrics/testutil"

	"mykubelet/mylib/metrics"
)

func TestRelistRecordsRunningPodsAndContainers(t *testing.T) {
	g, rt, _, clk := newTestPLEG(ChannelCapacity)
	m := metrics.NewWithClock(clk)
	g.SetMetrics(m)
	rt.set(
		withSandbox(pod("p1", ctr("c1", running), ctr("c2", exited)), ctr("s1", running)),
		withSandbox(pod("p2", ctr("c3", running), ctr("c4", created)), ctr("s2", running)),
		withSandbox(pod("p3", ctr("c5", exited)), ctr("s3", exited)), // its sandbox stopped: not a running pod
	)
	g.Relist(context.Background())
	want := `
# HELP kubelet_running_pods [ALPHA] Number of pods that have a running pod sandbox
# TYPE kubelet_running_pods gauge
kubelet_running_pods 2
# HELP kubelet_running_containers [ALPHA] Number of containers currently running
# TYPE kubelet_running_containers gauge
kubelet_running_containers{container_state="created"} 1
kubelet_running_containers{container_state="exited"} 2
kubelet_running_containers{container_state="running"} 2
kubelet_running_containers{container_state="unknown"} 0
`
	require.NoError(t, testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "kubelet_running_pods", "kubelet_running_containers"))

	rt.set() // everything removed
	clk.Step(time.Second)
	g.Relist(context.Background())
	want = `
# HELP kubelet_running_pods [ALPHA] Number of pods that have a running pod sandbox
# TYPE kubelet_running_pods gauge
kubelet_running_pods 0
# HELP kubelet_running_containers [ALPHA] Number of containers currently running
# TYPE kubelet_running_containers gauge
kubelet_running_containers{container_state="created"} 0
kubelet_running_containers{container_state="exited"} 0
kubelet_running_containers{container_state="running"} 0
kubelet_running_containers{container_state="unknown"} 0
`
	require.NoError(t, testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "kubelet_running_pods", "kubelet_running_containers"))
}

func TestRelistRecordsDurationIntervalAndLastSeen(t *testing.T) {
	g, rt, _, clk := newTestPLEG(ChannelCapacity)
	m := metrics.NewWithClock(clk)
	g.SetMetrics(m)
	rt.set(pod("p1", ctr("c1", running)))
	g.Relist(context.Background()) // first: no interval yet
	clk.Step(time.Second)
	g.Relist(context.Background())
	clk.Step(2 * time.Second)
	rt.err = errors.New("connection refused")
	g.Relist(context.Background()) // failed: its duration counts, and its interval

	duration, err := testutil.GetHistogramVecFromGatherer(m.Gatherer(), "kubelet_pleg_relist_duration_seconds", nil)
	require.NoError(t, err)
	require.EqualValues(t, 3, duration.GetAggregatedSampleCount())
	interval, err := testutil.GetHistogramVecFromGatherer(m.Gatherer(), "kubelet_pleg_relist_interval_seconds", nil)
	require.NoError(t, err)
	require.EqualValues(t, 2, interval.GetAggregatedSampleCount())
	require.InDelta(t, 3.0, interval.GetAggregatedSampleSum(), 1e-9, "1 s, then 2 s since the last successful relist")

	ok, _ := g.Healthy()
	require.True(t, ok)
	want := `
# HELP kubelet_pleg_last_seen_seconds [ALPHA] Timestamp in seconds when PLEG was last seen active.
# TYPE kubelet_pleg_last_seen_seconds gauge
kubelet_pleg_last_seen_seconds 1.772366401e+09
`
	require.NoError(t, testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "kubelet_pleg_last_seen_seconds"),
		"the start of the last successful relist: t0+1s")
}

func TestFullChannelCountsDiscardedEvents(t *testing.T) {
	g, rt, _, clk := newTestPLEG(1)
	m := metrics.NewWithClock(clk)
	g.SetMetrics(m)
	rt.set(pod("p1", ctr("c1", running), ctr("c2", running), ctr("c3", running)))
	g.Relist(context.Background())
	want := `
# HELP kubelet_pleg_discard_events [ALPHA] The number of discard events in PLEG.
# TYPE kubelet_pleg_discard_events counter
kubelet_pleg_discard_events 2
`
	require.NoError(t, testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "kubelet_pleg_discard_events"))
}
