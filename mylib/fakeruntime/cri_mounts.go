package fakeruntime

// CRI mounts: a container's ContainerConfig.Mounts, checked at
// CreateContainer and mapped into the container's view of files
// (shell_fs.go), as runc bind-mounts them into a container's root.
//
// A mount's host path comes from the kubelet, which builds it from pod YAML
// (a volume's name, a subPath, a hostPath): the runtime trusts no part of
// it. It must lead, once its symlinks are resolved, into one of
// Config.MountRoots, and must not hold the runtime's own containers.
//
// Each mount is then pinned, once, at CreateContainer, as upstream pins a
// subPath (pkg/volume/util/subpath, the fix of CVE-2017-1002101): its host
// path is walked down from its mount root one component at a time with
// O_NOFOLLOW (walkNoFollow), and a symlink anywhere below the mount root
// is refused. The kubelet hands over resolved paths (a subPath is checked
// to stay in its volume, then resolved; a volume's own path too), so a
// link there now is one a container made: `x -> ../../../..` in an
// emptyDir would lead from a subPath up into the pods' directory, to every
// pod's volumes. What the walk reached (a directory, or a file) is held
// open for the container's life and never looked up by its host path
// again: a directory mount is an os.Root of it, a file mount an os.Root of
// its directory with its name, checked at each open to be the pinned file.
// A directory moved away and swapped for a link once the container runs
// changes nothing: it keeps the directory it was given, as a bind mount
// keeps it.
//
// A pod's sandbox process cannot be handed an os.Root (it is in another
// process, and os.Root has no constructor from a descriptor): at the
// container's first run there, the runtime clones what it pinned into the
// process's mount namespace (sandboxproc_pod.go), and the process opens it
// there and uses it only if it is the directory or file the runtime pinned
// (the same device and inode, which cannot be another file's while the
// runtime holds it open). It holds them until the container's last run
// ended: an exec uses them as they are.
//
// Where it departs from runc: the mounts are looked up by name, not by the
// kernel, so a symlink in a mount is followed only inside that mount (runc
// resolves an absolute link against the container's root); a file mount
// whose name the kubelet (or anyone) pointed at another file since is
// "stale file handle", where a bind mount keeps the old inode; a host path
// with a symlink below its mount root is refused, where runc follows it;
// mount propagation is reported, not honoured (there are no mounts to
// propagate). A sandbox without a DnsConfig gives its containers no
// /etc/resolv.conf, where containerd copies the host's: no file of the
// host is ever shown to a container.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// mountSpec is a mount as the runtime maps it: checked, with its host path
// in a mount root, and the identity of the directory or file it pinned
// there. It travels to the sandbox process in each run.
type mountSpec struct {
	Path     string `json:"path"`           // in the container, relative to "/": "etc/config"
	Root     int    `json:"root"`           // which of Config.MountRoots
	Rel      string `json:"rel"`            // the host path in that root: "<uid>/volumes/…" ("." for the root)
	File     bool   `json:"file,omitempty"` // a regular file, not a directory
	ReadOnly bool   `json:"readOnly,omitempty"`
	ID       fileID `json:"id"` // what the runtime pinned at CreateContainer

	host string // the mount root's directory on the host, symlinks resolved
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

// mountError is a mount the runtime refuses: InvalidArgument.
type mountError struct{ error }

// checkMounts checks a container's mounts: each container path absolute
// and unique, each host path existing, in a mount root, with no symlink
// below it, and not holding containers (the containers' directory). It
// returns them pinned (opened, see pinMount), in the order of specs; the
// caller closes them.
func (r *Runtime) checkMounts(containers string, mounts []*runtimeapi.Mount) ([]mountSpec, []*fsMount, error) {
	if len(mounts) == 0 {
		return nil, nil, nil
	}
	containers, err := filepath.EvalSymlinks(containers)
	if err != nil {
		return nil, nil, err
	}
	specs := make([]mountSpec, 0, len(mounts))
	var pinned []*fsMount
	seen := map[string]bool{}
	for _, mt := range mounts {
		spec, m, err := r.checkMount(containers, mt)
		if err == nil && seen[spec.Path] {
			m.close()
			err = errors.New("the container path is mounted twice")
		}
		if err != nil {
			closeMounts(pinned)
			return nil, nil, mountError{fmt.Errorf("mount %s: %w", mt.GetContainerPath(), err)}
		}
		seen[spec.Path] = true
		specs, pinned = append(specs, spec), append(pinned, m)
	}
	return specs, pinned, nil
}

// checkMount checks one mount and pins it; containers is the containers'
// directory, symlinks resolved.
func (r *Runtime) checkMount(containers string, mt *runtimeapi.Mount) (mountSpec, *fsMount, error) {
	cp, hp := mt.GetContainerPath(), mt.GetHostPath()
	if !path.IsAbs(cp) {
		return mountSpec{}, nil, errors.New("the container path is not absolute")
	}
	dest := strings.TrimPrefix(path.Clean(cp), "/")
	if dest == "" {
		return mountSpec{}, nil, errors.New("cannot mount over the container's /")
	}
	switch {
	case hp == "":
		return mountSpec{}, nil, errors.New("no host path (image volumes are not supported)")
	case !filepath.IsAbs(hp):
		return mountSpec{}, nil, fmt.Errorf("host path %s is not absolute", hp)
	case len(r.mountRoots) == 0:
		return mountSpec{}, nil, fmt.Errorf("host path %s: this runtime allows no mounts (Config.MountRoots is empty)", hp)
	}
	hp = filepath.Clean(hp)
	resolved, err := filepath.EvalSymlinks(hp)
	if errors.Is(err, fs.ErrNotExist) {
		return mountSpec{}, nil, fmt.Errorf("host path %s does not exist", hp)
	}
	if err != nil {
		return mountSpec{}, nil, fmt.Errorf("host path %s: %v", hp, cause(err))
	}
	if within(containers, resolved) || within(resolved, containers) {
		return mountSpec{}, nil, fmt.Errorf("host path %s holds the runtime's containers", hp)
	}
	for i, root := range r.mountRoots {
		dir, err := filepath.EvalSymlinks(root)
		if err != nil || !within(dir, resolved) {
			continue
		}
		// The host path as given, not as resolved: it is walked down
		// from the mount root, and a symlink on the way is refused (the
		// kubelet hands over resolved paths; a link there now is one a
		// container made since).
		rel, ok := relIn(root, hp)
		if !ok {
			if rel, ok = relIn(dir, hp); !ok {
				return mountSpec{}, nil, fmt.Errorf("host path %s reaches the mount root %s only through a symlink", hp, root)
			}
		}
		s := mountSpec{Path: dest, Root: i, Rel: rel, ReadOnly: mt.GetReadonly(), host: dir}
		m, err := pinMount(dir, &s)
		if err != nil {
			return mountSpec{}, nil, fmt.Errorf("host path %s: %w", hp, err)
		}
		return s, m, nil
	}
	return mountSpec{}, nil, fmt.Errorf("host path %s is outside the runtime's mount roots (%s)", hp, strings.Join(r.mountRoots, ", "))
}

// within reports whether p is dir or under it (both clean and absolute).
func within(dir, p string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// relIn is p (clean, absolute) relative to dir, in slashes, if p is dir
// or under it by name.
func relIn(dir, p string) (string, bool) {
	if !within(dir, p) {
		return "", false
	}
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return "", false
	}
	return filepath.ToSlash(rel), true
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

// pinMount opens s once, from its mount root dir: the runtime at
// CreateContainer (s.ID empty: it records what it reached), the sandbox
// process at the container's first run (s.ID set: what it reaches must be
// that, or the mount is refused). The host path is walked without
// following a symlink (walkNoFollow); a directory is then an os.Root of
// it, a file an os.Root of its directory and its name, each checked to be
// what the walk reached.
func pinMount(dir string, s *mountSpec) (*fsMount, error) {
	pin, fi, err := walkNoFollow(dir, s.Rel)
	if err != nil {
		return nil, cause(err)
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
		return nil, cause(err)
	}
	defer root.Close()
	m := &fsMount{path: s.Path, name: ".", readOnly: s.ReadOnly, id: id}
	sub := s.Rel
	if !fi.IsDir() {
		sub, m.name, m.pin = path.Dir(s.Rel), path.Base(s.Rel), pin
	} else {
		pin.Close() // the os.Root holds the directory from now on
	}
	if m.dir, err = root.OpenRoot(sub); err == nil {
		// Opened by name, as os.Root opens: it must be what the walk
		// pinned, or a swap came between the two.
		var got fs.FileInfo
		if got, err = m.dir.Lstat(m.name); err == nil && idOf(got) != id {
			err = errMountChanged
		}
	}
	if err != nil {
		m.close()
		return nil, cause(err)
	}
	s.File, s.ID = !fi.IsDir(), id
	return m, nil
}

// closeMounts closes ms.
func closeMounts(ms []*fsMount) {
	for _, m := range ms {
		m.close()
	}
}

// pinMounts pins specs again, each from rootDir(spec), as the sandbox
// process does at a container's first run: each must be what the runtime
// pinned at CreateContainer.
func pinMounts(specs []mountSpec, rootDir func(mountSpec) string) ([]*fsMount, error) {
	var mounts []*fsMount
	for _, s := range specs {
		err := errors.New("the runtime pinned nothing") // not re-resolved: refused
		var m *fsMount
		if s.ID != (fileID{}) {
			m, err = pinMount(rootDir(s), &s)
		}
		if err != nil {
			closeMounts(mounts)
			return nil, fmt.Errorf("mount /%s: %v", s.Path, err)
		}
		mounts = append(mounts, m)
	}
	return mounts, nil
}

// makeMountPoints makes each mount's mount point in the container's root,
// as runc does (a directory, or an empty file for a file mount), so that a
// listing of its parent shows it. A mount inside another mount has its
// point in no directory of the host: the listing shows it anyway
// (containerFS.ReadDir), and the volume is left as the kubelet made it.
func makeMountPoints(root *os.Root, specs []mountSpec) error {
	for _, s := range specs {
		inside := false
		for _, o := range specs {
			if strings.HasPrefix(s.Path, o.Path+"/") {
				inside = true
			}
		}
		if inside {
			continue
		}
		if parent := path.Dir(s.Path); parent != "." {
			if err := root.MkdirAll(parent, 0o755); err != nil {
				return mountError{fmt.Errorf("mount point /%s: %v", s.Path, cause(err))}
			}
		}
		fi, err := root.Lstat(s.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist) && s.File:
			var f *os.File
			if f, err = root.OpenFile(s.Path, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				f.Close()
			}
		case errors.Is(err, fs.ErrNotExist):
			err = root.Mkdir(s.Path, 0o755)
		case err != nil:
		case s.File && !fi.Mode().IsRegular():
			err = errors.New("the host path is a file, the mount point is not")
		case !s.File && !fi.IsDir():
			err = errors.New("the host path is a directory, the mount point is not")
		}
		if err != nil {
			return mountError{fmt.Errorf("mount point /%s: %v", s.Path, cause(err))}
		}
	}
	return nil
}

// mountsDir is where a pod's sandbox process sees its containers' mounts:
// mount i of container id at /.mounts/<id>/<i> (sandboxproc_pod.go).
const mountsDir = ".mounts"

// covered reports whether one of specs covers name (relative to "/").
func covered(specs []mountSpec, name string) bool {
	for _, s := range specs {
		if name == s.Path || strings.HasPrefix(name, s.Path+"/") {
			return true
		}
	}
	return false
}

// resolvConf is a sandbox's /etc/resolv.conf as containerd writes it from
// the DNS config ("" without one: then the container has none). A line
// break in an entry would write a line of its own: refused.
func resolvConf(dns *runtimeapi.DNSConfig) (string, error) {
	if dns == nil {
		return "", nil
	}
	var b strings.Builder
	for _, l := range []struct {
		key    string
		values []string
		sep    bool // one line per value
	}{
		{"search", dns.GetSearches(), false},
		{"nameserver", dns.GetServers(), true},
		{"options", dns.GetOptions(), false},
	} {
		for _, v := range l.values {
			if v == "" || strings.ContainsAny(v, " \t\r\n") {
				return "", fmt.Errorf("dns config: %s %q is not one word", l.key, v)
			}
		}
		if len(l.values) == 0 {
			continue
		}
		if l.sep {
			for _, v := range l.values {
				fmt.Fprintf(&b, "%s %s\n", l.key, v)
			}
		} else {
			fmt.Fprintf(&b, "%s %s\n", l.key, strings.Join(l.values, " "))
		}
	}
	return b.String(), nil
}
