package chaptertest

import (
	"testing"
	"time"
)

// Eventually calls cond every interval, the first time at once, until it
// holds, for at most timeout, and returns how long that took. At the
// timeout it fails the test with what it waited for and what cond said
// last (the string it returns beside false: the state it saw).
func Eventually(t testing.TB, timeout, interval time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return time.Since(start)
		}
		if !time.Now().Add(interval).Before(deadline) {
			t.Fatalf("%s: not within %s; last seen: %s", what, timeout, last)
			return time.Since(start)
		}
		time.Sleep(interval)
	}
}

// EventuallyTrue is Eventually for a condition with nothing to say.
func EventuallyTrue(t testing.TB, timeout, interval time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return Eventually(t, timeout, interval, what, func() (bool, string) { return cond(), "" })
}
