//go:build race

package fakeruntime

// raceEnabled: this test binary (and so its sandbox process) runs under
// the race detector, which multiplies memory use several times.
const raceEnabled = true
