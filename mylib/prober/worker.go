package prober

import (
	"context"
	"math/rand/v2"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/metrics"
	"mykubelet/mylib/prober/results"
)

// worker probes one container with one probe, every periodSeconds, and
// keeps its result in the results manager of its kind. It runs until
// stopped, or until its pod has terminated.
type worker struct {
	// stopCh and manualTriggerCh have room for one: stop and trigger
	// never block.
	stopCh          chan struct{}
	manualTriggerCh chan struct{}

	pod       *v1.Pod
	container v1.Container
	spec      *v1.Probe
	probeType probeType

	// initialValue is the result a new container starts with: readiness
	// Failure (not ready until a probe passes), liveness Success, startup
	// Unknown.
	initialValue   results.Result
	resultsManager results.Manager
	probeManager   *manager

	containerID kubecontainer.ContainerID
	lastResult  results.Result
	resultRun   int  // how many times in a row lastResult came
	onHold      bool // a liveness or startup failure: wait for a new container

	// metricLabels name this worker's series on /metrics/probes.
	metricLabels metrics.ProbeLabels
}

func newWorker(m *manager, t probeType, pod *v1.Pod, c v1.Container) *worker {
	w := &worker{
		stopCh:          make(chan struct{}, 1),
		manualTriggerCh: make(chan struct{}, 1),
		pod:             pod,
		container:       c,
		probeType:       t,
		probeManager:    m,
		metricLabels: metrics.ProbeLabels{ProbeType: t.String(), Container: c.Name, Pod: metrics.PodLabelName(pod),
			Namespace: pod.Namespace, PodUID: string(pod.UID)},
	}
	switch t {
	case readiness:
		w.spec, w.resultsManager, w.initialValue = c.ReadinessProbe, m.readinessManager, results.Failure
	case liveness:
		w.spec, w.resultsManager, w.initialValue = c.LivenessProbe, m.livenessManager, results.Success
	case startup:
		w.spec, w.resultsManager, w.initialValue = c.StartupProbe, m.startupManager, results.Unknown
	}
	return w
}

// period is periodSeconds (10 s if unset: the API server's default).
func (w *worker) period() time.Duration {
	if w.spec.PeriodSeconds <= 0 {
		return 10 * time.Second
	}
	return time.Duration(w.spec.PeriodSeconds) * time.Second
}

// run probes at once, then on every tick or trigger, until stopped. A
// kubelet that has just started spreads its workers over one period first,
// as upstream does, so that they do not all probe at the same instant.
func (w *worker) run(ctx context.Context) {
	m := w.probeManager
	period := w.period()
	defer func() {
		if !w.containerID.IsEmpty() {
			w.resultsManager.Remove(w.containerID)
		}
		// Series first, then the worker: once the manager no longer lists
		// this worker, nothing of it is left to read. (Upstream removes the
		// worker first; a reader between the two then sees its series.)
		m.metrics.DeleteProbe(w.metricLabels)
		m.removeWorker(w.pod.UID, w.container.Name, w.probeType)
	}()
	if period > m.clock.Since(m.start) {
		if d := m.jitter(period); d > 0 {
			t := m.clock.NewTimer(d)
			select {
			case <-t.C():
			case <-w.stopCh:
				t.Stop()
				return
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
	}
	ticker := m.clock.NewTicker(period)
	defer ticker.Stop()
	for w.doProbe(ctx) {
		select {
		case <-w.stopCh:
			return
		case <-ctx.Done():
			return
		case <-ticker.C():
		case <-w.manualTriggerCh:
		}
	}
}

// stop asks the worker to end; it cleans up and leaves the manager itself.
func (w *worker) stop() {
	select {
	case w.stopCh <- struct{}{}:
	default:
	}
}

// trigger asks for a probe now (UpdatePodStatus does, for a container with
// no readiness result yet).
func (w *worker) trigger() {
	select {
	case w.manualTriggerCh <- struct{}{}:
	default:
	}
}

// doProbe probes once, if it is time, and records the result once it has
// come successThreshold (or failureThreshold) times in a row. It returns
// whether the worker should go on. Upstream's steps, in its order:
//  1. no status yet: wait; a pod that has terminated: stop.
//  2. a new container ID: start it from initialValue, off hold.
//  3. on hold (after a liveness or startup failure): wait for a new container.
//  4. a container not running: Failure; stop if it will not be restarted.
//  5. within initialDelaySeconds of its start: wait.
//  6. not started yet (startup probe pending): only the startup probe runs;
//     started: the startup probe does not.
//  7. probe, count, and record at the threshold.
func (w *worker) doProbe(ctx context.Context) bool {
	m := w.probeManager
	start := m.clock.Now()
	status, ok := m.statusManager.GetPodStatus(w.pod.UID)
	if !ok {
		return true
	}
	if status.Phase == v1.PodFailed || status.Phase == v1.PodSucceeded {
		return false
	}
	statuses := status.ContainerStatuses
	sidecar := kubecontainer.IsRestartableInitContainer(&w.container)
	if sidecar {
		statuses = status.InitContainerStatuses
	}
	c, ok := findStatus(statuses, w.container.Name)
	if !ok || c.ContainerID == "" {
		return true
	}
	if w.containerID.String() != c.ContainerID {
		if !w.containerID.IsEmpty() {
			w.resultsManager.Remove(w.containerID)
		}
		id, err := kubecontainer.ParseContainerID(c.ContainerID)
		if err != nil {
			return true
		}
		w.containerID = id
		w.resultsManager.Set(w.containerID, w.initialValue, w.pod)
		w.onHold = false
	}
	if w.onHold {
		return true
	}
	if c.State.Running == nil {
		w.resultsManager.Set(w.containerID, results.Failure, w.pod)
		// A sidecar is restarted whatever the pod's policy.
		return c.State.Terminated == nil || sidecar || w.pod.Spec.RestartPolicy != v1.RestartPolicyNever
	}
	if w.pod.DeletionTimestamp != nil && (w.probeType == liveness || w.probeType == startup) {
		w.resultsManager.Set(w.containerID, results.Success, w.pod) // a quiet shutdown
		return false
	}
	if int32(m.clock.Since(c.State.Running.StartedAt.Time).Seconds()) < w.spec.InitialDelaySeconds {
		return true
	}
	if c.Started != nil && *c.Started {
		if w.probeType == startup {
			return true
		}
	} else if w.probeType != startup {
		return true
	}

	result, err := m.prober.probe(ctx, w.probeType, w.pod, status, w.container, w.containerID)
	if err != nil {
		return true // could not probe: keep the last result
	}
	switch result {
	case results.Success:
		m.metrics.RecordProbe(w.metricLabels, metrics.ProbeResultSuccessful, m.clock.Since(start))
	case results.Failure:
		m.metrics.RecordProbe(w.metricLabels, metrics.ProbeResultFailed, 0)
	default:
		m.metrics.RecordProbe(w.metricLabels, metrics.ProbeResultUnknown, m.clock.Since(start))
	}
	if w.lastResult == result {
		w.resultRun++
	} else {
		w.lastResult, w.resultRun = result, 1
	}
	if (result == results.Failure && w.resultRun < threshold(w.spec.FailureThreshold, 3)) ||
		(result == results.Success && w.resultRun < threshold(w.spec.SuccessThreshold, 1)) {
		return true // below the threshold: the state stays
	}
	w.resultsManager.Set(w.containerID, result, w.pod)
	if (w.probeType == liveness || w.probeType == startup) && result == results.Failure {
		// The container will be killed: probe no more until a new one runs.
		w.onHold, w.resultRun = true, 0
		klog.V(2).InfoS("Probe failed at its threshold; on hold until a new container", "probeType", w.probeType, "pod", klog.KObj(w.pod), "containerName", w.container.Name)
	}
	return true
}

// threshold is t, or the API server's default when unset.
func threshold(t int32, def int) int {
	if t <= 0 {
		return def
	}
	return int(t)
}

func findStatus(statuses []v1.ContainerStatus, name string) (v1.ContainerStatus, bool) {
	for _, s := range statuses {
		if s.Name == name {
			return s, true
		}
	}
	return v1.ContainerStatus{}, false
}

// randomJitter is a random part of d.
func randomJitter(d time.Duration) time.Duration { return time.Duration(rand.Float64() * float64(d)) }
