//go:build !race

package fakeruntime

// raceEnabled: this test binary runs without the race detector.
const raceEnabled = false
