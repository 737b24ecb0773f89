package volume

import (
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/klog/v2"
)

// The bits a pod's fsGroup adds, as upstream's pkg/volume/volume_linux.go:
// the group may read (and, for a writable volume, write) every file, and
// enter every directory, whose new files then belong to the group too
// (setgid).
const (
	rwMask   = os.FileMode(0o660)
	roMask   = os.FileMode(0o440)
	execMask = os.FileMode(0o110)
)

// SetVolumeOwnership gives everything under dir to the pod's fsGroup, as
// upstream's SetVolumeOwnership (its fsGroupChangePolicy Always): each
// file and directory's group becomes fsGroup and its mode gains the
// group's read (and write, unless readOnly) bits, directories also the
// group's search bit and setgid. Symlinks are not followed and keep their
// mode (a chmod would change what they point at). Nil fsGroup changes
// nothing. As upstream, a file it cannot change is logged, not an error.
func SetVolumeOwnership(dir string, fsGroup *int64, readOnly bool) error {
	if fsGroup == nil {
		return nil
	}
	mask := rwMask
	if readOnly {
		mask = roMask
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, int(*fsGroup)); err != nil {
			klog.ErrorS(err, "Lchown failed", "path", path)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		m := mask
		if info.IsDir() {
			m |= os.ModeSetgid | execMask
		}
		if err := os.Chmod(path, info.Mode()|m); err != nil {
			klog.ErrorS(err, "chmod failed", "path", path)
		}
		return nil
	})
}
