package kubelet

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"mykubelet/mylib/podworkers"
)

// syncLoopMinHealthyWait is the least SyncLoopHealthCheck waits for the
// sync loop, whatever the resync interval (upstream: 5 min).
const syncLoopMinHealthyWait = 5 * time.Minute

// loopMonitor holds a time that goroutines read while the sync loop writes
// it (upstream's syncLoopMonitor, an atomic.Value).
type loopMonitor struct{ t atomic.Pointer[time.Time] }

func (m *loopMonitor) store(t time.Time) { m.t.Store(&t) }

func (m *loopMonitor) load() time.Time {
	if t := m.t.Load(); t != nil {
		return *t
	}
	return time.Time{}
}

// LatestLoopEntryTime is when the sync loop last entered or left an
// iteration; zero until it first has.
func (kl *Kubelet) LatestLoopEntryTime() time.Time { return kl.syncLoopMonitor.load() }

// SyncLoopHealthCheck is upstream's "syncloop" check of /healthz: healthy
// until the sync loop has run once; then unhealthy when it last entered
// or left an iteration more than twice the resync interval ago
// (podworkers.DefaultResyncInterval, --sync-frequency), and at least 5
// min: a handler that never returns keeps the loop from every pod. It
// reads the kubelet's clock, where upstream reads the wall clock.
func (kl *Kubelet) SyncLoopHealthCheck(_ *http.Request) error {
	wait := max(2*podworkers.DefaultResyncInterval, syncLoopMinHealthyWait)
	if entered := kl.LatestLoopEntryTime(); !entered.IsZero() && kl.clock.Now().After(entered.Add(wait)) {
		return errors.New("sync Loop took longer than expected")
	}
	return nil
}

// PLEGHealthCheck is the PLEG's health as a /healthz check ("pleg"):
// unhealthy before the first relist and when the last one is older than
// the relist threshold (3 min); healthy without a PLEG (a kubelet without
// pod workers). It is upstream's plegHealthCheck, with its words, which
// upstream took out of /healthz in v1.6 (kubernetes#37865: a hung runtime
// then failed /healthz, and whatever watches /healthz restarted a kubelet
// that could do nothing about it); there, as here, a PLEG that does not
// relist makes the runtime unhealthy: the node NotReady, the sync loop
// idle, and "syncloop" unhealthy 5 min later.
func (kl *Kubelet) PLEGHealthCheck(_ *http.Request) error {
	if kl.pleg == nil {
		return nil
	}
	if ok, err := kl.pleg.Healthy(); !ok {
		return fmt.Errorf("PLEG took longer than expected: %w", err)
	}
	return nil
}
