package util

import (
	"fmt"
	"os"
	"strings"
)

// CheckVolumeName refuses a volume name that is not one path element: the
// name becomes a directory under the pod's volumes directory, and pod YAML
// is untrusted (the API server validates names as DNS labels, a static
// pod's file is not validated by anyone).
func CheckVolumeName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return fmt.Errorf("invalid volume name %q: must be a single path element", name)
	}
	return nil
}

// MakeVolumeDir creates a volume's directory (and its parents, 0755) and
// sets its mode whatever the umask.
func MakeVolumeDir(dir string, mode os.FileMode) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.Chmod(dir, mode)
}

// WriteVolumeDir is the SetUp of every plugin whose content the kubelet
// computes (configMap, secret, downwardAPI, projected): the directory
// (0755), then the payload through an AtomicWriter.
func WriteVolumeDir(dir, logContext string, payload map[string]FileProjection) error {
	if err := MakeVolumeDir(dir, 0o755); err != nil {
		return err
	}
	w, err := NewAtomicWriter(dir, logContext)
	if err != nil {
		return err
	}
	return w.Write(payload)
}

// RemoveVolumeDir is their TearDown: the directory and all in it. A
// directory already gone is not an error (TearDown is retried).
func RemoveVolumeDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing volume directory %s: %w", dir, err)
	}
	return nil
}
