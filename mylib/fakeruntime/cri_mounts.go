package fakeruntime

// CRI mounts: a container's ContainerConfig.Mounts, checked at
// CreateContainer and mapped into the container's view of files
// (shell_fs.go), as runc bind-mounts them into a container's root.
//
// A mount's host path comes from the kubelet, which builds it from pod YAML
// (a volume's name, a subPath, a hostPath): the runtime trusts no part of
// it. It must lead, once its symlinks are resolved, into one of
// Config.MountRoots, and must not hold the runtime's own containers. The
// runtime then never opens it by its host path again: every open starts at
// the mount root, through an os.Root, so that a symlink swapped in later
// cannot lead out of it.
//
// Where it departs from runc: the mounts are looked up by name, not by the
// kernel, so a symlink in a mount is followed only inside that mount (runc
// resolves an absolute link against the container's root); a file mount
// names its file, so a file the kubelet replaces is seen replaced (a bind
// mount keeps the old inode); mount propagation is reported, not honoured
// (there are no mounts to propagate). A sandbox without a DnsConfig gives
// its containers no /etc/resolv.conf, where containerd copies the host's:
// no file of the host is ever shown to a container.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// mountSpec is a mount as the runtime maps it: checked, with its host path
// resolved into a mount root. It travels to the sandbox process in each run.
type mountSpec struct {
	Path     string `json:"path"`           // in the container, relative to "/": "etc/config"
	Root     int    `json:"root"`           // which of Config.MountRoots
	Rel      string `json:"rel"`            // the host path in that root: "<uid>/volumes/…" ("." for the root)
	File     bool   `json:"file,omitempty"` // a regular file, not a directory
	ReadOnly bool   `json:"readOnly,omitempty"`

	host string // the mount root's directory on the host, symlinks resolved
}

// mountError is a mount the runtime refuses: InvalidArgument.
type mountError struct{ error }

// checkMounts checks a container's mounts: each container path absolute
// and unique, each host path existing, in a mount root and not holding
// containers (the containers' directory).
func (r *Runtime) checkMounts(containers string, mounts []*runtimeapi.Mount) ([]mountSpec, error) {
	if len(mounts) == 0 {
		return nil, nil
	}
	containers, err := filepath.EvalSymlinks(containers)
	if err != nil {
		return nil, err
	}
	specs := make([]mountSpec, 0, len(mounts))
	seen := map[string]bool{}
	for _, mt := range mounts {
		spec, err := r.checkMount(containers, mt)
		if err != nil {
			return nil, mountError{fmt.Errorf("mount %s: %w", mt.GetContainerPath(), err)}
		}
		if seen[spec.Path] {
			return nil, mountError{fmt.Errorf("mount %s: the container path is mounted twice", mt.GetContainerPath())}
		}
		seen[spec.Path] = true
		specs = append(specs, spec)
	}
	return specs, nil
}

// checkMount checks one mount; containers is the containers' directory,
// symlinks resolved.
func (r *Runtime) checkMount(containers string, mt *runtimeapi.Mount) (mountSpec, error) {
	cp, hp := mt.GetContainerPath(), mt.GetHostPath()
	if !path.IsAbs(cp) {
		return mountSpec{}, errors.New("the container path is not absolute")
	}
	dest := strings.TrimPrefix(path.Clean(cp), "/")
	if dest == "" {
		return mountSpec{}, errors.New("cannot mount over the container's /")
	}
	switch {
	case hp == "":
		return mountSpec{}, errors.New("no host path (image volumes are not supported)")
	case !filepath.IsAbs(hp):
		return mountSpec{}, fmt.Errorf("host path %s is not absolute", hp)
	case len(r.mountRoots) == 0:
		return mountSpec{}, fmt.Errorf("host path %s: this runtime allows no mounts (Config.MountRoots is empty)", hp)
	}
	resolved, err := filepath.EvalSymlinks(filepath.Clean(hp))
	if errors.Is(err, fs.ErrNotExist) {
		return mountSpec{}, fmt.Errorf("host path %s does not exist", hp)
	}
	if err != nil {
		return mountSpec{}, fmt.Errorf("host path %s: %v", hp, cause(err))
	}
	if within(containers, resolved) || within(resolved, containers) {
		return mountSpec{}, fmt.Errorf("host path %s holds the runtime's containers", hp)
	}
	for i, root := range r.mountRoots {
		dir, err := filepath.EvalSymlinks(root)
		if err != nil || !within(dir, resolved) {
			continue
		}
		rel, err := filepath.Rel(dir, resolved)
		if err != nil {
			continue
		}
		// Stat it from the mount root, as every later open will be: what
		// a symlink swapped in since EvalSymlinks would reach outside is
		// refused here too.
		fsys, err := os.OpenRoot(dir)
		if err != nil {
			return mountSpec{}, fmt.Errorf("mount root %s: %v", root, cause(err))
		}
		fi, err := fsys.Stat(rel)
		fsys.Close()
		if err != nil {
			return mountSpec{}, fmt.Errorf("host path %s: %v", hp, cause(err))
		}
		if !fi.IsDir() && !fi.Mode().IsRegular() {
			return mountSpec{}, fmt.Errorf("host path %s is neither a directory nor a regular file", hp)
		}
		return mountSpec{Path: dest, Root: i, Rel: filepath.ToSlash(rel), File: !fi.IsDir(), ReadOnly: mt.GetReadonly(), host: dir}, nil
	}
	return mountSpec{}, fmt.Errorf("host path %s is outside the runtime's mount roots (%s)", hp, strings.Join(r.mountRoots, ", "))
}

// within reports whether p is dir or under it (both clean and absolute).
func within(dir, p string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// openMounts opens specs for a container's view; rootDir is where the
// mount root of a spec is (on the host, or in the sandbox process).
func openMounts(specs []mountSpec, rootDir func(mountSpec) string) ([]*fsMount, error) {
	var mounts []*fsMount
	for _, s := range specs {
		m, err := openMount(rootDir(s), s)
		if err != nil {
			for _, m := range mounts {
				m.dir.Close()
			}
			return nil, fmt.Errorf("mount /%s: %v", s.Path, cause(err))
		}
		mounts = append(mounts, m)
	}
	return mounts, nil
}

// openMount opens s, starting at its mount root dir: an os.Root of its
// directory (a file mount: of the file's directory).
func openMount(dir string, s mountSpec) (*fsMount, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	sub, name := s.Rel, "."
	if s.File {
		sub, name = path.Dir(s.Rel), path.Base(s.Rel)
	}
	d, err := root.OpenRoot(sub)
	if err != nil {
		return nil, err
	}
	if s.File {
		if fi, err := d.Stat(name); err != nil || !fi.Mode().IsRegular() {
			d.Close()
			if err == nil {
				err = errors.New("not a regular file")
			}
			return nil, err
		}
	}
	return &fsMount{path: s.Path, dir: d, name: name, readOnly: s.ReadOnly}, nil
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

// mountsDir is where the sandbox process sees the mount roots: mount root
// i is bound at /.mounts/<i> in its root, the containers' directory.
const mountsDir = ".mounts"

// mountPoint is where mount root i is in the sandbox process.
func mountPoint(i int) string { return "/" + mountsDir + "/" + strconv.Itoa(i) }

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
