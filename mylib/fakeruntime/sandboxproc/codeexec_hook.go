//go:build mykubelet_codeexec

package sandboxproc

// A stand-in for a code-execution bug of the interpreter, for the walls'
// test only (sandboxproc_walls_test.go builds the sandbox binary with this
// tag; no other build has it): what native code in a sandbox process would
// try first, with all the privileges the process has. Set as a variable's
// initializer, for the package's init (child.go) becomes the sandbox
// process before any init of this file would run.

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

var _ = func() bool { codeExec = playCodeExecution; return true }()

// playCodeExecution runs one attack, its first argument:
//
//   - handles: for each directory the process can name (its root, the
//     mounts of its containers and one level below) or holds open (its
//     containers' roots), open_by_handle_at with a forged handle for inode
//     2 (an ext4 root) of that directory's filesystem, the "shocker"
//     escape; a line "handle DIR dev D: opened" when it got a descriptor,
//     else "handle DIR dev D: ERROR";
//   - fds: a line "fd N: dev D ino I" per open descriptor below 1024.
func playCodeExecution(args []string, out io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(out, "usage: mykubelet-codeexec handles|fds")
		return 2
	}
	switch args[0] {
	case "handles":
		dirs := []string{"/"}
		top, _ := filepath.Glob("/" + MountsDir + "/*")
		below, _ := filepath.Glob("/" + MountsDir + "/*/*")
		for _, d := range append(top, below...) {
			if fi, err := os.Stat(d); err == nil && fi.IsDir() {
				dirs = append(dirs, d)
			}
		}
		for fd := range 1024 {
			var st unix.Stat_t
			if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
				dirs = append(dirs, fmt.Sprintf("/dev/fd/%d", fd)) // a name for the report; opened by number
			}
		}
		for _, d := range dirs {
			fmt.Fprintf(out, "handle %s %s\n", d, openRootByHandle(d))
		}
	case "fds":
		for fd := range 1024 {
			var st unix.Stat_t
			if unix.Fstat(fd, &st) == nil {
				fmt.Fprintf(out, "fd %d: dev %d ino %d\n", fd, st.Dev, st.Ino)
			}
		}
	default:
		fmt.Fprintf(out, "mykubelet-codeexec: unknown attack %q\n", args[0])
		return 2
	}
	return 0
}

// openRootByHandle opens inode 2 of dir's filesystem by a forged ext4
// file handle (FILEID_INO32_GEN: inode, generation 0) and says how it
// went, after dir's device: "dev D: opened" or "dev D: ERROR". A dir
// /dev/fd/N is the open descriptor N (there is no /dev/fd behind the walls).
func openRootByHandle(dir string) string {
	var mount int
	if n, err := fmt.Sscanf(dir, "/dev/fd/%d", &mount); n != 1 || err != nil {
		if mount, err = unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return "dev ?: open: " + err.Error()
		}
		defer unix.Close(mount)
	}
	var st unix.Stat_t
	if err := unix.Fstat(mount, &st); err != nil {
		return "dev ?: fstat: " + err.Error()
	}
	forged := make([]byte, 8)
	binary.LittleEndian.PutUint32(forged, 2)
	fd, err := unix.OpenByHandleAt(mount, unix.NewFileHandle(1, forged), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return fmt.Sprintf("dev %d: %v", st.Dev, err)
	}
	unix.Close(fd)
	return fmt.Sprintf("dev %d: opened", st.Dev)
}
