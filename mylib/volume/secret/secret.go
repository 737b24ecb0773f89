// Package secret is the secret volume plugin ("kubernetes.io/secret"),
// upstream's pkg/volume/secret: each key of the Secret (or each listed
// item) becomes a file, written by the atomic writer and rewritten when
// the Secret changes.
//
// The files then belong to the pod's fsGroup (volume.SetVolumeOwnership).
//
// Where it departs from upstream, and why: upstream keeps Secret files on
// a tmpfs (memory, never on disk); here they are plain files under the
// kubelet's root directory (no mount(2) in the course's sandbox).
package secret

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
const PluginName = "kubernetes.io/secret"

// ProbeVolumePlugins is the plugin list this package contributes.
func ProbeVolumePlugins() []volume.VolumePlugin {
	return []volume.VolumePlugin{&secretPlugin{}}
}

type secretPlugin struct {
	host      volume.VolumeHost
	getSecret func(namespace, name string) (*v1.Secret, error)
}

var _ volume.VolumePlugin = (*secretPlugin)(nil)

func (p *secretPlugin) Init(host volume.VolumeHost) error {
	p.host = host
	p.getSecret = host.GetSecretFunc()
	return nil
}

func (p *secretPlugin) GetPluginName() string { return PluginName }

func (p *secretPlugin) CanSupport(spec *volume.Spec) bool {
	return spec.Volume != nil && spec.Volume.Secret != nil
}

// RequiresRemount: the files follow the Secret.
func (p *secretPlugin) RequiresRemount(*volume.Spec) bool { return true }

func (p *secretPlugin) NewMounter(spec *volume.Spec, pod *v1.Pod) (volume.Mounter, error) {
	if err := util.CheckVolumeName(spec.Name()); err != nil {
		return nil, err
	}
	return &secretVolumeMounter{
		plugin: p, pod: pod, volName: spec.Name(), source: *spec.Volume.Secret,
		dir: p.host.GetPodVolumeDir(pod.UID, PluginName, spec.Name()),
	}, nil
}

func (p *secretPlugin) NewUnmounter(volName string, podUID types.UID) (volume.Unmounter, error) {
	if err := util.CheckVolumeName(volName); err != nil {
		return nil, err
	}
	return &secretVolumeUnmounter{dir: p.host.GetPodVolumeDir(podUID, PluginName, volName)}, nil
}

type secretVolumeMounter struct {
	plugin  *secretPlugin
	pod     *v1.Pod
	volName string
	source  v1.SecretVolumeSource
	dir     string
}

func (m *secretVolumeMounter) GetPath() string { return m.dir }

// GetAttributes: read-only for the container, managed by the kubelet.
func (m *secretVolumeMounter) GetAttributes() volume.Attributes {
	return volume.Attributes{ReadOnly: true, Managed: true}
}

// SetUp reads the Secret through the kubelet's manager and writes it. A
// missing Secret is an error unless the volume is optional (then the
// volume is empty), as upstream.
func (m *secretVolumeMounter) SetUp(args volume.MounterArgs) error {
	optional := m.source.Optional != nil && *m.source.Optional
	s, err := m.plugin.getSecret(m.pod.Namespace, m.source.SecretName)
	if err != nil {
		if !(apierrors.IsNotFound(err) && optional) {
			klog.ErrorS(err, "Couldn't get secret", "secret", klog.KRef(m.pod.Namespace, m.source.SecretName))
			return err
		}
		s = &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.pod.Namespace, Name: m.source.SecretName}}
	}
	payload, err := MakePayload(m.source.Items, s, m.source.DefaultMode, optional)
	if err != nil {
		return err
	}
	ctx := fmt.Sprintf("pod %s/%s volume %s", m.pod.Namespace, m.pod.Name, m.volName)
	if err := util.WriteVolumeDir(m.dir, ctx, payload); err != nil {
		return err
	}
	return volume.SetVolumeOwnership(m.dir, args.FsGroup, true)
}

// MakePayload turns a Secret into files: every key of Data when items is
// empty, else each item's key at its path. A file's mode is the item's
// mode, else defaultMode (nil: 0644, upstream's API default). A missing
// item key is an error unless optional.
func MakePayload(items []v1.KeyToPath, s *v1.Secret, defaultMode *int32, optional bool) (map[string]util.FileProjection, error) {
	mode := int32(v1.SecretVolumeSourceDefaultMode)
	if defaultMode != nil {
		mode = *defaultMode
	}
	payload := make(map[string]util.FileProjection, len(s.Data))
	if len(items) == 0 {
		for k, v := range s.Data {
			payload[k] = util.FileProjection{Data: v, Mode: mode}
		}
		return payload, nil
	}
	for _, item := range items {
		data, ok := s.Data[item.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("references non-existent secret key: %s", item.Key)
		}
		f := util.FileProjection{Data: data, Mode: mode}
		if item.Mode != nil {
			f.Mode = *item.Mode
		}
		payload[item.Path] = f
	}
	return payload, nil
}

type secretVolumeUnmounter struct{ dir string }

func (u *secretVolumeUnmounter) GetPath() string { return u.dir }
func (u *secretVolumeUnmounter) TearDown() error { return util.RemoveVolumeDir(u.dir) }
