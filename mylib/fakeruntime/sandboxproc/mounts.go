package sandboxproc

// mountSpec is a mount as the runtime maps it: checked, with its host path
// in a mount root, and the identity of the directory or file it pinned
// there. It travels to the sandbox process in each run.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

type MountSpec struct {
	Path     string `json:"path"`           // in the container, relative to "/": "etc/config"
	Root     int    `json:"root"`           // which of Config.MountRoots
	Rel      string `json:"rel"`            // the host path in that root: "<uid>/volumes/…" ("." for the root)
	File     bool   `json:"file,omitempty"` // a regular file, not a directory
	ReadOnly bool   `json:"readOnly,omitempty"`
	ID       fileID `json:"id"` // what the runtime pinned at CreateContainer

	Host string // the mount root's directory on the host, symlinks resolved
}

// fileID is a directory's or a file's identity: its device and inode. The
// runtime holds what it pinned open for the container's life, so the
// inode cannot be freed and reused by another file meanwhile: the same
// identity later is the same directory or file.
type fileID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// idOf is fi's identity.
func idOf(fi fs.FileInfo) fileID {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}
	}
	return fileID{Dev: uint64(st.Dev), Ino: st.Ino} //nolint:unconvert // Dev is uint32 on some platforms
}

// symlinkError is a host path with a symlink below its mount root.
type symlinkError struct{ name string }

func (e symlinkError) Error() string {
	return e.name + " is a symlink (a mount follows none below its mount root)"
}

// errMountChanged is a mount whose host path no longer leads to what the
// runtime pinned at CreateContainer.
var errMountChanged = errors.New("the host path changed since the container was created")

// walkNoFollow opens rel in the directory dir one component at a time
// with O_NOFOLLOW, as upstream's safe subPath opens a subPath
// (pkg/volume/util/subpath: doSafeOpen), and returns what it reached
// (an O_PATH descriptor: it reads nothing, and keeps the inode). A
// symlink on the way is refused, whether it leads in or out: the walk
// never follows one, so it never leaves the path as named.
func walkNoFollow(dir, rel string) (*os.File, fs.FileInfo, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	f := os.NewFile(uintptr(fd), rel)
	var parts []string
	for _, part := range strings.Split(rel, "/") {
		if part != "" && part != "." {
			parts = append(parts, part)
		}
	}
	for i, part := range parts {
		next, err := unix.Openat(int(f.Fd()), part, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		f.Close()
		if err != nil {
			return nil, nil, err
		}
		f = os.NewFile(uintptr(next), rel)
		fi, err := f.Stat()
		switch {
		case err != nil:
		case fi.Mode()&fs.ModeSymlink != 0:
			err = symlinkError{strings.Join(parts[:i+1], "/")}
		case !fi.IsDir() && i < len(parts)-1:
			err = syscall.ENOTDIR
		}
		if err != nil {
			f.Close()
			return nil, nil, err
		}
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// PinMount opens s once, from its mount root dir: the runtime at
// CreateContainer (s.ID empty: it records what it reached), the sandbox
// process at the container's first run (s.ID set: what it reaches must be
// that, or the mount is refused). The host path is walked without
// following a symlink (walkNoFollow); a directory is then an os.Root of
// it, a file an os.Root of its directory and its name, each checked to be
// what the walk reached.
func PinMount(dir string, s *MountSpec) (*FsMount, error) {
	pin, fi, err := walkNoFollow(dir, s.Rel)
	if err != nil {
		return nil, Cause(err)
	}
	id := idOf(fi)
	switch {
	case s.ID != (fileID{}) && s.ID != id:
		err = errMountChanged
	case !fi.IsDir() && !fi.Mode().IsRegular():
		err = errors.New("neither a directory nor a regular file")
	}
	if err != nil {
		pin.Close()
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		pin.Close()
		return nil, Cause(err)
	}
	defer root.Close()
	m := &FsMount{Path: s.Path, name: ".", readOnly: s.ReadOnly, id: id}
	sub := s.Rel
	if !fi.IsDir() {
		sub, m.name, m.Pin = path.Dir(s.Rel), path.Base(s.Rel), pin
	} else {
		pin.Close() // the os.Root holds the directory from now on
	}
	if m.Dir, err = root.OpenRoot(sub); err == nil {
		// Opened by name, as os.Root opens: it must be what the walk
		// pinned, or a swap came between the two.
		var got fs.FileInfo
		if got, err = m.Dir.Lstat(m.name); err == nil && idOf(got) != id {
			err = errMountChanged
		}
	}
	if err != nil {
		m.Close()
		return nil, Cause(err)
	}
	s.File, s.ID = !fi.IsDir(), id
	return m, nil
}

// CloseMounts closes ms.
func CloseMounts(ms []*FsMount) {
	for _, m := range ms {
		m.Close()
	}
}

// pinMounts pins specs again, each from rootDir(spec), as the sandbox
// process does at a container's first run: each must be what the runtime
// pinned at CreateContainer.
func pinMounts(specs []MountSpec, rootDir func(MountSpec) string) ([]*FsMount, error) {
	var mounts []*FsMount
	for _, s := range specs {
		err := errors.New("the runtime pinned nothing") // not re-resolved: refused
		var m *FsMount
		if s.ID != (fileID{}) {
			m, err = PinMount(rootDir(s), &s)
		}
		if err != nil {
			CloseMounts(mounts)
			return nil, fmt.Errorf("mount /%s: %v", s.Path, err)
		}
		mounts = append(mounts, m)
	}
	return mounts, nil
}

// MountsDir is where a pod's sandbox process sees its containers' mounts:
// mount i of container id at /.mounts/<id>/<i> (sandboxproc_pod.go).
const MountsDir = ".mounts"
