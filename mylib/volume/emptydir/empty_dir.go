// Package emptydir is the emptyDir volume plugin
// ("kubernetes.io/empty-dir"), upstream's pkg/volume/emptydir: an empty
// directory (mode 0777) made when the pod starts, shared by its
// containers, removed with the pod. With Options.Tmpfs (a kubelet that
// drives a real runtime, as root), medium "Memory" is a tmpfs mounted on
// that directory, as upstream's setupTmpfs, its size the smallest of the
// Node's allocatable memory, the pod's memory limit and the volume's
// sizeLimit (upstream's calculateEmptyDirMemorySize). With a pod fsGroup
// the directory belongs to that group, setgid, so that what the containers
// write there does too (volume.SetVolumeOwnership).
//
// Where it departs from upstream, and why: without Options.Tmpfs (the mock
// runtime, whose sandbox has no mount(2) and whose kubelet need not be
// root) medium "Memory" is a plain directory on disk; the content still
// goes away with the pod. HugePages media are refused (the node has
// none). The sizeLimit of a disk-backed volume is only recorded
// (SizeLimit): upstream's eviction manager, not this plugin, enforces it.
package emptydir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"mykubelet/mylib/cm"
	"mykubelet/mylib/volume"
	"mykubelet/mylib/volume/util"
)

// PluginName is upstream's name for the plugin.
const PluginName = "kubernetes.io/empty-dir"

// perm is upstream's mode for an emptyDir: every container user may write.
const perm = 0o777

// ProbeVolumePlugins is the plugin list this package contributes, with
// medium "Memory" on disk.
func ProbeVolumePlugins() []volume.VolumePlugin {
	return ProbeVolumePluginsWith(Options{})
}

// Options choose how the plugin backs medium "Memory".
type Options struct {
	// Tmpfs mounts a tmpfs for medium "Memory", as upstream; it needs
	// mount(2) (root or CAP_SYS_ADMIN).
	Tmpfs bool
}

// ProbeVolumePluginsWith is ProbeVolumePlugins with opts.
func ProbeVolumePluginsWith(opts Options) []volume.VolumePlugin {
	return []volume.VolumePlugin{&emptyDirPlugin{tmpfs: opts.Tmpfs}}
}

// SizeLimit is the volume's sizeLimit, nil when it has none (or is not an
// emptyDir). The eviction manager reads it.
func SizeLimit(spec *volume.Spec) *resource.Quantity {
	if spec == nil || spec.Volume == nil || spec.Volume.EmptyDir == nil || spec.Volume.EmptyDir.SizeLimit == nil {
		return nil
	}
	q := spec.Volume.EmptyDir.SizeLimit.DeepCopy()
	return &q
}

type emptyDirPlugin struct {
	host  volume.VolumeHost
	tmpfs bool
}

var _ volume.VolumePlugin = (*emptyDirPlugin)(nil)

func (p *emptyDirPlugin) Init(host volume.VolumeHost) error { p.host = host; return nil }
func (p *emptyDirPlugin) GetPluginName() string             { return PluginName }
func (p *emptyDirPlugin) CanSupport(spec *volume.Spec) bool {
	return spec.Volume != nil && spec.Volume.EmptyDir != nil
}

// RequiresRemount: the content is the containers', the kubelet never
// rewrites it.
func (p *emptyDirPlugin) RequiresRemount(*volume.Spec) bool { return false }

func (p *emptyDirPlugin) NewMounter(spec *volume.Spec, pod *v1.Pod) (volume.Mounter, error) {
	if err := util.CheckVolumeName(spec.Name()); err != nil {
		return nil, err
	}
	switch m := spec.Volume.EmptyDir.Medium; m {
	case v1.StorageMediumDefault, v1.StorageMediumMemory:
	default:
		return nil, fmt.Errorf("emptyDir medium %q is not supported on this node", m)
	}
	e := &emptyDir{dir: p.host.GetPodVolumeDir(pod.UID, PluginName, spec.Name()), medium: spec.Volume.EmptyDir.Medium}
	if e.medium == v1.StorageMediumMemory && p.tmpfs {
		alloc, err := p.host.GetNodeAllocatable()
		if err != nil {
			return nil, err
		}
		e.tmpfs, e.sizeLimit = true, calculateEmptyDirMemorySize(alloc.Memory(), spec, pod)
	}
	return e, nil
}

// calculateEmptyDirMemorySize is the tmpfs's size, as upstream's: the
// Node's allocatable memory, or the pod's memory limit (its cgroup's) if
// smaller, or the volume's sizeLimit if smaller still. Zero: the kernel's
// default, half the machine's memory.
func calculateEmptyDirMemorySize(nodeAllocatableMemory *resource.Quantity, spec *volume.Spec, pod *v1.Pod) resource.Quantity {
	size := nodeAllocatableMemory.DeepCopy()
	const cpuPeriod = 100000 // only the config's Memory is read
	if rc := cm.ResourceConfigForPod(pod, false, cpuPeriod); rc != nil && rc.Memory != nil {
		if limit := resource.NewQuantity(*rc.Memory, resource.BinarySI); limit.Sign() > 0 && limit.Cmp(size) <= 0 {
			size = *limit
		}
	}
	if l := spec.Volume.EmptyDir.SizeLimit; l != nil && l.Sign() > 0 && l.Cmp(size) <= 0 {
		size = l.DeepCopy()
	}
	return size
}

func (p *emptyDirPlugin) NewUnmounter(volName string, podUID types.UID) (volume.Unmounter, error) {
	if err := util.CheckVolumeName(volName); err != nil {
		return nil, err
	}
	return &emptyDir{dir: p.host.GetPodVolumeDir(podUID, PluginName, volName)}, nil
}

// emptyDir is both the Mounter and the Unmounter, as upstream's.
type emptyDir struct {
	dir    string
	medium v1.StorageMedium
	// tmpfs: medium Memory as a tmpfs of sizeLimit bytes (zero: the
	// kernel's default).
	tmpfs     bool
	sizeLimit resource.Quantity
}

func (e *emptyDir) GetPath() string { return e.dir }

// GetAttributes: writable; managed (the kubelet owns the directory).
func (e *emptyDir) GetAttributes() volume.Attributes {
	return volume.Attributes{ReadOnly: false, Managed: true}
}

// SetUp makes the directory (0777) and, for a tmpfs, mounts it there
// (its root 1777, the kernel's default, as upstream). A second SetUp keeps
// what the containers wrote.
func (e *emptyDir) SetUp(args volume.MounterArgs) error {
	if err := util.MakeVolumeDir(e.dir, perm); err != nil {
		return err
	}
	if !e.tmpfs {
		return volume.SetVolumeOwnership(e.dir, args.FsGroup, false)
	}
	if mounted, err := isTmpfsMountPoint(e.dir); err != nil || mounted {
		return err
	}
	var options string
	if e.sizeLimit.Sign() > 0 {
		options = fmt.Sprintf("size=%d", e.sizeLimit.Value())
	}
	if err := unix.Mount("tmpfs", e.dir, "tmpfs", 0, options); err != nil {
		return fmt.Errorf("mounting tmpfs for emptyDir %s: %w", e.dir, err)
	}
	return volume.SetVolumeOwnership(e.dir, args.FsGroup, false)
}

// TearDown unmounts the tmpfs, if the directory is one, then removes the
// directory and what the containers wrote in it.
func (e *emptyDir) TearDown() error {
	mounted, err := isTmpfsMountPoint(e.dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if mounted {
		if err := unix.Unmount(e.dir, 0); err != nil {
			return fmt.Errorf("unmounting tmpfs of emptyDir %s: %w", e.dir, err)
		}
	}
	return util.RemoveVolumeDir(e.dir)
}

// isTmpfsMountPoint tells whether dir is a tmpfs mounted there (not a
// directory of a tmpfs mounted above it, as /tmp may be): its file
// system is tmpfs and its device differs from its parent's.
func isTmpfsMountPoint(dir string) (bool, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return false, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	if fs.Type != unix.TMPFS_MAGIC {
		return false, nil
	}
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, &os.PathError{Op: "lstat", Path: dir, Err: err}
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, &os.PathError{Op: "lstat", Path: filepath.Dir(dir), Err: err}
	}
	return st.Dev != parent.Dev, nil
}
