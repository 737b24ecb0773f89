package prober

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/testutil"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/metrics"
	"mykubelet/mylib/prober/results"
)

// probeFixture is newFixture whose manager records into a Metrics; the
// fake prober takes 30 ms of the fake clock per probe.
func probeFixture(t *testing.T) (*fixture, *metrics.Metrics) {
	f := newFixture(t, v1.Probe{PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3})
	m := metrics.NewWithClock(f.clock)
	f.m.metrics = m
	f.m.prober = &steppingProber{fakeProber: f.prober, step: func() { f.clock.Step(30 * time.Millisecond) }}
	return f, m
}

type steppingProber struct {
	*fakeProber
	step func()
}

func (s *steppingProber) probe(ctx context.Context, t probeType, pod *v1.Pod, st v1.PodStatus, c v1.Container, id kubecontainer.ContainerID) (results.Result, error) {
	s.step()
	return s.fakeProber.probe(ctx, t, pod, st, c, id)
}

func TestProbesAreCountedByResultWithUpstreamsLabels(t *testing.T) {
	f, m := probeFixture(t)
	f.pod.GenerateName = "web-5d8f-"
	f.pod.Name = "web-5d8f-x2x9q"
	f.pod.Labels = map[string]string{"pod-template-hash": "5d8f"}
	f.running(t0, true)
	w := f.worker(readiness)
	w.doProbe(context.Background())
	w.doProbe(context.Background())
	f.prober.answer(results.Failure)
	w.doProbe(context.Background())

	want := `
# HELP prober_probe_total [BETA] Cumulative number of a liveness, readiness or startup probe for a container by result.
# TYPE prober_probe_total counter
prober_probe_total{container="c",namespace="default",pod="web",pod_uid="uid-1",probe_type="Readiness",result="failed"} 1
prober_probe_total{container="c",namespace="default",pod="web",pod_uid="uid-1",probe_type="Readiness",result="successful"} 2
`
	require.NoError(t, testutil.GatherAndCompare(m.ProbeGatherer(), strings.NewReader(want), "prober_probe_total"))
	h, err := testutil.GetHistogramVecFromGatherer(m.ProbeGatherer(), "prober_probe_duration_seconds",
		map[string]string{"probe_type": "Readiness", "container": "c", "pod": "web", "namespace": "default"})
	require.NoError(t, err)
	require.EqualValues(t, 2, h.GetAggregatedSampleCount(), "the successes are timed, as upstream; the failure is not")
	require.InDelta(t, 0.06, h.GetAggregatedSampleSum(), 1e-9)
}

func TestNoProbeNoSeries(t *testing.T) {
	f, m := probeFixture(t)
	f.running(t0, true)
	w := f.worker(liveness)
	f.clock.SetTime(t0)
	f.pod.Spec.Containers[0].LivenessProbe.InitialDelaySeconds = 100 // shared spec: not probed yet
	w.doProbe(context.Background())
	require.Zero(t, f.prober.calls)
	require.Zero(t, successes(m), "a probe not run is not counted")
}

func TestStoppedWorkerDropsItsSeries(t *testing.T) {
	f, m := probeFixture(t)
	f.pod.Spec.Containers[0].LivenessProbe, f.pod.Spec.Containers[0].StartupProbe = nil, nil
	f.running(t0, true)
	f.m.AddPod(f.pod)
	defer f.m.Close()
	count := func() int { return successes(m) }
	require.Eventually(t, func() bool { return count() == 1 }, 10*time.Second, time.Millisecond, "the first probe is counted")
	f.m.RemovePod(f.pod)
	require.Eventually(t, func() bool { return f.m.workerCount() == 0 }, 10*time.Second, time.Millisecond, "RemovePod stops the worker")
	require.Zero(t, count(), "its series are gone")
}

// successes is prober_probe_total{result="successful"} of the fixture's
// pod; 0 when it has no series (the registry then reports it not found).
func successes(m *metrics.Metrics) int {
	v, err := testutil.GetCounterValuesFromGatherer(m.ProbeGatherer(), "prober_probe_total", map[string]string{"pod_uid": "uid-1"}, "result")
	if err != nil {
		return 0
	}
	return int(v[metrics.ProbeResultSuccessful])
}
