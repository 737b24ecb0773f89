// Package emptydir is the emptyDir volume plugin
// ("kubernetes.io/empty-dir"), upstream's pkg/volume/emptydir: an empty
// directory (mode 0777) made when the pod starts, shared by its
// containers, removed with the pod.
//
// Where it departs from upstream, and why: medium "Memory" is a plain
// directory on disk, not a tmpfs mount (the course's sandbox has no
// mount(2)); the content still goes away with the pod. HugePages media are
// refused (the node has none). The sizeLimit is only recorded (SizeLimit):
// upstream's eviction manager, not this plugin, enforces it.
package emptydir

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"mykubelet/mylib/volume"
	"mykubelet/mylib/volume/util"
)

// PluginName is upstream's name for the plugin.
const PluginName = "kubernetes.io/empty-dir"

// perm is upstream's mode for an emptyDir: every container user may write.
const perm = 0o777

// ProbeVolumePlugins is the plugin list this package contributes.
func ProbeVolumePlugins() []volume.VolumePlugin {
	return []volume.VolumePlugin{&emptyDirPlugin{}}
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

type emptyDirPlugin struct{ host volume.VolumeHost }

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
	return &emptyDir{dir: p.host.GetPodVolumeDir(pod.UID, PluginName, spec.Name()), medium: spec.Volume.EmptyDir.Medium}, nil
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
}

func (e *emptyDir) GetPath() string { return e.dir }

// GetAttributes: writable; managed (the kubelet owns the directory).
func (e *emptyDir) GetAttributes() volume.Attributes {
	return volume.Attributes{ReadOnly: false, Managed: true}
}

// SetUp makes the directory (0777). A second SetUp keeps what the
// containers wrote.
func (e *emptyDir) SetUp(volume.MounterArgs) error {
	return util.MakeVolumeDir(e.dir, perm)
}

// TearDown removes the directory and what the containers wrote in it.
func (e *emptyDir) TearDown() error { return util.RemoveVolumeDir(e.dir) }
