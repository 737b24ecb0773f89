package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

// Two bursts: the latencies together, each burst's time until all ran,
// CPU time divided by every pod started.
func TestSummarizePoolsTheBursts(t *testing.T) {
	s := summarize([]burstResult{
		{lat: ms(400, 100, 300, 200), allRunning: 450 * time.Millisecond, kubeletCPU: 800 * time.Millisecond, containerdCPU: 2 * time.Second},
		{lat: ms(500, 600, 700, 800), allRunning: 850 * time.Millisecond, kubeletCPU: 400 * time.Millisecond, containerdCPU: 2 * time.Second},
	})
	assert.Equal(t, 8, s.pods)
	assert.Equal(t, 400*time.Millisecond, s.p50)
	assert.Equal(t, 800*time.Millisecond, s.p99)
	assert.Equal(t, 800*time.Millisecond, s.max)
	assert.Equal(t, 150*time.Millisecond, s.kubeletCPU, "1.2 s over 8 pods")
	assert.Equal(t, 500*time.Millisecond, s.containerdCPU)
	assert.Equal(t, "| capstone | 8 | 0.40 s | 0.80 s | 0.80 s | 0.80 s | 0.45 s, 0.85 s | 0.1500 | 0.5000 |", s.row("capstone"))
	assert.Equal(t, summary{}, summarize(nil), "no pods: no figures, no division by zero")
}
