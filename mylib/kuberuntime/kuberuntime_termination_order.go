package kuberuntime

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	kubecontainer "mykubelet/mylib/container"
)

// terminationOrdering makes a pod's sidecars stop after its regular
// containers, and each sidecar after the sidecars that follow it in the
// spec (upstream's terminationOrdering, in kuberuntime_termination_order.go).
// Every container of the pod is told to stop at once; a sidecar first
// waits for its turn, at most for its grace period, and stops with what
// is left of it.
type terminationOrdering struct {
	clock clock.Clock
	// prereqs are, per container name, the channels of the containers it
	// waits for; each is closed when that container has stopped.
	prereqs    map[string][]chan struct{}
	terminated map[string]chan struct{}
	mu         sync.Mutex // guards closing terminated's channels
}

// newTerminationOrdering builds the ordering of the running containers
// named in running. A container that is not running waits for nothing and
// is waited for by nobody.
func newTerminationOrdering(clk clock.Clock, pod *v1.Pod, running []string) *terminationOrdering {
	o := &terminationOrdering{clock: clk, prereqs: map[string][]chan struct{}{}, terminated: map[string]chan struct{}{}}
	isRunning := map[string]bool{}
	for _, n := range running {
		isRunning[n] = true
	}
	var mains []chan struct{}
	for _, c := range pod.Spec.Containers {
		if isRunning[c.Name] {
			ch := make(chan struct{})
			o.terminated[c.Name] = ch
			mains = append(mains, ch)
		}
	}
	// From the last sidecar to the first: each waits for every regular
	// container and for the running sidecar after it (which itself waited
	// for the ones after it).
	var next chan struct{}
	for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
		c := &pod.Spec.InitContainers[i]
		if !kubecontainer.IsRestartableInitContainer(c) || !isRunning[c.Name] {
			continue
		}
		ch := make(chan struct{})
		o.terminated[c.Name] = ch
		o.prereqs[c.Name] = append([]chan struct{}{}, mains...)
		if next != nil {
			o.prereqs[c.Name] = append(o.prereqs[c.Name], next)
		}
		next = ch
	}
	return o
}

// waitForTurn blocks until every container name waits for has stopped, or
// gracePeriod seconds have passed, and returns the seconds it waited.
func (o *terminationOrdering) waitForTurn(name string, gracePeriod int64) float64 {
	if gracePeriod <= 0 || len(o.prereqs[name]) == 0 {
		return 0
	}
	start := o.clock.Now()
	timeout := o.clock.After(time.Duration(gracePeriod) * time.Second)
	for _, ch := range o.prereqs[name] {
		select {
		case <-ch:
		case <-timeout:
			return o.clock.Since(start).Seconds()
		}
	}
	return o.clock.Since(start).Seconds()
}

// containerTerminated records that the named container has stopped (or
// failed to: either way its dependents go on).
func (o *terminationOrdering) containerTerminated(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ch, ok := o.terminated[name]; ok {
		close(ch)
		delete(o.terminated, name)
	}
}
