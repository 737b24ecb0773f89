// Package results holds the probe results the kubelet acts on: one Manager
// per probe kind (liveness, readiness, startup), keyed by container ID, with
// a channel of changes the sync loop reads (upstream
// pkg/kubelet/prober/results).
//
// It follows upstream closely; the only departure is that Result has no
// metrics of its own.
package results

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	kubecontainer "mykubelet/mylib/container"
)

// Result is the outcome of a probe, as the kubelet keeps it.
type Result int

const (
	// Unknown: not probed yet (the startup probe's first value).
	Unknown Result = iota - 1
	// Success: the probe passed (enough times in a row).
	Success
	// Failure: the probe failed (enough times in a row).
	Failure
)

func (r Result) String() string {
	switch r {
	case Success:
		return "Success"
	case Failure:
		return "Failure"
	default:
		return "UNKNOWN"
	}
}

// ToPrometheusType is upstream's name for the result as a number:
// 0 success, 1 failure, -1 unknown.
func (r Result) ToPrometheusType() float64 { return float64(r) }

// Update is a change of a container's result, for the sync loop.
type Update struct {
	ContainerID kubecontainer.ContainerID
	Result      Result
	PodUID      types.UID
}

// Manager keeps the latest result of each container for one probe kind.
type Manager interface {
	// Get returns the container's cached result, if any.
	Get(kubecontainer.ContainerID) (Result, bool)
	// Set caches the container's result; a change is sent on Updates.
	Set(kubecontainer.ContainerID, Result, *v1.Pod)
	// Remove forgets the container.
	Remove(kubecontainer.ContainerID)
	// Updates is where changes arrive.
	Updates() <-chan Update
}

// UpdatesCapacity is the buffer of the updates channel, upstream's 20. A
// Set that changes a result blocks while the channel is full, as upstream.
const UpdatesCapacity = 20

type manager struct {
	mu      sync.RWMutex
	cache   map[kubecontainer.ContainerID]Result
	updates chan Update
}

// NewManager returns an empty results manager.
func NewManager() Manager {
	return &manager{cache: map[kubecontainer.ContainerID]Result{}, updates: make(chan Update, UpdatesCapacity)}
}

func (m *manager) Get(id kubecontainer.ContainerID) (Result, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	r, ok := m.cache[id]
	return r, ok
}

func (m *manager) Set(id kubecontainer.ContainerID, result Result, pod *v1.Pod) {
	if m.setInternal(id, result) {
		m.updates <- Update{ContainerID: id, Result: result, PodUID: pod.UID}
	}
}

// setInternal caches result and reports whether it changed.
func (m *manager) setInternal(id kubecontainer.ContainerID, result Result) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	prev, exists := m.cache[id]
	if !exists || prev != result {
		m.cache[id] = result
		return true
	}
	return false
}

func (m *manager) Remove(id kubecontainer.ContainerID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.cache, id)
}

func (m *manager) Updates() <-chan Update { return m.updates }
