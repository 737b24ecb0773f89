// Package image is the image volume plugin ("kubernetes.io/image"),
// upstream's pkg/volume/image: a volume that is an OCI image's files,
// mounted read-only. The kubelet does nothing to set it up: the runtime
// manager pulls the image (with the volume's pullPolicy) before it starts
// the pod's containers, and the runtime mounts the image's files where
// the container asks (the CRI Mount's Image field). So the plugin only
// lets the volume manager count the volume as mounted: its SetUp and
// TearDown do nothing and its path is "" (there is no directory on the
// node to point at). Containerd mounts image volumes from v2.1; the mock
// runtime refuses them with a CreateContainerError that says why.
package image

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"mykubelet/mylib/volume"
)

// PluginName is upstream's name for the plugin.
const PluginName = "kubernetes.io/image"

// ProbeVolumePlugins is the plugin list this package contributes.
func ProbeVolumePlugins() []volume.VolumePlugin { return []volume.VolumePlugin{imagePlugin{}} }

// imagePlugin is its own Mounter and Unmounter: there is nothing to hold.
type imagePlugin struct{}

var (
	_ volume.VolumePlugin = imagePlugin{}
	_ volume.Mounter      = imagePlugin{}
	_ volume.Unmounter    = imagePlugin{}
)

func (imagePlugin) Init(volume.VolumeHost) error { return nil }
func (imagePlugin) GetPluginName() string        { return PluginName }
func (imagePlugin) CanSupport(spec *volume.Spec) bool {
	return spec != nil && spec.Volume != nil && spec.Volume.Image != nil
}
func (imagePlugin) RequiresRemount(*volume.Spec) bool { return false }
func (p imagePlugin) NewMounter(*volume.Spec, *v1.Pod) (volume.Mounter, error) {
	return p, nil
}
func (p imagePlugin) NewUnmounter(string, types.UID) (volume.Unmounter, error) {
	return p, nil
}

// GetPath is "": the runtime mounts the image, not a directory.
func (imagePlugin) GetPath() string                { return "" }
func (imagePlugin) SetUp(volume.MounterArgs) error { return nil }
func (imagePlugin) TearDown() error                { return nil }

// GetAttributes: read-only, always, as upstream's.
func (imagePlugin) GetAttributes() volume.Attributes { return volume.Attributes{ReadOnly: true} }
