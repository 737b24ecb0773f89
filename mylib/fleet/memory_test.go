package fleet

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseMemoryLimit(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "80Mi": 80 << 20, "100M": 100e6, "1Gi": 1 << 30} {
		got, err := parseMemoryLimit(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"lots", "-80Mi", "0", "100"} {
		_, err := parseMemoryLimit(in)
		assert.ErrorContains(t, err, "want a size of at least 1Mi", in)
	}
}

func TestSetMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	require.NoError(t, SetMemoryLimit("80Mi"))
	assert.Equal(t, int64(80<<20), debug.SetMemoryLimit(-1))
	require.NoError(t, SetMemoryLimit(""))
	assert.Equal(t, int64(80<<20), debug.SetMemoryLimit(-1), `"" leaves the limit as it is`)
	assert.Error(t, SetMemoryLimit("lots"))
}
