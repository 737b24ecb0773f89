package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

// Nearest rank: the p99 of 100 values is the 99th, of 10 the 10th, and the
// p50 of 4 the 2nd.
func TestQuantileIsTheNearestRank(t *testing.T) {
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	assert.Equal(t, 99*time.Millisecond, quantile(ms(hundred...), .99))
	assert.Equal(t, 50*time.Millisecond, quantile(ms(hundred...), .5))
	assert.Equal(t, 10*time.Millisecond, quantile(ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), .99))
	assert.Equal(t, 2*time.Millisecond, quantile(ms(1, 2, 3, 4), .5))
	assert.Equal(t, 7*time.Millisecond, quantile(ms(7), .99))
	assert.Equal(t, time.Duration(0), quantile(nil, .5))
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

// utime and stime are fields 14 and 15, in 1/100 s, counted after the
// command's last ')' (a command may hold spaces and parentheses).
func TestParseStatCPU(t *testing.T) {
	d, err := parseStatCPU("4242 (kube let (x)) S 1 4242 4242 0 -1 4194560 9000 0 0 0 1234 567 0 0 20 0 12 0 100 0 0")
	require.NoError(t, err)
	assert.Equal(t, 18010*time.Millisecond, d)
	for _, bad := range []string{"", "4242 kubelet S 1", "4242 (kubelet) S 1 2 3", "4242 (kubelet) S 1 4242 4242 0 -1 4194560 9000 0 0 0 x 567 0"} {
		_, err := parseStatCPU(bad)
		assert.Error(t, err, "%q", bad)
	}
}
