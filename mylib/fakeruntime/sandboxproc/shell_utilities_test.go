package sandboxproc

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestParseSleepAsGNUSleep(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want time.Duration
	}{
		{"5", 5 * time.Second},
		{"0", 0},
		{"1.5", 1500 * time.Millisecond},
		{".5s", 500 * time.Millisecond},
		{"2m", 2 * time.Minute},
		{"1.5h", 90 * time.Minute},
		{"1d", 24 * time.Hour},
		{"1e3", 1000 * time.Second},
		{"infinity", maxSleep},
		{"inf", maxSleep},
		{"1e9h", maxSleep},
		{"1e400", maxSleep},
		{"9999999999999999999d", maxSleep},
	} {
		d, err := parseSleep(tc.arg)
		if assert.NoError(t, err, tc.arg) {
			assert.Equal(t, tc.want, d, tc.arg)
		}
	}
	for _, bad := range []string{"", "s", "-1", "nan", "1x", "one", "1mm", "--5"} {
		_, err := parseSleep(bad)
		assert.Error(t, err, bad)
	}
}

// stress's --timeout: whole numbers, with sleep's suffixes and y.
func TestParseStressTimeout(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"5": 5 * time.Second, "5s": 5 * time.Second, "2m": 2 * time.Minute,
		"1h": time.Hour, "1d": 24 * time.Hour, "1y": 365 * 24 * time.Hour,
	} {
		got, err := parseStressTimeout(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for _, bad := range []string{"", "s", "1.5", "-1", "1w", "99999999999y"} {
		_, err := parseStressTimeout(bad)
		assert.Error(t, err, bad)
	}
}
