// Package hostpath is the hostPath volume plugin
// ("kubernetes.io/host-path"), upstream's pkg/volume/hostpath. A hostPath
// volume's path P is <host root>/P (VolumeHost.GetHostPathRoot). On a real
// runtime (containerd) the host root is "/": P is the machine's own path,
// as upstream's. With the mock runtime it is the kubelet's root
// directory's host/ subdirectory, so /var/log in a pod's spec is
// <root>/host/var/log on the machine: the course's sandbox forbids a pod
// spec run by the mock to touch the host, for pod YAML is untrusted input.
//
// Where it departs from upstream, and why: the mapping above, with the
// mock; a path with a ".." element is refused as upstream refuses it, and
// a symlink inside the host root that leads out of it is refused too
// (upstream follows it: with "/" nothing is outside); the type checks are
// upstream's (DirectoryOrCreate, Directory, FileOrCreate, File, Socket,
// CharDevice, BlockDevice, "" for no check), made on the mapped path;
// TearDown leaves the content, as upstream leaves the host's files.
package hostpath

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"mykubelet/mylib/volume"
	"mykubelet/mylib/volume/util"
)

// PluginName is upstream's name for the plugin.
const PluginName = "kubernetes.io/host-path"

// ProbeVolumePlugins is the plugin list this package contributes.
func ProbeVolumePlugins() []volume.VolumePlugin {
	return []volume.VolumePlugin{&hostPathPlugin{}}
}

// MapPath is where a hostPath volume's path lives under root: root joined
// with the cleaned path. It refuses a path with a ".." element (upstream's
// message), so the result is always root or below it.
func MapPath(root, path string) (string, error) {
	for _, part := range strings.Split(filepath.ToSlash(path), "/") {
		if part == ".." {
			return "", fmt.Errorf("invalid HostPath `%s`: must not contain '..'", path)
		}
	}
	return filepath.Join(root, filepath.Clean("/"+path)), nil
}

type hostPathPlugin struct{ host volume.VolumeHost }

var _ volume.VolumePlugin = (*hostPathPlugin)(nil)

func (p *hostPathPlugin) Init(host volume.VolumeHost) error { p.host = host; return nil }
func (p *hostPathPlugin) GetPluginName() string             { return PluginName }
func (p *hostPathPlugin) CanSupport(spec *volume.Spec) bool {
	return spec.Volume != nil && spec.Volume.HostPath != nil
}

// RequiresRemount: the content is the host's (here: the host root's).
func (p *hostPathPlugin) RequiresRemount(*volume.Spec) bool { return false }

func (p *hostPathPlugin) NewMounter(spec *volume.Spec, pod *v1.Pod) (volume.Mounter, error) {
	if err := util.CheckVolumeName(spec.Name()); err != nil {
		return nil, err
	}
	src := spec.Volume.HostPath
	root := p.host.GetHostPathRoot()
	mapped, err := MapPath(root, src.Path)
	if err != nil {
		return nil, err
	}
	t := v1.HostPathUnset
	if src.Type != nil {
		t = *src.Type
	}
	return &hostPathMounter{root: root, podPath: src.Path, path: mapped, pathType: t, readOnly: spec.ReadOnly}, nil
}

// NewUnmounter: nothing to undo (see TearDown); its path is empty, as
// upstream's.
func (p *hostPathPlugin) NewUnmounter(volName string, podUID types.UID) (volume.Unmounter, error) {
	return hostPathUnmounter{}, nil
}

type hostPathMounter struct {
	root     string
	podPath  string // as the pod spec says it
	path     string // mapped under root
	pathType v1.HostPathType
	readOnly bool
}

// GetPath is the mapped path, under the host root.
func (m *hostPathMounter) GetPath() string { return m.path }

// GetAttributes: read-only when the pod's volumeMount says so; not managed.
func (m *hostPathMounter) GetAttributes() volume.Attributes {
	return volume.Attributes{ReadOnly: m.readOnly, Managed: false}
}

// SetUp checks the type (creating for the *OrCreate types) and that the
// mapped path, symlinks resolved, is still under the host root.
func (m *hostPathMounter) SetUp(volume.MounterArgs) error {
	if err := os.MkdirAll(m.root, 0o755); err != nil {
		return err
	}
	if err := m.checkInsideRoot(); err != nil {
		return err
	}
	if err := m.checkType(); err != nil {
		return err
	}
	return m.checkInsideRoot() // what the check created or found must stay inside too
}

// checkInsideRoot resolves the symlinks of the longest existing prefix of
// the mapped path and refuses it when it leaves the root.
func (m *hostPathMounter) checkInsideRoot() error {
	realRoot, err := filepath.EvalSymlinks(m.root)
	if err != nil {
		return err
	}
	p := m.path
	for {
		if _, err := os.Lstat(p); err == nil {
			break
		}
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		p = parent
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return fmt.Errorf("hostPath %s: %w", m.podPath, err)
	}
	if realRoot != "/" && real != realRoot && !strings.HasPrefix(real, realRoot+string(os.PathSeparator)) {
		return fmt.Errorf("invalid HostPath `%s`: a symlink under the host root %s leads out of it", m.podPath, m.root)
	}
	return nil
}

// checkType is upstream's checkTypeInternal on the mapped path; the
// messages name the pod's path, which is what the reader wrote.
func (m *hostPathMounter) checkType() error {
	fi, statErr := os.Stat(m.path)
	exists := statErr == nil
	switch m.pathType {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate:
		if !exists {
			return os.MkdirAll(m.path, 0o755)
		}
		fallthrough
	case v1.HostPathDirectory:
		if !exists || !fi.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a directory", m.podPath)
		}
	case v1.HostPathFileOrCreate:
		if !exists {
			// As upstream: the parent directory must exist.
			f, err := os.OpenFile(m.path, os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
		fallthrough
	case v1.HostPathFile:
		if !exists || !fi.Mode().IsRegular() {
			return fmt.Errorf("hostPath type check failed: %s is not a file", m.podPath)
		}
	case v1.HostPathSocket:
		if !exists || fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("hostPath type check failed: %s is not a socket file", m.podPath)
		}
	case v1.HostPathCharDev:
		if !exists || fi.Mode()&os.ModeCharDevice == 0 {
			return fmt.Errorf("hostPath type check failed: %s is not a character device", m.podPath)
		}
	case v1.HostPathBlockDev:
		if !exists || fi.Mode()&os.ModeDevice == 0 || fi.Mode()&os.ModeCharDevice != 0 {
			return fmt.Errorf("hostPath type check failed: %s is not a block device", m.podPath)
		}
	default:
		return fmt.Errorf("%s is an invalid volume type", m.pathType)
	}
	return nil
}

type hostPathUnmounter struct{}

func (hostPathUnmounter) GetPath() string { return "" }

// TearDown keeps the files: a hostPath's content outlives the pod.
func (hostPathUnmounter) TearDown() error { return nil }
