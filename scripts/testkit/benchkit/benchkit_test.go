package benchkit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Nearest rank: the p99 of 100 values is the 99th, of 10 the 10th, of two
// the larger, and the p50 of 4 the 2nd.
func TestQuantileIsTheNearestRank(t *testing.T) {
	var hundred []time.Duration
	for i := 1; i <= 100; i++ {
		hundred = append(hundred, time.Duration(i))
	}
	assert.Equal(t, time.Duration(99), Quantile(hundred, .99))
	assert.Equal(t, time.Duration(50), Quantile(hundred, .50))
	assert.Equal(t, time.Duration(10), Quantile(hundred[:10], .99))
	assert.Equal(t, time.Duration(2), Quantile([]time.Duration{1, 2}, .99), "of two, the larger")
	assert.Equal(t, time.Duration(2), Quantile([]time.Duration{1, 2, 3, 4}, .5))
	assert.Equal(t, time.Duration(7), Quantile([]time.Duration{7}, .01))
	assert.Equal(t, time.Duration(0), Quantile(nil, .5))
}

// utime and stime are fields 14 and 15, in 1/100 s, counted after the
// command's last ')' (a command may hold spaces and parentheses).
func TestParseStatCPU(t *testing.T) {
	d, err := ParseStatCPU("4242 (kube let (x)) S 1 4242 4242 0 -1 4194560 9000 0 0 0 1234 567 0 0 20 0 12 0 100 0 0")
	require.NoError(t, err)
	assert.Equal(t, 18010*time.Millisecond, d)
	for _, bad := range []string{"", "4242 kubelet S 1", "4242 (kubelet) S 1 2 3", "4242 (kubelet) S 1 4242 4242 0 -1 4194560 9000 0 0 0 x 567 0"} {
		_, err := ParseStatCPU(bad)
		assert.Error(t, err, "%q", bad)
	}
	d, err = CPUTime(0)
	assert.NoError(t, err)
	assert.Equal(t, time.Duration(0), d, "pid 0: not measured")
}
