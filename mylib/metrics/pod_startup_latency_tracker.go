package metrics

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// The pod start SLI (SIG Scalability's pod startup latency SLI), as
// upstream's pkg/kubelet/util/pod_startup_latency_tracker.go: for a pod the
// kubelet sees before it has started it, the time from the pod's creation
// timestamp to the moment a watch shows all its containers running,
// minus the time spent pulling its images and running its init
// containers. Three moments feed it:
//
//	ObservedPodOnWatch   each pod the API server's watch delivers (the sync loop)
//	RecordImage…Pulling  around each image pull (the CRI wrapper of mylib/kuberuntime)
//	RecordStatusUpdated  each status the status manager wrote (observedRunning)
//
// The SLI is observed once per pod: on the first watch event that shows
// all containers running after the status manager wrote such a status.
// Unlike upstream, a watch event that brings the write before the writer
// has returned counts too, when its resource version is the write's: the
// answer to a status patch and the watch event of that patch race, and
// this kubelet writes a pod's status once on its way to Running (upstream
// writes it more often, so a later event usually saves it), so upstream's
// rule alone misses many pods for good (3 of 5 in a test on a real API
// server).
// As upstream, stateful pods (a volume other than secret, configMap,
// downwardAPI, emptyDir, projected and the other ephemeral kinds) count in
// kubelet_pod_start_total_duration_seconds only.

// podStartupLatencyTracker holds each pod's moments until its SLI is
// observed.
type podStartupLatencyTracker struct {
	m    *Metrics
	mu   sync.Mutex
	pods map[types.UID]*perPodState
	// firstNetworkPodSeen: the first pod not on the host network was
	// observed (kubelet_first_network_pod_start_sli_duration_seconds).
	firstNetworkPodSeen bool
}

type imagePullSession struct{ start, end time.Time }

type perPodState struct {
	pullStarts []time.Time        // pulls under way, oldest first
	pulls      []imagePullSession // finished pulls
	// observedRunningTime: when the status manager first wrote a status
	// with every container running.
	observedRunningTime time.Time
	// runningOnWatch: when a watch event first showed every container
	// running, before the status manager said it wrote that (the write's
	// answer and its watch event race); runningOnWatchRV is that event's
	// resource version.
	runningOnWatch   time.Time
	runningOnWatchRV string
	metricRecorded   bool
}

func newPodStartupLatencyTracker(m *Metrics) *podStartupLatencyTracker {
	return &podStartupLatencyTracker{m: m, pods: map[types.UID]*perPodState{}}
}

// ObservedPodOnWatch is called for each pod a watch of the API server
// delivered, at when. The first time, a pod not started yet (no
// status.startTime) is tracked; later, once the status manager has written
// it running and the watch shows every container running, its SLI is
// observed. A pod that has finished is forgotten.
func (m *Metrics) ObservedPodOnWatch(pod *v1.Pod, when time.Time) {
	if m == nil {
		return
	}
	m.tracker.observedPodOnWatch(pod, when)
}

// RecordImageStartedPulling notes that an image pull for the pod began.
func (m *Metrics) RecordImageStartedPulling(podUID types.UID) {
	if m == nil {
		return
	}
	m.tracker.recordImageStartedPulling(podUID, m.clock.Now())
}

// RecordImageFinishedPulling notes that the pod's oldest pull under way
// ended (well or not).
func (m *Metrics) RecordImageFinishedPulling(podUID types.UID) {
	if m == nil {
		return
	}
	m.tracker.recordImageFinishedPulling(podUID, m.clock.Now())
}

// RecordStatusUpdated is called with the pod the status manager's write
// returned: the first one with every container running marks the pod
// observedRunning.
func (m *Metrics) RecordStatusUpdated(pod *v1.Pod) {
	if m == nil {
		return
	}
	m.tracker.recordStatusUpdated(pod, m.clock.Now())
}

// DeletePodStartupState forgets the pod (its status was dropped).
func (m *Metrics) DeletePodStartupState(podUID types.UID) {
	if m == nil {
		return
	}
	m.tracker.mu.Lock()
	defer m.tracker.mu.Unlock()
	delete(m.tracker.pods, podUID)
}

func (t *podStartupLatencyTracker) observedPodOnWatch(pod *v1.Pod, when time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodSucceeded {
		delete(t.pods, pod.UID)
		return
	}
	state := t.pods[pod.UID]
	if state == nil {
		// Only pods the kubelet has not acknowledged yet: a pod already
		// started (by an earlier kubelet) says nothing about this one.
		if pod.Status.StartTime.IsZero() {
			t.pods[pod.UID] = &perPodState{}
		}
		return
	}
	if state.metricRecorded || !hasPodStartedSLO(pod) {
		return
	}
	if state.observedRunningTime.IsZero() {
		// The watch may bring the status write before its writer has
		// returned: remember it, for recordStatusUpdated.
		if state.runningOnWatch.IsZero() {
			state.runningOnWatch, state.runningOnWatchRV = when, pod.ResourceVersion
		}
		return
	}
	t.observe(pod, state, when)
}

// observe records the pod's SLI: running on the watch at when.
func (t *podStartupLatencyTracker) observe(pod *v1.Pod, state *perPodState, when time.Time) {
	e2e := when.Sub(pod.CreationTimestamp.Time)
	pulling := imagePullingTime(state.pulls)
	inits := initContainersRuntime(pod)
	sli := e2e - pulling - inits
	stateful := isStatefulPod(pod)
	klog.InfoS("Observed pod startup duration", "pod", klog.KObj(pod), "podStartSLOduration", sli.Seconds(),
		"podStartE2EDuration", e2e, "totalImagesPullingTime", pulling, "totalInitContainerRuntime", inits,
		"isStatefulPod", stateful, "podCreationTimestamp", pod.CreationTimestamp.Time,
		"observedRunningTime", state.observedRunningTime, "watchObservedRunningTime", when)
	t.m.podStartTotalDuration.Observe(e2e.Seconds())
	if !stateful {
		t.m.podStartSLIDuration.Observe(sli.Seconds())
		if !pod.Spec.HostNetwork && !t.firstNetworkPodSeen {
			t.m.firstNetworkPodStartSLIDuration.Set(sli.Seconds())
			t.firstNetworkPodSeen = true
		}
	}
	state.metricRecorded = true
}

func (t *podStartupLatencyTracker) recordImageStartedPulling(uid types.UID, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if state := t.pods[uid]; state != nil {
		state.pullStarts = append(state.pullStarts, now)
	}
}

func (t *podStartupLatencyTracker) recordImageFinishedPulling(uid types.UID, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	state := t.pods[uid]
	if state == nil || len(state.pullStarts) == 0 {
		return
	}
	state.pulls = append(state.pulls, imagePullSession{start: state.pullStarts[0], end: now})
	state.pullStarts = state.pullStarts[1:]
}

func (t *podStartupLatencyTracker) recordStatusUpdated(pod *v1.Pod, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	state := t.pods[pod.UID]
	if state == nil || state.metricRecorded || !state.observedRunningTime.IsZero() {
		return
	}
	if !hasPodStartedSLO(pod) {
		return
	}
	klog.V(3).InfoS("Mark when the pod was running for the first time", "pod", klog.KObj(pod), "rv", pod.ResourceVersion)
	state.observedRunningTime = now
	if !state.runningOnWatch.IsZero() && pod.ResourceVersion != "" && pod.ResourceVersion == state.runningOnWatchRV {
		// The watch delivered this very write first (same resource
		// version): that was the moment it was observed.
		t.observe(pod, state, state.runningOnWatch)
	}
}

// imagePullingTime is the time during which at least one pull ran: pulls
// that overlap count once. sessions are in the order they finished.
func imagePullingTime(sessions []imagePullSession) time.Duration {
	var total time.Duration
	var end time.Time // of the time counted so far
	for _, s := range sessions {
		switch {
		case s.start.After(end) || end.IsZero():
			total += s.end.Sub(s.start)
			end = s.end
		case s.end.After(end):
			total += s.end.Sub(end)
			end = s.end
		}
	}
	return total
}

// initContainersRuntime adds up how long each finished init container ran
// (from its status: second precision, as the API keeps it).
func initContainersRuntime(pod *v1.Pod) time.Duration {
	var total time.Duration
	for _, cs := range pod.Status.InitContainerStatuses {
		if term := cs.State.Terminated; term != nil && !term.StartedAt.IsZero() && term.FinishedAt.After(term.StartedAt.Time) {
			total += term.FinishedAt.Sub(term.StartedAt.Time)
		}
	}
	return total
}

// hasPodStartedSLO: every container has been seen running (upstream's
// definition of started, for the SLI).
func hasPodStartedSLO(pod *v1.Pod) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running == nil || cs.State.Running.StartedAt.IsZero() {
			return false
		}
	}
	return true
}

// isStatefulPod: the pod mounts a volume that is not of an ephemeral kind
// (the SLI's definition of a stateful pod).
func isStatefulPod(pod *v1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		ephemeralCSI := v.CSI != nil && v.CSI.VolumeAttributes["csi.storage.k8s.io/ephemeral"] == "true"
		if v.Secret == nil && v.ConfigMap == nil && v.DownwardAPI == nil && v.EmptyDir == nil && v.Projected == nil &&
			v.GitRepo == nil && v.Image == nil && v.Ephemeral == nil && !ephemeralCSI {
			return true
		}
	}
	return false
}
