package sandboxproc

import (
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestTheSeccompFilterRefusesFileHandlesAndNewUserNamespaces: a process
// under the filter gets EPERM from name_to_handle_at, open_by_handle_at,
// unshare(CLONE_NEWUSER) and keyctl, ENOSYS from clone3, and still
// opens, reads and starts threads (Go's clone) as before.
func TestTheSeccompFilterRefusesFileHandlesAndNewUserNamespaces(t *testing.T) {
	if os.Getenv("SECCOMP_HELPER") == "1" {
		seccompHelper()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTheSeccompFilterRefusesFileHandlesAndNewUserNamespaces$")
	cmd.Env = append(os.Environ(), "SECCOMP_HELPER=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "name_to_handle_at: operation not permitted\nopen_by_handle_at: operation not permitted\nunshare: operation not permitted\nkeyctl: operation not permitted\nclone3: function not implemented\nread: ok\n")
}

func seccompHelper() {
	say := func(call string, err error) {
		if err == nil {
			os.Stdout.WriteString(call + ": ok\n")
		} else {
			os.Stdout.WriteString(call + ": " + err.Error() + "\n")
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		panic(err)
	}
	if err := installSeccomp(); err != nil {
		panic(err)
	}
	_, _, err := unix.NameToHandleAt(unix.AT_FDCWD, "/", 0)
	say("name_to_handle_at", err)
	_, err = unix.OpenByHandleAt(unix.AT_FDCWD, unix.NewFileHandle(1, []byte{2, 0, 0, 0, 0, 0, 0, 0}), unix.O_RDONLY)
	say("open_by_handle_at", err)
	say("unshare", unix.Unshare(unix.CLONE_NEWUSER))
	_, err = unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_SESSION_KEYRING, 0, 0, 0)
	say("keyctl", err)
	_, _, e := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)
	var errno error
	if e != 0 {
		errno = e
	}
	say("clone3", errno)
	done := make(chan error)
	go func() { _, err := os.ReadFile("/proc/self/status"); done <- err }()
	err = <-done
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	say("read", err)
}
