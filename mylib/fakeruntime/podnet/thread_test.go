package podnet

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The main goroutine keeps the main thread: TestMain runs there.
func init() { runtime.LockOSThread() }

// onMain is what TestMain saw of onLockedThread on the main thread.
var onMain struct {
	fnOnMainThread   bool
	cwdBefore, after string
	err              error
}

func TestMain(m *testing.M) {
	// As OnOwnThread's goroutine would, were it given the main thread:
	// locked, then onLockedThread with an fn that changes its thread's
	// working directory, which belongs to the thread once CLONE_FS is
	// unshared. /proc/self/cwd is the main thread's.
	runtime.LockOSThread()
	onMain.cwdBefore, _ = os.Readlink("/proc/self/cwd")
	onMain.err = onLockedThread(func() error {
		onMain.fnOnMainThread = unix.Gettid() == unix.Getpid()
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return err
		}
		return unix.Chdir(os.TempDir())
	})
	onMain.after, _ = os.Readlink("/proc/self/cwd")
	os.Exit(m.Run())
}

// TestOnOwnThreadNeverSpoilsTheMainThread: given the main thread,
// onLockedThread runs fn on another one, and the main thread's working
// directory (as its namespaces would) stays the process's.
func TestOnOwnThreadNeverSpoilsTheMainThread(t *testing.T) {
	require.NoError(t, onMain.err)
	require.False(t, onMain.fnOnMainThread, "fn ran on the main thread")
	require.NotEqual(t, os.TempDir(), onMain.cwdBefore, "the test starts elsewhere than where fn goes")
	require.Equal(t, onMain.cwdBefore, onMain.after, "the main thread's working directory changed")
}

// TestOnOwnThreadRunsOffTheMainThread: from the tests' goroutines, fn
// never runs on the main thread either (here TestMain holds it).
func TestOnOwnThreadRunsOffTheMainThread(t *testing.T) {
	for range 200 {
		require.NoError(t, OnOwnThread(func() error {
			if unix.Gettid() == unix.Getpid() {
				return fmt.Errorf("on the main thread")
			}
			return nil
		}))
	}
}
