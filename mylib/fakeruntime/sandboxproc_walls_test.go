package fakeruntime

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestASandboxProcessHoldsOnlyTheDescriptorsItWasGiven: a descriptor the
// runtime inherited without close-on-exec (here the host's /etc, as a
// shell's 7</etc would leave it) does not pass through pivot_root and
// the second start into a pod's sandbox process: it closes every
// descriptor but its stdio and the runtime's socket (close_range) before
// its walls go up.
func TestASandboxProcessHoldsOnlyTheDescriptorsItWasGiven(t *testing.T) {
	r := sandboxRuntime(t)
	fd, err := unix.Open("/etc", unix.O_RDONLY|unix.O_DIRECTORY, 0) // no O_CLOEXEC: inherited by what the runtime starts
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	var etc unix.Stat_t
	require.NoError(t, unix.Fstat(fd, &etc))

	sb := runSandbox(t, r, "fds", "uid-fds", nil)
	c := createContainer(t, r, sb, "one", "sleep", "3600")
	startContainer(t, r, c)
	pid := sandboxPID(t, r, sb)
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		var st syscall.Stat_t
		if syscall.Stat(dir+"/"+e.Name(), &st) != nil {
			continue // gone meanwhile
		}
		target, _ := os.Readlink(dir + "/" + e.Name())
		require.False(t, st.Dev == etc.Dev && st.Ino == etc.Ino, "the sandbox process holds the host's /etc as fd %s (-> %s)", e.Name(), target)
	}
}
