package kubelet

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// The sync loop's wait while the runtime is unhealthy: 100 ms, doubling up
// to 5 s (upstream's syncLoop).
const (
	runtimeErrorBackoffBase = 100 * time.Millisecond
	runtimeErrorBackoffMax  = 5 * time.Second
)

// runtimeState holds the health checks the sync loop asks before each
// iteration (upstream: pkg/kubelet/runtime.go). Upstream also checks that
// the runtime answered its Status call recently and that its network is
// ready; here the PLEG's health is the only check: a PLEG that cannot
// relist means the kubelet's view of the containers is stale.
type runtimeState struct {
	mu           sync.RWMutex
	healthChecks []healthCheck
}

type healthCheck struct {
	name string
	fn   func() (bool, error)
}

// addHealthCheck adds a check named name (e.g. "PLEG").
func (s *runtimeState) addHealthCheck(name string, fn func() (bool, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.healthChecks = append(s.healthChecks, healthCheck{name: name, fn: fn})
}

// runtimeErrors returns one error per failing check, "PLEG is not healthy:
// pleg was last seen active 3m0.1s ago; threshold is 3m0s", or nil.
func (s *runtimeState) runtimeErrors() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var errs []error
	for _, hc := range s.healthChecks {
		if ok, err := hc.fn(); !ok {
			errs = append(errs, fmt.Errorf("%s is not healthy: %w", hc.name, err))
		}
	}
	return errors.Join(errs...)
}
