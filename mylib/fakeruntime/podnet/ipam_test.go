package podnet

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIPAllocatorHandsOutTheRangeAsHostLocal: never the network address,
// the gateway or the broadcast address; an address freed is not reused at
// once; a full range is an error that says so.
func TestIPAllocatorHandsOutTheRangeAsHostLocal(t *testing.T) {
	a, err := NewIPAllocator("10.9.8.7/29") // masked: 10.9.8.0/29, hosts .2 to .6
	require.NoError(t, err)
	assert.Equal(t, "10.9.8.0/29", a.Prefix().String())
	var got []string
	for range 5 {
		ip, err := a.Allocate()
		require.NoError(t, err)
		got = append(got, ip)
	}
	assert.Equal(t, []string{"10.9.8.2", "10.9.8.3", "10.9.8.4", "10.9.8.5", "10.9.8.6"}, got)
	_, err = a.Allocate()
	assert.ErrorContains(t, err, "no free IP left in the pod CIDR 10.9.8.0/29 (5 sandboxes)")

	a.Release("10.9.8.3")
	a.Release("10.9.8.5")
	a.Release("not an address") // ignored
	ip, err := a.Allocate()
	require.NoError(t, err)
	assert.Equal(t, "10.9.8.3", ip, "the search goes round from where it stopped")
	ip, err = a.Allocate()
	require.NoError(t, err)
	assert.Equal(t, "10.9.8.5", ip)
}

func TestIPAllocatorRefusesRangesItCannotServe(t *testing.T) {
	for cidr, want := range map[string]string{
		"10.0.0.0/31":    "at least 4 addresses",
		"fd00::/64":      "want an IPv4 range",
		"127.0.0.0/8":    "loopback or link-local",
		"169.254.0.0/16": "loopback or link-local",
		"10.0.0.0":       "pod CIDR \"10.0.0.0\"",
	} {
		_, err := NewIPAllocator(cidr)
		assert.ErrorContains(t, err, want, cidr)
	}
}
