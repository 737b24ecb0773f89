//go:build linux || darwin

package cadvisor

import (
	"fmt"
	"syscall"
)

// filesystemSize returns the size in bytes of the filesystem holding dir.
func filesystemSize(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("size of the filesystem of %s: %w", dir, err)
	}
	return int64(st.Blocks) * int64(st.Bsize), nil
}
