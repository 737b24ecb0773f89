package podnet

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStaleNetworkIsRemoved: a namespace left by a runtime whose process is
// gone is removed when the next pod network is made.
func TestStaleNetworkIsRemoved(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the pod network needs root (a network namespace and a veth pair)")
	}
	stale := NetnsPrefix + "999999999-0" // no such process
	ns, err := addNamedNetns(stale)
	require.NoError(t, err)
	ns.Close()
	t.Cleanup(func() { _ = deleteNamedNetns(stale) })
	_, err = os.Stat(filepath.Join(NetnsDir, stale))
	require.NoError(t, err, "made as `ip netns add` makes one")

	var last error
	for i := range 64 { // a range of its own: tests run side by side
		n, err := New(netip.MustParsePrefix(fmt.Sprintf("10.235.%d.0/24", (os.Getpid()+i)%256)))
		if last = err; err == nil {
			t.Cleanup(n.Close)
			break
		}
	}
	require.NoError(t, last, "no free range for a pod network")
	_, err = os.Stat(filepath.Join(NetnsDir, stale))
	assert.True(t, os.IsNotExist(err), "the stale namespace is gone: %v", err)
}
