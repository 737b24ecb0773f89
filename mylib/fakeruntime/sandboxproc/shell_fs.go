package sandboxproc

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"mvdan.cc/sh/v3/interp"
)

// The interpreter's file system: every name a script opens, lists, stats,
// makes or removes is looked up in the container's view (containerFS),
// through its mount table first, and each lookup ends in an os.Root.
//
// The mount table is the container's CRI mounts, each pinned once
// (cri_mounts.go: pinMount) and held open for the container's life: a name
// at or under a mount's container path is looked up in that mount (the
// longest path wins, as the kernel's innermost mount does); any other name
// in the container's root, its writable layer. A directory mount is an
// os.Root of the pinned directory: its host path is never walked again,
// and its symlinks are followed only inside it (the atomic writer's ..data
// links are relative and inside, so they work; a link that leads out, even
// into the same volume above a subPath, is "path escapes from parent"). A
// file mount maps exactly one name to one file: opened by its name in an
// os.Root of its directory, never through a symlink, and only while that
// name is still the pinned file (device and inode); a file replaced since
// is "stale file handle". A read-only mount refuses every write, create,
// remove and mkdir with EROFS, as a read-only bind mount does.

// Cause is the reason of a file error without the path, which would show
// the root-relative name.
func Cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ContainerFS is a container's view of files: its root and its mounts.
type ContainerFS struct {
	Root     *os.Root   // the container's "/": its writable layer
	Mounts   []*FsMount // longest path first
	borrowed bool       // the mounts are someone else's to close
}

// FsMount is one mount of the view, pinned (see pinMount).
type FsMount struct {
	Path     string   // where it is in the container, relative to "/": "etc/config"
	Dir      *os.Root // a directory mount: its directory; a file mount: the file's directory
	name     string   // a directory mount: "."; a file mount: the file's name in dir
	readOnly bool
	id       fileID   // the directory's or the file's identity
	Pin      *os.File // a file mount: the file itself (O_PATH), held open
}

// Close closes what m holds.
func (m *FsMount) Close() {
	if m.Dir != nil {
		m.Dir.Close()
	}
	if m.Pin != nil {
		m.Pin.Close()
	}
}

// IsFile says whether m is a file mount.
func (m *FsMount) IsFile() bool { return m.name != "." }

// NewContainerFS is the view of root with mounts; it owns them (close).
func NewContainerFS(root *os.Root, mounts []*FsMount) *ContainerFS {
	mounts = slices.Clone(mounts)
	slices.SortStableFunc(mounts, func(a, b *FsMount) int { return len(b.Path) - len(a.Path) })
	return &ContainerFS{Root: root, Mounts: mounts}
}

// Close closes the root and, unless they are borrowed, the mounts.
func (v *ContainerFS) Close() {
	v.Root.Close()
	if !v.borrowed {
		CloseMounts(v.Mounts)
	}
}

// stale checks that a file mount's name still is its pinned file.
func (m *FsMount) stale(op, name string) error {
	fi, err := m.Dir.Lstat(m.name)
	if err == nil && idOf(fi) == m.id {
		return nil
	}
	return &fs.PathError{Op: op, Path: name, Err: syscall.ESTALE}
}

// covers reports whether the mount holds name (relative to "/"); sub is
// the name inside it ("" for the mount point itself).
func (m *FsMount) covers(name string) (sub string, ok bool) {
	if name == m.Path {
		return "", true
	}
	sub, ok = strings.CutPrefix(name, m.Path+"/")
	return sub, ok
}

// resolve finds where name (relative to "/", clean) lives: the os.Root and
// the name in it, and its mount (nil: the writable layer).
func (v *ContainerFS) resolve(op, name string) (*os.Root, string, *FsMount, error) {
	for _, m := range v.Mounts {
		sub, ok := m.covers(name)
		if !ok {
			continue
		}
		if m.IsFile() { // nothing is under it
			if sub != "" {
				return nil, "", m, &fs.PathError{Op: op, Path: name, Err: syscall.ENOTDIR}
			}
			if err := m.stale(op, name); err != nil {
				return nil, "", m, err
			}
			return m.Dir, m.name, m, nil
		}
		if sub == "" {
			sub = "."
		}
		return m.Dir, sub, m, nil
	}
	return v.Root, name, nil, nil
}

// writable is resolve for an operation that changes name: a read-only
// mount refuses it.
func (v *ContainerFS) writable(op, name string) (*os.Root, string, *FsMount, error) {
	r, n, m, err := v.resolve(op, name)
	if err == nil && m != nil && m.readOnly {
		err = &fs.PathError{Op: op, Path: name, Err: syscall.EROFS}
	}
	return r, n, m, err
}

// busy refuses to remove a mount point or a directory holding one, as the
// kernel does (EBUSY): removing it would not remove the mount.
func (v *ContainerFS) busy(op, name string, all bool) error {
	for _, m := range v.Mounts {
		if m.Path == name || (all && (name == "." || strings.HasPrefix(m.Path, name+"/"))) {
			return &fs.PathError{Op: op, Path: name, Err: syscall.EBUSY}
		}
	}
	return nil
}

// OpenFile opens name; inLayer says whether it is a file of the writable
// layer (what it writes counts against the container's memory).
func (v *ContainerFS) OpenFile(name string, flag int, perm os.FileMode) (f *os.File, inLayer bool, err error) {
	resolve := v.resolve
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
		resolve = v.writable
	}
	r, n, m, err := resolve("open", name)
	if err != nil {
		return nil, false, err
	}
	if m != nil && m.IsFile() {
		f, err := m.openFile(name, flag)
		return f, false, err
	}
	f, err = r.OpenFile(n, flag, perm)
	return f, m == nil, err
}

// openFile opens a file mount's file: by its name, never through a
// symlink, and only if it is the pinned file (checked before anything is
// truncated); it exists, so create is open, and exclusive create fails.
func (m *FsMount) openFile(name string, flag int) (*os.File, error) {
	if flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0 {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EEXIST}
	}
	f, err := m.Dir.OpenFile(m.name, flag&^(os.O_CREATE|os.O_EXCL|os.O_TRUNC)|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || idOf(fi) != m.id {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ESTALE}
	}
	if flag&os.O_TRUNC != 0 {
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// Open opens name for reading.
func (v *ContainerFS) Open(name string) (*os.File, error) {
	f, _, err := v.OpenFile(name, os.O_RDONLY, 0)
	return f, err
}

// ReadFile reads name whole.
func (v *ContainerFS) ReadFile(name string) ([]byte, error) {
	f, _, err := v.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// Stat is os.Stat in the view.
func (v *ContainerFS) Stat(name string) (fs.FileInfo, error) {
	r, n, _, err := v.resolve("stat", name)
	if err != nil {
		return nil, err
	}
	fi, err := r.Stat(n)
	if err != nil {
		return nil, err
	}
	return named(fi, name), nil
}

// Lstat is os.Lstat in the view.
func (v *ContainerFS) Lstat(name string) (fs.FileInfo, error) {
	r, n, _, err := v.resolve("lstat", name)
	if err != nil {
		return nil, err
	}
	fi, err := r.Lstat(n)
	if err != nil {
		return nil, err
	}
	return named(fi, name), nil
}

// named gives the info of a mount's directory (whose name is ".") the
// name the script asked for.
func named(fi fs.FileInfo, name string) fs.FileInfo {
	if fi.Name() != "." || name == "." {
		return fi
	}
	return namedInfo{fi, path.Base(name)}
}

// namedInfo is a FileInfo under another name.
type namedInfo struct {
	fs.FileInfo
	name string
}

func (i namedInfo) Name() string { return i.name }

// Readlink is os.Readlink in the view.
func (v *ContainerFS) Readlink(name string) (string, error) {
	r, n, _, err := v.resolve("readlink", name)
	if err != nil {
		return "", err
	}
	return r.Readlink(n)
}

// Mkdir is os.Mkdir in the view.
func (v *ContainerFS) Mkdir(name string, perm os.FileMode) error {
	r, n, _, err := v.writable("mkdir", name)
	if err != nil {
		return err
	}
	return r.Mkdir(n, perm)
}

// MkdirAll is os.MkdirAll in the view: a directory that exists is
// success, even in a read-only mount (as mkdir -p).
func (v *ContainerFS) MkdirAll(name string, perm os.FileMode) error {
	if fi, err := v.Stat(name); err == nil && fi.IsDir() {
		return nil
	}
	r, n, _, err := v.writable("mkdir", name)
	if err != nil {
		return err
	}
	return r.MkdirAll(n, perm)
}

// Remove is os.Remove in the view.
func (v *ContainerFS) Remove(name string) error {
	if err := v.busy("remove", name, false); err != nil {
		return err
	}
	r, n, _, err := v.writable("remove", name)
	if err != nil {
		return err
	}
	return r.Remove(n)
}

// RemoveAll is os.RemoveAll in the view; a directory that holds a mount
// point is busy, and nothing of it is removed.
func (v *ContainerFS) RemoveAll(name string) error {
	if err := v.busy("remove", name, true); err != nil {
		return err
	}
	r, n, _, err := v.writable("remove", name)
	if err != nil {
		return err
	}
	return r.RemoveAll(n)
}

// Chtimes is os.Chtimes in the view.
func (v *ContainerFS) Chtimes(name string, atime, mtime time.Time) error {
	r, n, _, err := v.writable("chtimes", name)
	if err != nil {
		return err
	}
	return r.Chtimes(n, atime, mtime)
}

// ReadDir lists the directory name, sorted by name. A mount point in it
// shows what is mounted there (as the kernel shows the mounted directory),
// even if no mount point exists underneath (a mount inside a mount).
func (v *ContainerFS) ReadDir(name string) ([]fs.FileInfo, error) {
	r, n, _, err := v.resolve("readdir", name)
	if err != nil {
		return nil, err
	}
	d, err := r.Open(n)
	if err != nil {
		return nil, err
	}
	infos, err := d.Readdir(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	for _, m := range v.Mounts {
		if path.Dir(m.Path) != name {
			continue
		}
		var fi fs.FileInfo
		if m.Pin != nil {
			fi, err = m.Pin.Stat() // the pinned file, whatever its name holds now
		} else {
			fi, err = m.Dir.Stat(m.name)
		}
		if err != nil {
			continue // shows its mount point, if any
		}
		mi := namedInfo{fi, path.Base(m.Path)}
		if i := slices.IndexFunc(infos, func(i fs.FileInfo) bool { return i.Name() == mi.name }); i >= 0 {
			infos[i] = mi
		} else {
			infos = append(infos, mi)
		}
	}
	slices.SortFunc(infos, func(a, b fs.FileInfo) int { return strings.Compare(a.Name(), b.Name()) })
	return infos, nil
}

// rel turns a path as the script sees it (absolute, or relative to dir)
// into a name inside the container's root. ".." stops at the root, as it
// does at a real "/"; symlinks are checked by os.Root.
func (p *proc) rel(dir, name string) string {
	if !path.IsAbs(name) {
		name = path.Join(dir, name)
	}
	r := strings.TrimPrefix(path.Clean(name), "/")
	if r == "" {
		return "."
	}
	return r
}

func (p *proc) dir(ctx context.Context) string {
	defer func() { _ = recover() }() // a context without a HandlerContext: the root
	return interp.HandlerCtx(ctx).Dir
}

func (p *proc) open(ctx context.Context, name string, flag int, perm os.FileMode) (io.ReadWriteCloser, error) {
	if name == "/dev/null" {
		return devNull{}, nil
	}
	if src, ok := strings.CutPrefix(name, sourceMarker); ok {
		return p.openSource(ctx, src)
	}
	f, inLayer, err := p.fs.OpenFile(p.rel(p.dir(ctx), name), flag, perm)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: Cause(err)}
	}
	// What a script writes into a mount is the volume's, not the
	// container's: it does not count against the container's memory. (An
	// emptyDir's sizeLimit is for the kubelet's eviction manager to
	// enforce, by measuring the volume's directory.)
	if inLayer && flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		return meteredFile{f, p}, nil
	}
	return f, nil
}

func (p *proc) readDir(ctx context.Context, name string) ([]fs.DirEntry, error) {
	infos, err := p.fs.ReadDir(p.rel(p.dir(ctx), name))
	if err != nil {
		return nil, err
	}
	entries := make([]fs.DirEntry, len(infos))
	for i, fi := range infos {
		entries[i] = fs.FileInfoToDirEntry(fi)
	}
	return entries, nil
}

func (p *proc) stat(ctx context.Context, name string, followSymlinks bool) (fs.FileInfo, error) {
	if followSymlinks {
		return p.fs.Stat(p.rel(p.dir(ctx), name))
	}
	return p.fs.Lstat(p.rel(p.dir(ctx), name))
}

// access allows what exists, and execution only of directories (to cd):
// there are no programs to execute. Nothing in a read-only mount is
// writable.
func (p *proc) access(ctx context.Context, name string, mode interp.AccessMode) error {
	rel := p.rel(p.dir(ctx), name)
	fi, err := p.fs.Stat(rel)
	if err != nil {
		return err
	}
	if mode&interp.AccessWrite != 0 {
		if _, _, _, err := p.fs.writable("access", rel); err != nil {
			return err
		}
	}
	if mode&interp.AccessExec != 0 && !fi.IsDir() {
		return fs.ErrPermission
	}
	return nil
}

// devNull is /dev/null, the one device a container gets.
type devNull struct{}

func (devNull) Read([]byte) (int, error)    { return 0, io.EOF }
func (devNull) Write(b []byte) (int, error) { return len(b), nil }
func (devNull) Close() error                { return nil }
