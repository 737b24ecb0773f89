package metrics

import (
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

var created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// pendingPod is a pod as the watch first shows it: bound, not started.
func pendingPod(uid string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: types.UID("uid-" + uid), CreationTimestamp: metav1.NewTime(created)},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "a"}, {Name: "b"}}},
		Status:     v1.PodStatus{Phase: v1.PodPending},
	}
}

// running is pod with every container running since at.
func running(pod *v1.Pod, at time.Time) *v1.Pod {
	p := pod.DeepCopy()
	p.Status.Phase = v1.PodRunning
	start := metav1.NewTime(at)
	p.Status.StartTime = &start
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{Name: c.Name,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: start}}})
	}
	return p
}

// sli is the SLI and total histograms' expected exposition.
func sli(t *testing.T, m *Metrics, count int, sliSum, totalSum string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# HELP kubelet_pod_start_sli_duration_seconds [ALPHA] Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch\n")
	b.WriteString("# TYPE kubelet_pod_start_sli_duration_seconds histogram\n")
	writeBuckets(&b, "kubelet_pod_start_sli_duration_seconds", count, sliSum)
	b.WriteString("# HELP kubelet_pod_start_total_duration_seconds [ALPHA] Duration in seconds to start a pod since creation, including time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch\n")
	b.WriteString("# TYPE kubelet_pod_start_total_duration_seconds histogram\n")
	writeBuckets(&b, "kubelet_pod_start_total_duration_seconds", count, totalSum)
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(b.String()),
		"kubelet_pod_start_sli_duration_seconds", "kubelet_pod_start_total_duration_seconds"); err != nil {
		t.Fatal(err)
	}
}

// writeBuckets writes a histogram of count samples all of value sum/count
// (the tests observe one pod, or pods of the same duration).
func writeBuckets(b *strings.Builder, name string, count int, sum string) {
	v := 0.0
	if count == 0 {
		sum = "0" // a histogram without labels shows its zero buckets
	} else {
		f, _ := strconv.ParseFloat(sum, 64)
		v = f / float64(count)
	}
	for _, le := range podStartupDurationBuckets {
		n := 0
		if v <= le {
			n = count
		}
		b.WriteString(name + `_bucket{le="` + strconv.FormatFloat(le, 'g', -1, 64) + `"} ` + strconv.Itoa(n) + "\n")
	}
	b.WriteString(name + `_bucket{le="+Inf"} ` + strconv.Itoa(count) + "\n")
	b.WriteString(name + "_sum " + sum + "\n")
	b.WriteString(name + "_count " + strconv.Itoa(count) + "\n")
}

func TestPodStartSLIExcludesImagePullsAndIsObservedOncePerPod(t *testing.T) {
	clk := clocktesting.NewFakeClock(created.Add(time.Second))
	m := NewWithClock(clk)
	pod := pendingPod("1")
	m.ObservedPodOnWatch(pod, clk.Now()) // t=1: the kubelet sees it

	clk.SetTime(created.Add(2 * time.Second))
	m.RecordImageStartedPulling(pod.UID)
	clk.SetTime(created.Add(7 * time.Second)) // a 5 s pull
	m.RecordImageFinishedPulling(pod.UID)

	// The watch shows the pod running before the status manager wrote it
	// so (another writer): not yet observed.
	m.ObservedPodOnWatch(running(pod, created.Add(8*time.Second)), created.Add(8*time.Second))
	sli(t, m, 0, "", "")

	clk.SetTime(created.Add(9 * time.Second))
	m.RecordStatusUpdated(running(pod, created.Add(8*time.Second)))
	m.ObservedPodOnWatch(running(pod, created.Add(8*time.Second)), created.Add(10*time.Second))
	sli(t, m, 1, "5", "10") // 10 s from creation to the watch, less the 5 s pull

	// Later events of the same pod change nothing.
	m.RecordStatusUpdated(running(pod, created.Add(8*time.Second)))
	m.ObservedPodOnWatch(running(pod, created.Add(8*time.Second)), created.Add(30*time.Second))
	sli(t, m, 1, "5", "10")
}

func TestPodStartSLIOverlappingPullsCountOnce(t *testing.T) {
	clk := clocktesting.NewFakeClock(created)
	m := NewWithClock(clk)
	pod := pendingPod("2")
	m.ObservedPodOnWatch(pod, created)
	clk.SetTime(created.Add(1 * time.Second))
	m.RecordImageStartedPulling(pod.UID) // 1..5
	clk.SetTime(created.Add(3 * time.Second))
	m.RecordImageStartedPulling(pod.UID) // 3..6
	clk.SetTime(created.Add(5 * time.Second))
	m.RecordImageFinishedPulling(pod.UID)
	clk.SetTime(created.Add(6 * time.Second))
	m.RecordImageFinishedPulling(pod.UID)
	m.RecordStatusUpdated(running(pod, created.Add(6*time.Second)))
	m.ObservedPodOnWatch(running(pod, created.Add(6*time.Second)), created.Add(8*time.Second))
	sli(t, m, 1, "3", "8") // 8 s less 5 s of pulling (1..6)
}

func TestPodStartSLIExcludesInitContainersRuntime(t *testing.T) {
	clk := clocktesting.NewFakeClock(created)
	m := NewWithClock(clk)
	pod := pendingPod("3")
	pod.Spec.InitContainers = []v1.Container{{Name: "init"}}
	m.ObservedPodOnWatch(pod, created)
	p := running(pod, created.Add(5*time.Second))
	p.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "init", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
		StartedAt: metav1.NewTime(created.Add(time.Second)), FinishedAt: metav1.NewTime(created.Add(4 * time.Second))}}}}
	clk.SetTime(created.Add(5 * time.Second))
	m.RecordStatusUpdated(p)
	m.ObservedPodOnWatch(p, created.Add(6*time.Second))
	sli(t, m, 1, "3", "6")
}

func TestPodStartSLISkipsPodsStartedBeforeTheKubeletSawThem(t *testing.T) {
	m := NewWithClock(clocktesting.NewFakeClock(created))
	pod := running(pendingPod("4"), created.Add(time.Second)) // a restarted kubelet finds it running
	m.ObservedPodOnWatch(pod, created.Add(20*time.Second))
	m.RecordStatusUpdated(pod)
	m.ObservedPodOnWatch(pod, created.Add(21*time.Second))
	sli(t, m, 0, "", "")
}

func TestPodStartSLIStatefulPodCountsInTotalOnly(t *testing.T) {
	clk := clocktesting.NewFakeClock(created)
	m := NewWithClock(clk)
	pod := pendingPod("5")
	pod.Spec.Volumes = []v1.Volume{
		{Name: "token", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}}, // every pod has one: stateless
		{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}},
	}
	m.ObservedPodOnWatch(pod, created)
	m.RecordStatusUpdated(running(pod, created.Add(2*time.Second)))
	m.ObservedPodOnWatch(running(pod, created.Add(2*time.Second)), created.Add(4*time.Second))
	body := scrape(t, m.Handler())
	for _, want := range []string{"kubelet_pod_start_total_duration_seconds_count 1", "kubelet_pod_start_sli_duration_seconds_count 0"} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

func TestPodStartSLIForgetsFinishedAndDeletedPods(t *testing.T) {
	m := NewWithClock(clocktesting.NewFakeClock(created))
	a, b := pendingPod("6"), pendingPod("7")
	m.ObservedPodOnWatch(a, created)
	m.ObservedPodOnWatch(b, created)
	done := a.DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	m.ObservedPodOnWatch(done, created.Add(time.Second))
	m.DeletePodStartupState(b.UID)
	if n := len(m.tracker.pods); n != 0 {
		t.Errorf("tracker keeps %d pods, want 0", n)
	}
}

func TestFirstNetworkPodGaugeSetOnce(t *testing.T) {
	clk := clocktesting.NewFakeClock(created)
	m := NewWithClock(clk)
	for i, d := range []time.Duration{3 * time.Second, 7 * time.Second} {
		pod := pendingPod(string(rune('a' + i)))
		m.ObservedPodOnWatch(pod, created)
		m.RecordStatusUpdated(running(pod, created.Add(d)))
		m.ObservedPodOnWatch(running(pod, created.Add(d)), created.Add(d))
	}
	if body := scrape(t, m.Handler()); !strings.Contains(body, "kubelet_first_network_pod_start_sli_duration_seconds 3\n") {
		t.Errorf("want the first pod's 3 s:\n%s", body)
	}
}

// The watch event of the status write may come before the writer returns:
// the SLI is still observed, at the watch's time, when that event is the
// write itself (same resource version); an event of another write is not
// enough.
func TestPodStartSLIWhenTheWatchBeatsTheWriter(t *testing.T) {
	clk := clocktesting.NewFakeClock(created)
	m := NewWithClock(clk)
	pod := pendingPod("8")
	m.ObservedPodOnWatch(pod, created)
	written := running(pod, created.Add(time.Second))
	written.ResourceVersion = "42"
	m.ObservedPodOnWatch(written, created.Add(2*time.Second)) // the watch first
	sli(t, m, 0, "", "")
	clk.SetTime(created.Add(3 * time.Second))
	m.RecordStatusUpdated(written) // then the patch's answer
	sli(t, m, 1, "2", "2")

	other := pendingPod("9")
	m.ObservedPodOnWatch(other, created)
	byAnother := running(other, created.Add(time.Second))
	byAnother.ResourceVersion = "50"
	m.ObservedPodOnWatch(byAnother, created.Add(2*time.Second))
	ours := byAnother.DeepCopy()
	ours.ResourceVersion = "51"
	m.RecordStatusUpdated(ours)
	sli(t, m, 1, "2", "2") // not observed: the event seen was not our write
	m.ObservedPodOnWatch(ours, created.Add(4*time.Second))
	h, err := testutil.GetHistogramVecFromGatherer(m.Gatherer(), "kubelet_pod_start_sli_duration_seconds", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, sum := h.GetAggregatedSampleCount(), h.GetAggregatedSampleSum(); n != 2 || sum != 6 {
		t.Errorf("got %d samples summing to %v s, want 2 s and 4 s", n, sum)
	}
}
