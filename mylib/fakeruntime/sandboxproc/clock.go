package sandboxproc

// The time the scripts run on.

import "time"

// Clock is the time the scripts run on: the runtime's (a fake one in its
// unit tests), or the real one in a sandbox process. A k8s.io/utils/clock
// clock is one through a one-line adapter (the runtime's scriptClock):
// this package imports no Kubernetes package.
type Clock interface {
	Now() time.Time
	Since(time.Time) time.Duration
	NewTimer(time.Duration) Timer
}

// Timer is a timer of a Clock.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// RealClock is the real time.
type RealClock struct{}

func (RealClock) Now() time.Time                  { return time.Now() }
func (RealClock) Since(t time.Time) time.Duration { return time.Since(t) }
func (RealClock) NewTimer(d time.Duration) Timer  { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }
