// Package metrics is upstream's pkg/kubelet/metrics: the kubelet's own
// series under upstream's names, help texts, labels and buckets
// (k8s.io/component-base/metrics), for /metrics and /metrics/probes.
//
// Each part of the kubelet records what it does through a *Metrics handed
// to it (the PLEG its relists, the pod workers their syncs, the CRI client
// wrapper of mylib/kuberuntime its operations, the prober its probes, the
// status manager and the sync loop the pod start SLI:
// pod_startup_latency_tracker.go). A nil *Metrics records nothing, so a
// part built without one behaves as before.
//
// Where it departs from upstream, and why (one line each):
//   - a registry per Metrics (metrics.NewKubeRegistry), never the
//     process-wide legacyregistry: a process may run many kubelets (a
//     cluster of them in one test), each with its own series;
//   - only the series this kubelet has parts for (no cgroup manager,
//     eviction, device plugin, volume stats or node startup series);
//   - no Go runtime or process series (go_*, process_*) on /metrics: they
//     would be the same for every kubelet of the process;
//   - kubelet_running_containers sets every container state each relist,
//     0 when none is left in it (upstream keeps the last count of a state
//     nobody is in any more);
//   - durations are measured on the clock given to NewWithClock (the
//     kubelet's), so tests drive them with a fake clock;
//   - the pod start SLI also counts a pod whose watch event came before
//     the answer to the status write it shows (same resource version):
//     with one status write per pod start, upstream's rule would lose
//     many pods (pod_startup_latency_tracker.go).
package metrics

import (
	"net/http"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	compbasemetrics "k8s.io/component-base/metrics"
	"k8s.io/utils/clock"
)

// Subsystem and the names of the series, as upstream's constants.
const (
	KubeletSubsystem = "kubelet"

	NodeNameKey                        = "node_name"
	NodeLabelKey                       = "node"
	PodWorkerDurationKey               = "pod_worker_duration_seconds"
	PodStartDurationKey                = "pod_start_duration_seconds"
	PodStartSLIDurationKey             = "pod_start_sli_duration_seconds"
	PodStartTotalDurationKey           = "pod_start_total_duration_seconds"
	FirstNetworkPodStartSLIDurationKey = "first_network_pod_start_sli_duration_seconds"
	PodStatusSyncDurationKey           = "pod_status_sync_duration_seconds"
	PLEGRelistDurationKey              = "pleg_relist_duration_seconds"
	PLEGDiscardEventsKey               = "pleg_discard_events"
	PLEGRelistIntervalKey              = "pleg_relist_interval_seconds"
	PLEGLastSeenKey                    = "pleg_last_seen_seconds"
	RunningPodsKey                     = "running_pods"
	RunningContainersKey               = "running_containers"
	RuntimeOperationsKey               = "runtime_operations_total"
	RuntimeOperationsDurationKey       = "runtime_operations_duration_seconds"
	RuntimeOperationsErrorsKey         = "runtime_operations_errors_total"
	RunPodSandboxDurationKey           = "run_podsandbox_duration_seconds"
	RunPodSandboxErrorsKey             = "run_podsandbox_errors_total"
	StartedPodsTotalKey                = "started_pods_total"
	StartedPodsErrorsTotalKey          = "started_pods_errors_total"
	StartedContainersTotalKey          = "started_containers_total"
	StartedContainersErrorsTotalKey    = "started_containers_errors_total"

	// The container_type label's values.
	Container          = "container"
	InitContainer      = "init_container"
	EphemeralContainer = "ephemeral_container"
)

// The prober's results (upstream's probeResult* of pkg/kubelet/prober).
const (
	ProbeResultSuccessful = "successful"
	ProbeResultFailed     = "failed"
	ProbeResultUnknown    = "unknown"
)

// podStartupDurationBuckets are upstream's, hand-picked round numbers of
// seconds from half a second to an hour.
var podStartupDurationBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

// containerStates are the states kubelet_running_containers counts
// (kubecontainer.State's values).
var containerStates = []string{"created", "running", "exited", "unknown"}

// Metrics are one kubelet's series and their registries. A nil *Metrics
// records nothing.
type Metrics struct {
	clock         clock.PassiveClock
	registry      compbasemetrics.KubeRegistry
	probeRegistry compbasemetrics.KubeRegistry
	tracker       *podStartupLatencyTracker

	nodeName                        *compbasemetrics.GaugeVec
	podWorkerDuration               *compbasemetrics.HistogramVec
	podStartDuration                *compbasemetrics.Histogram
	podStartSLIDuration             *compbasemetrics.Histogram
	podStartTotalDuration           *compbasemetrics.Histogram
	firstNetworkPodStartSLIDuration *compbasemetrics.Gauge
	podStatusSyncDuration           *compbasemetrics.Histogram
	plegRelistDuration              *compbasemetrics.Histogram
	plegRelistInterval              *compbasemetrics.Histogram
	plegDiscardEvents               *compbasemetrics.Counter
	plegLastSeen                    *compbasemetrics.Gauge
	runningPods                     *compbasemetrics.Gauge
	runningContainers               *compbasemetrics.GaugeVec
	runtimeOperations               *compbasemetrics.CounterVec
	runtimeOperationsDuration       *compbasemetrics.HistogramVec
	runtimeOperationsErrors         *compbasemetrics.CounterVec
	runPodSandboxDuration           *compbasemetrics.HistogramVec
	runPodSandboxErrors             *compbasemetrics.CounterVec
	startedPods                     *compbasemetrics.Counter
	startedPodsErrors               *compbasemetrics.Counter
	startedContainers               *compbasemetrics.CounterVec
	startedContainersErrors         *compbasemetrics.CounterVec

	proberResults  *compbasemetrics.CounterVec
	proberDuration *compbasemetrics.HistogramVec
}

// New returns the series, registered in a registry of their own, timed
// on the real clock.
func New() *Metrics { return NewWithClock(clock.RealClock{}) }

// NewWithClock is New with the clock durations are measured on (the
// kubelet's: a test's fake clock drives them); nil is the real clock.
func NewWithClock(clk clock.PassiveClock) *Metrics {
	if clk == nil {
		clk = clock.RealClock{}
	}
	m := &Metrics{
		clock:         clk,
		registry:      compbasemetrics.NewKubeRegistry(),
		probeRegistry: compbasemetrics.NewKubeRegistry(),
	}
	m.tracker = newPodStartupLatencyTracker(m)
	alpha := compbasemetrics.ALPHA
	histogram := func(name, help string, buckets []float64) *compbasemetrics.Histogram {
		return compbasemetrics.NewHistogram(&compbasemetrics.HistogramOpts{
			Subsystem: KubeletSubsystem, Name: name, Help: help, Buckets: buckets, StabilityLevel: alpha})
	}
	counter := func(name, help string) *compbasemetrics.Counter {
		return compbasemetrics.NewCounter(&compbasemetrics.CounterOpts{
			Subsystem: KubeletSubsystem, Name: name, Help: help, StabilityLevel: alpha})
	}
	gauge := func(name, help string) *compbasemetrics.Gauge {
		return compbasemetrics.NewGauge(&compbasemetrics.GaugeOpts{
			Subsystem: KubeletSubsystem, Name: name, Help: help, StabilityLevel: alpha})
	}
	m.nodeName = compbasemetrics.NewGaugeVec(&compbasemetrics.GaugeOpts{Subsystem: KubeletSubsystem, Name: NodeNameKey,
		Help: "The node's name. The count is always 1.", StabilityLevel: alpha}, []string{NodeLabelKey})
	m.podWorkerDuration = compbasemetrics.NewHistogramVec(&compbasemetrics.HistogramOpts{Subsystem: KubeletSubsystem, Name: PodWorkerDurationKey,
		Help:    "Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync",
		Buckets: compbasemetrics.DefBuckets, StabilityLevel: alpha}, []string{"operation_type"})
	m.podStartDuration = histogram(PodStartDurationKey,
		"Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run", podStartupDurationBuckets)
	m.podStartSLIDuration = histogram(PodStartSLIDurationKey,
		"Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
		podStartupDurationBuckets)
	m.podStartTotalDuration = histogram(PodStartTotalDurationKey,
		"Duration in seconds to start a pod since creation, including time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
		podStartupDurationBuckets)
	m.firstNetworkPodStartSLIDuration = compbasemetrics.NewGauge(&compbasemetrics.GaugeOpts{Subsystem: KubeletSubsystem, Name: FirstNetworkPodStartSLIDurationKey,
		Help:           "Duration in seconds to start the first network pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
		StabilityLevel: compbasemetrics.INTERNAL})
	m.podStatusSyncDuration = histogram(PodStatusSyncDurationKey,
		"Duration in seconds to sync a pod status update. Measures time from detection of a change to pod status until the API is successfully updated for that pod, even if multiple intevening changes to pod status occur.",
		[]float64{0.010, 0.050, 0.100, 0.500, 1, 5, 10, 20, 30, 45, 60})
	m.plegRelistDuration = histogram(PLEGRelistDurationKey, "Duration in seconds for relisting pods in PLEG.", compbasemetrics.DefBuckets)
	m.plegRelistInterval = histogram(PLEGRelistIntervalKey, "Interval in seconds between relisting in PLEG.", compbasemetrics.DefBuckets)
	m.plegDiscardEvents = counter(PLEGDiscardEventsKey, "The number of discard events in PLEG.")
	m.plegLastSeen = gauge(PLEGLastSeenKey, "Timestamp in seconds when PLEG was last seen active.")
	m.runningPods = gauge(RunningPodsKey, "Number of pods that have a running pod sandbox")
	m.runningContainers = compbasemetrics.NewGaugeVec(&compbasemetrics.GaugeOpts{Subsystem: KubeletSubsystem, Name: RunningContainersKey,
		Help: "Number of containers currently running", StabilityLevel: alpha}, []string{"container_state"})
	m.runtimeOperations = compbasemetrics.NewCounterVec(&compbasemetrics.CounterOpts{Subsystem: KubeletSubsystem, Name: RuntimeOperationsKey,
		Help: "Cumulative number of runtime operations by operation type.", StabilityLevel: alpha}, []string{"operation_type"})
	m.runtimeOperationsDuration = compbasemetrics.NewHistogramVec(&compbasemetrics.HistogramOpts{Subsystem: KubeletSubsystem, Name: RuntimeOperationsDurationKey,
		Help:    "Duration in seconds of runtime operations. Broken down by operation type.",
		Buckets: compbasemetrics.ExponentialBuckets(.005, 2.5, 14), StabilityLevel: alpha}, []string{"operation_type"})
	m.runtimeOperationsErrors = compbasemetrics.NewCounterVec(&compbasemetrics.CounterOpts{Subsystem: KubeletSubsystem, Name: RuntimeOperationsErrorsKey,
		Help: "Cumulative number of runtime operation errors by operation type.", StabilityLevel: alpha}, []string{"operation_type"})
	m.runPodSandboxDuration = compbasemetrics.NewHistogramVec(&compbasemetrics.HistogramOpts{Subsystem: KubeletSubsystem, Name: RunPodSandboxDurationKey,
		Help:    "Duration in seconds of the run_podsandbox operations. Broken down by RuntimeClass.Handler.",
		Buckets: compbasemetrics.DefBuckets, StabilityLevel: alpha}, []string{"runtime_handler"})
	m.runPodSandboxErrors = compbasemetrics.NewCounterVec(&compbasemetrics.CounterOpts{Subsystem: KubeletSubsystem, Name: RunPodSandboxErrorsKey,
		Help: "Cumulative number of the run_podsandbox operation errors by RuntimeClass.Handler.", StabilityLevel: alpha}, []string{"runtime_handler"})
	m.startedPods = counter(StartedPodsTotalKey, "Cumulative number of pods started")
	m.startedPodsErrors = counter(StartedPodsErrorsTotalKey, "Cumulative number of errors when starting pods")
	m.startedContainers = compbasemetrics.NewCounterVec(&compbasemetrics.CounterOpts{Subsystem: KubeletSubsystem, Name: StartedContainersTotalKey,
		Help: "Cumulative number of containers started", StabilityLevel: alpha}, []string{"container_type"})
	m.startedContainersErrors = compbasemetrics.NewCounterVec(&compbasemetrics.CounterOpts{Subsystem: KubeletSubsystem, Name: StartedContainersErrorsTotalKey,
		Help: "Cumulative number of errors when starting containers", StabilityLevel: alpha}, []string{"container_type", "code"})
	m.registry.MustRegister(m.nodeName, m.podWorkerDuration, m.podStartDuration, m.podStartSLIDuration, m.podStartTotalDuration,
		m.firstNetworkPodStartSLIDuration, m.podStatusSyncDuration, m.plegRelistDuration, m.plegRelistInterval, m.plegDiscardEvents,
		m.plegLastSeen, m.runningPods, m.runningContainers, m.runtimeOperations, m.runtimeOperationsDuration, m.runtimeOperationsErrors,
		m.runPodSandboxDuration, m.runPodSandboxErrors, m.startedPods, m.startedPodsErrors, m.startedContainers, m.startedContainersErrors)

	// The prober's series (upstream's ProberResults and ProberDuration in
	// pkg/kubelet/prober), served on /metrics/probes.
	m.proberResults = compbasemetrics.NewCounterVec(&compbasemetrics.CounterOpts{Subsystem: "prober", Name: "probe_total",
		Help:           "Cumulative number of a liveness, readiness or startup probe for a container by result.",
		StabilityLevel: compbasemetrics.BETA}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"})
	m.proberDuration = compbasemetrics.NewHistogramVec(&compbasemetrics.HistogramOpts{Subsystem: "prober", Name: "probe_duration_seconds",
		Help: "Duration in seconds for a probe response.", StabilityLevel: alpha}, []string{"probe_type", "container", "pod", "namespace"})
	m.probeRegistry.MustRegister(m.proberResults, m.proberDuration)
	return m
}

// Handler serves /metrics: the kubelet's series, in the Prometheus text
// format. A nil *Metrics serves 404.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return compbasemetrics.HandlerFor(m.registry, compbasemetrics.HandlerOpts{})
}

// ProbeHandler serves /metrics/probes: the prober's series. A nil
// *Metrics serves 404.
func (m *Metrics) ProbeHandler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return compbasemetrics.HandlerFor(m.probeRegistry, compbasemetrics.HandlerOpts{})
}

// Gatherer is the registry Handler serves (component-base's
// testutil.GatherAndCompare reads it in tests); nil for a nil *Metrics.
func (m *Metrics) Gatherer() compbasemetrics.Gatherer {
	if m == nil {
		return nil
	}
	return m.registry
}

// ProbeGatherer is the registry ProbeHandler serves; nil for a nil
// *Metrics.
func (m *Metrics) ProbeGatherer() compbasemetrics.Gatherer {
	if m == nil {
		return nil
	}
	return m.probeRegistry
}

// Now is the time on the Metrics' clock (the zero time for a nil one):
// what a caller without a clock of its own starts a measurement with.
func (m *Metrics) Now() time.Time {
	if m == nil {
		return time.Time{}
	}
	return m.clock.Now()
}

// SetNodeName sets kubelet_node_name{node=name} to 1.
func (m *Metrics) SetNodeName(name string) {
	if m == nil {
		return
	}
	m.nodeName.WithLabelValues(name).Set(1)
}

// ObservePodWorkerDuration records one pod worker sync of operationType
// (create, update, sync, kill, terminated) that took d.
func (m *Metrics) ObservePodWorkerDuration(operationType string, d time.Duration) {
	if m == nil {
		return
	}
	m.podWorkerDuration.WithLabelValues(operationType).Observe(d.Seconds())
}

// ObservePodStartDuration records how long a pod took from the kubelet
// first seeing it to running (kubelet_pod_start_duration_seconds).
func (m *Metrics) ObservePodStartDuration(d time.Duration) {
	if m == nil {
		return
	}
	m.podStartDuration.Observe(d.Seconds())
}

// ObservePodStatusSyncDuration records how long a status change took to
// reach the API server.
func (m *Metrics) ObservePodStatusSyncDuration(d time.Duration) {
	if m == nil {
		return
	}
	m.podStatusSyncDuration.Observe(d.Seconds())
}

// ObservePLEGRelist records one relist that took duration; interval is
// the time since the previous relist began (zero for the first relist:
// not observed).
func (m *Metrics) ObservePLEGRelist(duration, interval time.Duration) {
	if m == nil {
		return
	}
	m.plegRelistDuration.Observe(duration.Seconds())
	if interval > 0 {
		m.plegRelistInterval.Observe(interval.Seconds())
	}
}

// PLEGDiscardedEvent counts one event the PLEG dropped on a full channel.
func (m *Metrics) PLEGDiscardedEvent() {
	if m == nil {
		return
	}
	m.plegDiscardEvents.Inc()
}

// SetPLEGLastSeen records when the PLEG was last seen active.
func (m *Metrics) SetPLEGLastSeen(t time.Time) {
	if m == nil {
		return
	}
	m.plegLastSeen.Set(float64(t.Unix()))
}

// SetRunningPodsAndContainers sets kubelet_running_pods (pods with a
// running sandbox) and kubelet_running_containers by container state
// ("created", "running", "exited", "unknown"; a state missing from
// containers is set to 0).
func (m *Metrics) SetRunningPodsAndContainers(runningPods int, containers map[string]int) {
	if m == nil {
		return
	}
	m.runningPods.Set(float64(runningPods))
	for _, s := range containerStates {
		m.runningContainers.WithLabelValues(s).Set(float64(containers[s]))
	}
	for s, n := range containers {
		m.runningContainers.WithLabelValues(s).Set(float64(n)) // a state a runtime invented
	}
}

// RecordRuntimeOperation counts one CRI call of operation (upstream's
// operation names: "run_podsandbox", "list_containers", …) that began at
// start on the Metrics' clock, and its error if any.
func (m *Metrics) RecordRuntimeOperation(operation string, start time.Time, err error) {
	if m == nil {
		return
	}
	m.runtimeOperations.WithLabelValues(operation).Inc()
	m.runtimeOperationsDuration.WithLabelValues(operation).Observe(m.clock.Since(start).Seconds())
	if err != nil {
		m.runtimeOperationsErrors.WithLabelValues(operation).Inc()
	}
}

// RecordRunPodSandbox records one RunPodSandbox call of a runtime handler
// ("" for the default), begun at start.
func (m *Metrics) RecordRunPodSandbox(runtimeHandler string, start time.Time, err error) {
	if m == nil {
		return
	}
	m.runPodSandboxDuration.WithLabelValues(runtimeHandler).Observe(m.clock.Since(start).Seconds())
	if err != nil {
		m.runPodSandboxErrors.WithLabelValues(runtimeHandler).Inc()
	}
}

// StartedPod counts a pod sandbox the kubelet tried to start, and the
// error if it could not.
func (m *Metrics) StartedPod(err error) {
	if m == nil {
		return
	}
	m.startedPods.Inc()
	if err != nil {
		m.startedPodsErrors.Inc()
	}
}

// StartedContainer counts a container of containerType (Container,
// InitContainer, EphemeralContainer) the kubelet tried to start, and, if
// it could not, the error's code (its text: the kuberuntime Err values,
// of few kinds).
func (m *Metrics) StartedContainer(containerType string, err error) {
	if m == nil {
		return
	}
	m.startedContainers.WithLabelValues(containerType).Inc()
	if err != nil {
		m.startedContainersErrors.WithLabelValues(containerType, err.Error()).Inc()
	}
}

// ProbeLabels name one probe worker's series on /metrics/probes.
type ProbeLabels struct {
	// ProbeType is "Liveness", "Readiness" or "Startup" (upstream's).
	ProbeType string
	Container string
	// Pod is the pod's name without the suffix its controller generated
	// (see PodLabelName).
	Pod       string
	Namespace string
	PodUID    string
}

// RecordProbe counts one probe of a worker with result (ProbeResult*)
// and, unless it failed (as upstream), records how long it took.
func (m *Metrics) RecordProbe(l ProbeLabels, result string, took time.Duration) {
	if m == nil {
		return
	}
	m.proberResults.WithLabelValues(l.ProbeType, result, l.Container, l.Pod, l.Namespace, l.PodUID).Inc()
	if result != ProbeResultFailed {
		m.proberDuration.WithLabelValues(l.ProbeType, l.Container, l.Pod, l.Namespace).Observe(took.Seconds())
	}
}

// DeleteProbe forgets a probe worker's series (its worker stopped).
func (m *Metrics) DeleteProbe(l ProbeLabels) {
	if m == nil {
		return
	}
	labels := map[string]string{"probe_type": l.ProbeType, "container": l.Container, "pod": l.Pod, "namespace": l.Namespace}
	m.proberDuration.Delete(labels)
	labels["pod_uid"] = l.PodUID
	for _, r := range []string{ProbeResultSuccessful, ProbeResultFailed, ProbeResultUnknown} {
		labels["result"] = r
		m.proberResults.Delete(labels)
	}
}

// PodLabelName is the pod label of the prober's series: a pod's name
// without the suffix its controller generated (and a Deployment's
// pod-template-hash), as upstream's getPodLabelName, so that the series of
// a Deployment's pods share a name.
func PodLabelName(pod *v1.Pod) string {
	name := pod.Name
	if pod.GenerateName == "" {
		return name
	}
	if i := strings.LastIndex(name, "-"); i >= 0 {
		name = name[:i]
	}
	if hash, ok := pod.Labels["pod-template-hash"]; ok {
		name = strings.ReplaceAll(name, "-"+hash, "")
	}
	return name
}
