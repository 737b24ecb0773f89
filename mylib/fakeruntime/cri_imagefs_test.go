package fakeruntime

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestImageFsIsOnThisMachine: the image filesystem ImageFsInfo names is
// a directory of this machine (the runtime's state directory, or the
// temporary directory before it has one), whose size the kubelet reads
// with statfs: a mountpoint that is not there left the kubelet with a
// capacity of 0 ("invalid capacity 0 on image filesystem" at every image
// GC, an InvalidDiskCapacity event) on a node whose imagefs is the host's.
func TestImageFsIsOnThisMachine(t *testing.T) {
	for name, dir := range map[string]string{"state directory": t.TempDir(), "none yet": ""} {
		r, err := NewRuntime(Config{Clock: clocktesting.NewFakeClock(t0), StateDir: dir})
		require.NoError(t, err)
		t.Cleanup(func() { _ = r.Close() })
		fs, err := r.ImageFsInfo(context.Background(), &runtimeapi.ImageFsInfoRequest{})
		require.NoError(t, err)
		mp := fs.ImageFilesystems[0].GetFsId().GetMountpoint()
		if dir != "" {
			assert.Equal(t, dir, mp, name)
		}
		var st unix.Statfs_t
		require.NoError(t, unix.Statfs(mp, &st), "%s: the kubelet's statfs of %q", name, mp)
		assert.NotZero(t, st.Blocks, name)
	}
}
