package podworkers

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/kubetypes"
)

// countingSyncer counts calls and records the last version synced per pod.
type countingSyncer struct {
	syncs, terminated atomic.Int64
	lastVersion       []atomic.Int64
}

func (c *countingSyncer) SyncPod(_ context.Context, _ kubetypes.SyncPodType, pod, _ *v1.Pod, _ *kubecontainer.PodStatus) (bool, error) {
	var i, v int
	fmt.Sscanf(string(pod.UID), "%d", &i)
	fmt.Sscanf(pod.Labels["v"], "%d", &v)
	c.lastVersion[i].Store(int64(v))
	c.syncs.Add(1)
	return false, nil
}

func (c *countingSyncer) SyncTerminatingPod(context.Context, *v1.Pod, *kubecontainer.PodStatus, *int64, PodStatusFunc) error {
	return nil
}

func (c *countingSyncer) SyncTerminatedPod(context.Context, *v1.Pod, *kubecontainer.PodStatus) error {
	c.terminated.Add(1)
	return nil
}

// BenchmarkPodWorkers1000x10 sends 10 updates to each of 1,000 pods, waits
// until every pod's last update is synced, then removes all pods with
// SyncKnownPods and waits until every worker goroutine has exited. It
// reports the goroutines left above the baseline (must be 0).
//
// The pod cache is a real one whose global timestamp is set far ahead, so
// GetNewerThan never waits: this measures the workers, not the PLEG.
//
//	go test -run '^$' -bench PodWorkers1000x10 -benchtime 5x ./mylib/podworkers/
func BenchmarkPodWorkers1000x10(b *testing.B) {
	const pods, updates = 1000, 10
	ctx := context.Background()
	clk := clock.RealClock{}
	for b.Loop() {
		cache := kubecontainer.NewCache()
		cache.UpdateTime(time.Now().Add(time.Hour))
		s := &countingSyncer{lastVersion: make([]atomic.Int64, pods)}
		pw := New(s, NewBasicWorkQueue(clk), cache, clk)
		baseline := runtime.NumGoroutine()

		podList := make([]*v1.Pod, pods)
		for u := 1; u <= updates; u++ {
			for i := range pods {
				podList[i] = newPod(fmt.Sprint(i), fmt.Sprint(u))
				pw.UpdatePod(ctx, UpdatePodOptions{UpdateType: kubetypes.SyncPodUpdate, Pod: podList[i]})
			}
		}
		for i := range pods {
			for s.lastVersion[i].Load() != updates {
				runtime.Gosched()
			}
		}
		peak := runtime.NumGoroutine() - baseline

		pw.SyncKnownPods(nil) // every pod is gone: terminate them all
		for s.terminated.Load() != pods {
			time.Sleep(time.Millisecond)
		}
		pw.SyncKnownPods(nil) // forget the finished ones
		var left int
		for range 1000 {
			if left = runtime.NumGoroutine() - baseline; left <= 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if left > 0 {
			b.Fatalf("%d goroutines left after SyncKnownPods", left)
		}
		if n := len(pw.(*podWorkers).podSyncStatuses); n != 0 {
			b.Fatalf("%d pod statuses left", n)
		}
		b.ReportMetric(float64(peak), "worker-goroutines")
		b.ReportMetric(float64(s.syncs.Load()), "syncs")
		b.ReportMetric(float64(left), "goroutines-left")
	}
}
