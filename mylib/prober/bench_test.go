package prober

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/prober/results"
)

// BenchmarkProbeWorkers measures what the prober costs a kubelet with
// 110 pods (the default maxPods), each with a startup, a liveness and a
// readiness probe at periodSeconds 1: 330 workers, of which the liveness
// and readiness ones probe every second (the startup probe has passed) with
// a real TCP connection to a loopback listener. Each iteration is one
// second of wall time; it reports the process's CPU time per second (user
// + system, the probes' targets included), the goroutines, and the probes
// per second.
func BenchmarkProbeWorkers(b *testing.B) {
	const pods = 110
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, portText, _ := net.SplitHostPort(lis.Addr().String())
	port, _ := strconv.Atoi(portText)
	probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Host: "127.0.0.1", Port: intstr.FromInt32(int32(port))}},
		PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
	status := &fakeStatus{m: map[types.UID]v1.PodStatus{}}
	m, err := newManager(Config{StatusManager: status, Clock: clock.RealClock{}})
	if err != nil {
		b.Fatal(err)
	}
	counting := &countingProber{inner: m.prober}
	m.prober = counting
	started := true
	for i := range pods {
		uid := types.UID(fmt.Sprintf("uid-%d", i))
		status.set(uid, v1.PodStatus{Phase: v1.PodRunning, PodIP: "127.0.0.1", ContainerStatuses: []v1.ContainerStatus{{
			Name: "c", ContainerID: fmt.Sprintf("mykubelet-fake://c%d", i), Started: &started,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Hour))}}}}})
		m.AddPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "default", UID: uid},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", StartupProbe: probe, LivenessProbe: probe, ReadinessProbe: probe}}}})
	}
	done := make(chan struct{})
	go func() { // the sync loop's part: read the results' updates
		for {
			select {
			case <-m.livenessManager.Updates():
			case <-m.readinessManager.Updates():
			case <-m.startupManager.Updates():
			case <-done:
				return
			}
		}
	}()
	defer func() { m.Close(); close(done) }()
	time.Sleep(2 * time.Second) // the workers' first-period jitter

	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.ResetTimer()
	c0, p0, t0 := cpu(), counting.n.Load(), time.Now()
	for range b.N {
		time.Sleep(time.Second)
	}
	elapsed := time.Since(t0).Seconds()
	b.StopTimer()
	b.ReportMetric(float64((cpu()-c0).Milliseconds())/elapsed, "cpu-ms/s")
	b.ReportMetric(float64(counting.n.Load()-p0)/elapsed, "probes/s")
	b.ReportMetric(float64(runtime.NumGoroutine()), "goroutines")
	b.ReportMetric(float64(m.workerCount()), "workers")
}

// countingProber counts the probes run.
type countingProber struct {
	inner probeRunner
	n     atomic.Int64
}

func (c *countingProber) probe(ctx context.Context, t probeType, pod *v1.Pod, status v1.PodStatus, ct v1.Container, id kubecontainer.ContainerID) (results.Result, error) {
	c.n.Add(1)
	return c.inner.probe(ctx, t, pod, status, ct, id)
}
