// Package configmap is the configMap volume plugin
// ("kubernetes.io/configmap"), upstream's pkg/volume/configmap: each key
// of the ConfigMap (or each listed item) becomes a file, written by the
// atomic writer and rewritten when the ConfigMap changes.
//
// The files then belong to the pod's fsGroup (volume.SetVolumeOwnership).
//
// Where it departs from upstream, and why: upstream wraps an emptyDir
// volume; here the directory is made directly (nothing of an emptyDir is
// needed).
package configmap

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"mykubelet/mylib/volume"
	"mykubelet/mylib/volume/util"
)

// PluginName is upstream's name for the plugin.
const PluginName = "kubernetes.io/configmap"

// ProbeVolumePlugins is the plugin list this package contributes.
func ProbeVolumePlugins() []volume.VolumePlugin {
	return []volume.VolumePlugin{&configMapPlugin{}}
}

type configMapPlugin struct {
	host         volume.VolumeHost
	getConfigMap func(namespace, name string) (*v1.ConfigMap, error)
}

var _ volume.VolumePlugin = (*configMapPlugin)(nil)

func (p *configMapPlugin) Init(host volume.VolumeHost) error {
	p.host = host
	p.getConfigMap = host.GetConfigMapFunc()
	return nil
}

func (p *configMapPlugin) GetPluginName() string { return PluginName }

func (p *configMapPlugin) CanSupport(spec *volume.Spec) bool {
	return spec.Volume != nil && spec.Volume.ConfigMap != nil
}

// RequiresRemount: the files follow the ConfigMap.
func (p *configMapPlugin) RequiresRemount(*volume.Spec) bool { return true }

func (p *configMapPlugin) NewMounter(spec *volume.Spec, pod *v1.Pod) (volume.Mounter, error) {
	if err := util.CheckVolumeName(spec.Name()); err != nil {
		return nil, err
	}
	return &configMapVolumeMounter{
		plugin: p, pod: pod, volName: spec.Name(), source: *spec.Volume.ConfigMap,
		dir: p.host.GetPodVolumeDir(pod.UID, PluginName, spec.Name()),
	}, nil
}

func (p *configMapPlugin) NewUnmounter(volName string, podUID types.UID) (volume.Unmounter, error) {
	if err := util.CheckVolumeName(volName); err != nil {
		return nil, err
	}
	return &configMapVolumeUnmounter{dir: p.host.GetPodVolumeDir(podUID, PluginName, volName)}, nil
}

type configMapVolumeMounter struct {
	plugin  *configMapPlugin
	pod     *v1.Pod
	volName string
	source  v1.ConfigMapVolumeSource
	dir     string
}

func (m *configMapVolumeMounter) GetPath() string { return m.dir }

// GetAttributes: read-only for the container, managed by the kubelet.
func (m *configMapVolumeMounter) GetAttributes() volume.Attributes {
	return volume.Attributes{ReadOnly: true, Managed: true}
}

// SetUp reads the ConfigMap through the kubelet's manager and writes it.
// A missing ConfigMap is an error unless the volume is optional (then the
// volume is empty), as upstream.
func (m *configMapVolumeMounter) SetUp(args volume.MounterArgs) error {
	optional := m.source.Optional != nil && *m.source.Optional
	cm, err := m.plugin.getConfigMap(m.pod.Namespace, m.source.Name)
	if err != nil {
		if !(apierrors.IsNotFound(err) && optional) {
			klog.ErrorS(err, "Couldn't get configMap", "configMap", klog.KRef(m.pod.Namespace, m.source.Name))
			return err
		}
		cm = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: m.pod.Namespace, Name: m.source.Name}}
	}
	payload, err := MakePayload(m.source.Items, cm, m.source.DefaultMode, optional)
	if err != nil {
		return err
	}
	ctx := fmt.Sprintf("pod %s/%s volume %s", m.pod.Namespace, m.pod.Name, m.volName)
	if err := util.WriteVolumeDir(m.dir, ctx, payload); err != nil {
		return err
	}
	return volume.SetVolumeOwnership(m.dir, args.FsGroup, true)
}

// MakePayload turns a ConfigMap into files: every key of Data and
// BinaryData when items is empty, else each item's key at its path. A
// file's mode is the item's mode, else defaultMode (nil: 0644, upstream's
// API default). A missing item key is an error unless optional.
func MakePayload(items []v1.KeyToPath, cm *v1.ConfigMap, defaultMode *int32, optional bool) (map[string]util.FileProjection, error) {
	mode := int32(v1.ConfigMapVolumeSourceDefaultMode)
	if defaultMode != nil {
		mode = *defaultMode
	}
	payload := make(map[string]util.FileProjection, len(cm.Data)+len(cm.BinaryData))
	if len(items) == 0 {
		for k, v := range cm.Data {
			payload[k] = util.FileProjection{Data: []byte(v), Mode: mode}
		}
		for k, v := range cm.BinaryData {
			payload[k] = util.FileProjection{Data: v, Mode: mode}
		}
		return payload, nil
	}
	for _, item := range items {
		var data []byte
		if s, ok := cm.Data[item.Key]; ok {
			data = []byte(s)
		} else if b, ok := cm.BinaryData[item.Key]; ok {
			data = b
		} else if optional {
			continue
		} else {
			return nil, fmt.Errorf("configmap references non-existent config key: %s", item.Key)
		}
		f := util.FileProjection{Data: data, Mode: mode}
		if item.Mode != nil {
			f.Mode = *item.Mode
		}
		payload[item.Path] = f
	}
	return payload, nil
}

type configMapVolumeUnmounter struct{ dir string }

func (u *configMapVolumeUnmounter) GetPath() string { return u.dir }
func (u *configMapVolumeUnmounter) TearDown() error { return util.RemoveVolumeDir(u.dir) }
