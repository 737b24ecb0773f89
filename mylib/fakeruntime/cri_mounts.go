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

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/fakeruntime/sandboxproc"
)

// mountError is a mount the runtime refuses: InvalidArgument.
type mountError struct{ error }

// checkMounts checks a container's mounts: each container path absolute
// and unique, each host path existing, in a mount root, with no symlink
// below it, and not holding containers (the containers' directory). It
// returns them pinned (opened, see pinMount), in the order of specs; the
// caller closes them.
func (r *Runtime) checkMounts(containers string, mounts []*runtimeapi.Mount) ([]sandboxproc.MountSpec, []*sandboxproc.FsMount, error) {
	if len(mounts) == 0 {
		return nil, nil, nil
	}
	containers, err := filepath.EvalSymlinks(containers)
	if err != nil {
		return nil, nil, err
	}
	specs := make([]sandboxproc.MountSpec, 0, len(mounts))
	var pinned []*sandboxproc.FsMount
	seen := map[string]bool{}
	for _, mt := range mounts {
		spec, m, err := r.checkMount(containers, mt)
		if err == nil && seen[spec.Path] {
			m.Close()
			err = errors.New("the container path is mounted twice")
		}
		if err != nil {
			sandboxproc.CloseMounts(pinned)
			return nil, nil, mountError{fmt.Errorf("mount %s: %w", mt.GetContainerPath(), err)}
		}
		seen[spec.Path] = true
		specs, pinned = append(specs, spec), append(pinned, m)
	}
	return specs, pinned, nil
}

// checkMount checks one mount and pins it; containers is the containers'
// directory, symlinks resolved.
func (r *Runtime) checkMount(containers string, mt *runtimeapi.Mount) (sandboxproc.MountSpec, *sandboxproc.FsMount, error) {
	cp, hp := mt.GetContainerPath(), mt.GetHostPath()
	if !path.IsAbs(cp) {
		return sandboxproc.MountSpec{}, nil, errors.New("the container path is not absolute")
	}
	dest := strings.TrimPrefix(path.Clean(cp), "/")
	if dest == "" {
		return sandboxproc.MountSpec{}, nil, errors.New("cannot mount over the container's /")
	}
	switch {
	case mt.GetImage() != nil:
		return sandboxproc.MountSpec{}, nil, fmt.Errorf("image volume %s: this runtime cannot mount an image's files (a real one can: containerd 2.1 or later)",
			mt.GetImage().GetUserSpecifiedImage())
	case hp == "":
		return sandboxproc.MountSpec{}, nil, errors.New("no host path")
	case !filepath.IsAbs(hp):
		return sandboxproc.MountSpec{}, nil, fmt.Errorf("host path %s is not absolute", hp)
	case len(r.mountRoots) == 0:
		return sandboxproc.MountSpec{}, nil, fmt.Errorf("host path %s: this runtime allows no mounts (Config.MountRoots is empty)", hp)
	}
	hp = filepath.Clean(hp)
	resolved, err := filepath.EvalSymlinks(hp)
	if errors.Is(err, fs.ErrNotExist) {
		return sandboxproc.MountSpec{}, nil, fmt.Errorf("host path %s does not exist", hp)
	}
	if err != nil {
		return sandboxproc.MountSpec{}, nil, fmt.Errorf("host path %s: %v", hp, sandboxproc.Cause(err))
	}
	if within(containers, resolved) || within(resolved, containers) {
		return sandboxproc.MountSpec{}, nil, fmt.Errorf("host path %s holds the runtime's containers", hp)
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
				return sandboxproc.MountSpec{}, nil, fmt.Errorf("host path %s reaches the mount root %s only through a symlink", hp, root)
			}
		}
		s := sandboxproc.MountSpec{Path: dest, Root: i, Rel: rel, ReadOnly: mt.GetReadonly(), Host: dir}
		m, err := sandboxproc.PinMount(dir, &s)
		if err != nil {
			return sandboxproc.MountSpec{}, nil, fmt.Errorf("host path %s: %w", hp, err)
		}
		return s, m, nil
	}
	return sandboxproc.MountSpec{}, nil, fmt.Errorf("host path %s is outside the runtime's mount roots (%s)", hp, strings.Join(r.mountRoots, ", "))
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

// makeMountPoints makes each mount's mount point in the container's root,
// as runc does (a directory, or an empty file for a file mount), so that a
// listing of its parent shows it. A mount inside another mount has its
// point in no directory of the host: the listing shows it anyway
// (containerFS.ReadDir), and the volume is left as the kubelet made it.
func makeMountPoints(root *os.Root, specs []sandboxproc.MountSpec) error {
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
				return mountError{fmt.Errorf("mount point /%s: %v", s.Path, sandboxproc.Cause(err))}
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
			return mountError{fmt.Errorf("mount point /%s: %v", s.Path, sandboxproc.Cause(err))}
		}
	}
	return nil
}

// covered reports whether one of specs covers name (relative to "/").
func covered(specs []sandboxproc.MountSpec, name string) bool {
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
