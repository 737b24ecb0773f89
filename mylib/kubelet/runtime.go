// The runtime's health as the node's Ready condition sees it, as upstream's
// pkg/kubelet/runtime.go (runtimeState) and Kubelet.updateRuntimeUp: every
// RuntimeUpPeriod the kubelet asks the CRI for its Status; a runtime that
// has not answered for MaxWaitForContainerRuntime is "down", a condition
// RuntimeReady or NetworkReady that is false says so, and the health checks
// (the PLEG's) add theirs. The Ready setter reads RuntimeErrors; the sync
// loop syncs nothing while runtimeErrors says something (upstream's
// syncLoop).

package kubelet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Upstream's periods for the runtime's health.
const (
	// RuntimeUpPeriod is how often updateRuntimeUp asks the CRI for its
	// Status (upstream runs it every 5 s).
	RuntimeUpPeriod = 5 * time.Second
	// MaxWaitForContainerRuntime is how long the runtime may go without a
	// good Status before the node is NotReady (upstream's
	// maxWaitForContainerRuntime).
	MaxWaitForContainerRuntime = 30 * time.Second
	// runtimeStatusTimeout bounds one Status call.
	runtimeStatusTimeout = 2 * time.Minute
	// The sync loop's wait while the runtime is unhealthy: 100 ms,
	// doubling up to 5 s (upstream's syncLoop).
	runtimeErrorBackoffBase = 100 * time.Millisecond
	runtimeErrorBackoffMax  = 5 * time.Second
)

// ErrNetworkUnknown is the network's state before the first CRI Status.
var ErrNetworkUnknown = errors.New("network state unknown")

// healthCheck is a named check, such as the PLEG's Healthy.
type healthCheck struct {
	name string
	fn   func() (bool, error)
}

// runtimeState is what the kubelet knows of the runtime's health. Its zero
// value has no checks; with a threshold (a CRI to ask for its Status), a
// runtime without a good Status for that long is down.
type runtimeState struct {
	mu                       sync.RWMutex
	clock                    clock.Clock
	lastBaseRuntimeSync      time.Time
	baseRuntimeSyncThreshold time.Duration
	networkError             error
	runtimeError             error
	healthChecks             []healthCheck
	podCIDR                  podCIDRState // updatePodCIDR's (kubelet_network.go)
}

// newRuntimeState: threshold 0 means no Status to wait for (no CRI).
func newRuntimeState(threshold time.Duration, clk clock.Clock) *runtimeState {
	s := &runtimeState{clock: clk, baseRuntimeSyncThreshold: threshold}
	if threshold > 0 {
		s.networkError = ErrNetworkUnknown
	}
	return s
}

func (s *runtimeState) addHealthCheck(name string, fn func() (bool, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.healthChecks = append(s.healthChecks, healthCheck{name, fn})
}

func (s *runtimeState) setRuntimeSync(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastBaseRuntimeSync = t
}

func (s *runtimeState) setNetworkState(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.networkError = err
}

func (s *runtimeState) setRuntimeState(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runtimeError = err
}

// runtimeErrors: no good Status yet, or none for the threshold; a health
// check failing; RuntimeReady false.
func (s *runtimeState) runtimeErrors() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var errs []error
	switch {
	case s.baseRuntimeSyncThreshold == 0: // nothing to ask
	case s.lastBaseRuntimeSync.IsZero():
		errs = append(errs, errors.New("container runtime status check may not have completed yet"))
	case !s.lastBaseRuntimeSync.Add(s.baseRuntimeSyncThreshold).After(s.clock.Now()):
		errs = append(errs, errors.New("container runtime is down"))
	}
	for _, hc := range s.healthChecks {
		if ok, err := hc.fn(); !ok {
			errs = append(errs, fmt.Errorf("%s is not healthy: %w", hc.name, err))
		}
	}
	if s.runtimeError != nil {
		errs = append(errs, s.runtimeError)
	}
	return errors.Join(errs...)
}

func (s *runtimeState) networkErrors() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.networkError
}

// RuntimeErrors is why the node is not ready as far as the runtime goes,
// or nil: the runtime's errors and the network's. Without a pod half
// there is no runtime to ask, and it is nil. Pass it to the Ready setter
// (nodestatus.ReadyCondition).
func (kl *Kubelet) RuntimeErrors() error {
	if kl.runtimeState == nil {
		return nil
	}
	return errors.Join(kl.runtimeState.runtimeErrors(), kl.runtimeState.networkErrors())
}

// RuntimeVersion is "<runtime name>://<runtime version>" from the CRI's
// Version, as status.nodeInfo.containerRuntimeVersion shows it.
func (kl *Kubelet) RuntimeVersion(ctx context.Context) (string, error) {
	if kl.cri == nil {
		return "", errors.New("no container runtime")
	}
	ctx, cancel := context.WithTimeout(ctx, runtimeStatusTimeout)
	defer cancel()
	v, err := kl.cri.Version(ctx, &runtimeapi.VersionRequest{Version: "v1"})
	if err != nil {
		return "", fmt.Errorf("CRI Version: %w", err)
	}
	return v.RuntimeName + "://" + v.RuntimeVersion, nil
}

// updateRuntimeUp asks the runtime for its Status and records what it
// says: the network's readiness, the runtime's, and, when the runtime is
// ready, the time of this good answer.
func (kl *Kubelet) updateRuntimeUp(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, runtimeStatusTimeout)
	defer cancel()
	resp, err := kl.cri.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		if ctx.Err() == nil {
			klog.ErrorS(err, "Container runtime sanity check failed")
		}
		return
	}
	if resp.GetStatus() == nil {
		klog.ErrorS(nil, "Container runtime status is nil")
		return
	}
	network := runtimeCondition(resp.Status, runtimeapi.NetworkReady)
	if network == nil || !network.Status {
		kl.runtimeState.setNetworkState(fmt.Errorf("container runtime network not ready: %s", conditionString(network)))
	} else {
		kl.runtimeState.setNetworkState(nil)
	}
	ready := runtimeCondition(resp.Status, runtimeapi.RuntimeReady)
	if ready == nil || !ready.Status {
		kl.runtimeState.setRuntimeState(fmt.Errorf("container runtime not ready: %s", conditionString(ready)))
		return
	}
	kl.runtimeState.setRuntimeState(nil)
	kl.runtimeState.setRuntimeSync(kl.clock.Now())
}

// runUpdateRuntimeUp runs updateRuntimeUp every RuntimeUpPeriod until ctx ends.
func (kl *Kubelet) runUpdateRuntimeUp(ctx context.Context) {
	for {
		t := kl.clock.NewTimer(RuntimeUpPeriod)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
			kl.updateRuntimeUp(ctx)
		}
	}
}

func runtimeCondition(s *runtimeapi.RuntimeStatus, t string) *runtimeapi.RuntimeCondition {
	for _, c := range s.GetConditions() {
		if c.GetType() == t {
			return c
		}
	}
	return nil
}

// conditionString shows a condition as upstream's log does.
func conditionString(c *runtimeapi.RuntimeCondition) string {
	if c == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s=%t reason:%s message:%s", c.Type, c.Status, c.Reason, c.Message)
}
