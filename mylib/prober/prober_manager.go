// Package prober runs the containers' startup, liveness and readiness
// probes, as the kubelet's prober does (upstream pkg/kubelet/prober): a
// Manager starts one worker per container and probe (AddPod), each probing
// every periodSeconds on the injected clock and keeping the result, once
// it has come successThreshold or failureThreshold times in a row, in a
// results manager per kind (package results). The kubelet's sync loop
// reads their Updates: a liveness or startup failure makes it sync the pod,
// whose runtime manager then kills and restarts the container; readiness
// changes its status. UpdatePodStatus fills each container's ready and
// started fields in the status the kubelet writes.
//
// The handlers: exec runs through CRI ExecSync; httpGet, tcpSocket and
// grpc connect to the pod's IP from the kubelet's own network namespace,
// as upstream.
//
// Where it departs from upstream, and why:
//   - prober_probe_total and prober_probe_duration_seconds go to the
//     *metrics.Metrics of Config (one kubelet's registry), not to
//     process-wide series;
//   - Close stops every worker and waits for them, so a test or a stopping
//     kubelet leaves no goroutine behind;
//   - a probe field left at zero takes the API server's default (period
//     10 s, timeout 1 s, thresholds 1 and 3), for pods built in tests.
package prober

import (
	"context"
	"errors"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/metrics"
	"mykubelet/mylib/prober/results"
)

// StatusProvider gives the pod's status as the kubelet last computed it
// (the status manager's GetPodStatus).
type StatusProvider interface {
	GetPodStatus(uid types.UID) (v1.PodStatus, bool)
}

// Manager manages the probe workers.
type Manager interface {
	// AddPod starts a worker for each probe of each container of pod.
	AddPod(pod *v1.Pod)
	// StopLivenessAndStartup stops the pod's liveness and startup workers
	// (a pod that is terminating: its containers are being stopped anyway).
	StopLivenessAndStartup(pod *v1.Pod)
	// RemovePod stops the pod's workers.
	RemovePod(pod *v1.Pod)
	// CleanupPods stops the workers of every pod not in desired.
	CleanupPods(desired map[types.UID]bool)
	// UpdatePodStatus sets each container's Started and Ready in
	// podStatus from the probe results.
	UpdatePodStatus(pod *v1.Pod, podStatus *v1.PodStatus)
	// Close stops every worker and waits for them.
	Close()
}

// Config is what NewManager needs.
type Config struct {
	// StatusManager gives the pods' statuses. Required.
	StatusManager StatusProvider
	// LivenessManager, ReadinessManager, StartupManager receive the
	// results; nil: new ones (read them back with the Manager's getters).
	LivenessManager, ReadinessManager, StartupManager results.Manager
	// Runtime runs exec probes (ExecSync); nil makes them error.
	Runtime runtimeapi.RuntimeServiceClient
	// Recorder receives Unhealthy and ProbeWarning events; nil drops them.
	Recorder record.EventRecorder
	// Clock times the workers; nil: the real clock.
	Clock clock.WithTicker
	// Dial opens the connections of httpGet, tcpSocket and grpc probes;
	// nil: a plain net.Dialer (see GuardedDialer).
	Dial DialFunc
	// Jitter returns how long a worker started within its first period
	// waits, at most d; nil: a random part of d (upstream's).
	Jitter func(d time.Duration) time.Duration
	// Metrics counts each probe by result (prober_probe_total) and times
	// it (prober_probe_duration_seconds), as upstream's workers; nil:
	// nothing is recorded.
	Metrics *metrics.Metrics
}

type probeKey struct {
	podUID        types.UID
	containerName string
	probeType     probeType
}

type probeRunner interface {
	probe(ctx context.Context, t probeType, pod *v1.Pod, status v1.PodStatus, c v1.Container, id kubecontainer.ContainerID) (results.Result, error)
}

type manager struct {
	mu      sync.RWMutex
	workers map[probeKey]*worker

	statusManager    StatusProvider
	livenessManager  results.Manager
	readinessManager results.Manager
	startupManager   results.Manager
	prober           probeRunner
	clock            clock.WithTicker
	jitter           func(time.Duration) time.Duration
	start            time.Time
	metrics          *metrics.Metrics

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewManager checks cfg and returns a Manager with no workers.
func NewManager(cfg Config) (Manager, error) {
	return newManager(cfg)
}

func newManager(cfg Config) (*manager, error) {
	if cfg.StatusManager == nil {
		return nil, errors.New("prober: Config.StatusManager is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Jitter == nil {
		cfg.Jitter = randomJitter
	}
	for _, r := range []*results.Manager{&cfg.LivenessManager, &cfg.ReadinessManager, &cfg.StartupManager} {
		if *r == nil {
			*r = results.NewManager()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &manager{
		workers:          map[probeKey]*worker{},
		statusManager:    cfg.StatusManager,
		livenessManager:  cfg.LivenessManager,
		readinessManager: cfg.ReadinessManager,
		startupManager:   cfg.StartupManager,
		prober:           &prober{runtime: cfg.Runtime, recorder: cfg.Recorder, dial: cfg.Dial},
		clock:            cfg.Clock,
		jitter:           cfg.Jitter,
		start:            cfg.Clock.Now(),
		metrics:          cfg.Metrics,
		ctx:              ctx,
		cancel:           cancel,
	}, nil
}

// probedContainers are the pod's containers that may have probes: its
// sidecars (restartable init containers) and its regular containers, as
// upstream. A regular init container is never probed.
func probedContainers(pod *v1.Pod) []v1.Container {
	var out []v1.Container
	for i := range pod.Spec.InitContainers {
		if kubecontainer.IsRestartableInitContainer(&pod.Spec.InitContainers[i]) {
			out = append(out, pod.Spec.InitContainers[i])
		}
	}
	return append(out, pod.Spec.Containers...)
}

func (m *manager) AddPod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range probedContainers(pod) {
		for _, t := range []probeType{startup, readiness, liveness} {
			if probeOf(&c, t) == nil {
				continue
			}
			key := probeKey{pod.UID, c.Name, t}
			if _, ok := m.workers[key]; ok {
				klog.V(4).InfoS("Probe worker already exists", "pod", klog.KObj(pod), "containerName", c.Name, "probeType", t)
				continue
			}
			w := newWorker(m, t, pod, c)
			m.workers[key] = w
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				w.run(m.ctx)
			}()
		}
	}
}

func probeOf(c *v1.Container, t probeType) *v1.Probe {
	switch t {
	case readiness:
		return c.ReadinessProbe
	case liveness:
		return c.LivenessProbe
	default:
		return c.StartupProbe
	}
}

func (m *manager) stopWorkers(pod *v1.Pod, types ...probeType) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, c := range probedContainers(pod) {
		for _, t := range types {
			if w, ok := m.workers[probeKey{pod.UID, c.Name, t}]; ok {
				w.stop()
			}
		}
	}
}

func (m *manager) StopLivenessAndStartup(pod *v1.Pod) { m.stopWorkers(pod, liveness, startup) }

func (m *manager) RemovePod(pod *v1.Pod) { m.stopWorkers(pod, readiness, liveness, startup) }

func (m *manager) CleanupPods(desired map[types.UID]bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for key, w := range m.workers {
		if !desired[key.podUID] {
			w.stop()
		}
	}
}

func (m *manager) removeWorker(uid types.UID, name string, t probeType) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.workers, probeKey{uid, name, t})
}

func (m *manager) getWorker(uid types.UID, name string, t probeType) (*worker, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	w, ok := m.workers[probeKey{uid, name, t}]
	return w, ok
}

// workerCount is how many workers run (for tests and figures).
func (m *manager) workerCount() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.workers)
}

func (m *manager) UpdatePodStatus(pod *v1.Pod, podStatus *v1.PodStatus) {
	m.updateStatuses(pod, podStatus.ContainerStatuses)
	// Init containers: a regular one is ready once it completed and is
	// never "started" as such; a sidecar is started and ready as a
	// regular container is.
	sidecars := map[string]bool{}
	for i := range pod.Spec.InitContainers {
		if kubecontainer.IsRestartableInitContainer(&pod.Spec.InitContainers[i]) {
			sidecars[pod.Spec.InitContainers[i].Name] = true
		}
	}
	var probed []v1.ContainerStatus
	for i := range podStatus.InitContainerStatuses {
		c := &podStatus.InitContainerStatuses[i]
		if sidecars[c.Name] {
			probed = append(probed, *c)
			continue
		}
		started := c.State.Running != nil
		c.Started = &started
		c.Ready = c.State.Terminated != nil && c.State.Terminated.ExitCode == 0
	}
	m.updateStatuses(pod, probed)
	for _, p := range probed {
		for i := range podStatus.InitContainerStatuses {
			if podStatus.InitContainerStatuses[i].Name == p.Name {
				podStatus.InitContainerStatuses[i].Started, podStatus.InitContainerStatuses[i].Ready = p.Started, p.Ready
			}
		}
	}
}

// updateStatuses sets Started and Ready of statuses of probed containers.
func (m *manager) updateStatuses(pod *v1.Pod, statuses []v1.ContainerStatus) {
	for i := range statuses {
		c := &statuses[i]
		started := m.isContainerStarted(pod, c)
		c.Started = &started
		if !started {
			c.Ready = false
			continue
		}
		id, _ := kubecontainer.ParseContainerID(c.ContainerID) // a running container has one
		if result, ok := m.readinessManager.Get(id); ok && result == results.Success {
			c.Ready = true
			continue
		}
		w, exists := m.getWorker(pod.UID, c.Name, readiness)
		c.Ready = !exists // no readiness probe: ready once started
		if exists {
			w.trigger() // no result yet: probe now rather than at the next tick
		}
	}
}

// isContainerStarted: running, and its startup probe passed (or it has none).
func (m *manager) isContainerStarted(pod *v1.Pod, c *v1.ContainerStatus) bool {
	if c.State.Running == nil {
		return false
	}
	id, _ := kubecontainer.ParseContainerID(c.ContainerID)
	if result, ok := m.startupManager.Get(id); ok {
		return result == results.Success
	}
	_, exists := m.getWorker(pod.UID, c.Name, startup)
	return !exists
}

func (m *manager) Close() {
	m.cancel()
	m.wg.Wait()
}

// LivenessManager, ReadinessManager and StartupManager return the results
// managers a Manager made for itself (see Config).
func LivenessManager(m Manager) results.Manager  { return m.(*manager).livenessManager }
func ReadinessManager(m Manager) results.Manager { return m.(*manager).readinessManager }
func StartupManager(m Manager) results.Manager   { return m.(*manager).startupManager }
