// Package projected is the projected volume plugin
// ("kubernetes.io/projected"), upstream's pkg/volume/projected: several
// sources in one directory. It fills every pod's kube-api-access-* volume
// (the ServiceAccount admission plugin adds it): a serviceAccountToken
// bound to the pod, ca.crt from the ConfigMap kube-root-ca.crt and the
// namespace from the downward API.
//
// A clusterTrustBundle source writes one file, path, of PEM certificates:
// those of the ClusterTrustBundle it names, or of every bundle of its
// signerName its labelSelector matches, each certificate once (the
// kubelet's mylib/clustertrustbundle manager). optional lets none be
// found (an empty file); otherwise the mount fails and the pod waits. As
// every projected volume is set up again at each sync of its pod, a
// changed bundle reaches the file within a sync.
//
// A podCertificate source writes a private key of its keyType and the
// certificate chain its signerName issued for it (the kubelet's
// mylib/podcertificate manager files a PodCertificateRequest with the
// node's credentials, and a new one from the certificate's
// beginRefreshAt): credentialBundlePath, the key then the chain in one
// file; keyPath and certificateChainPath, apart. Until the signer issues
// the first, the mount fails and the pod waits.
//
// Where it departs from upstream, and why: with an
// fsGroup the token keeps defaultMode and the group gets read
// (volume.SetVolumeOwnership, as for the other files; upstream narrows
// the token to 0600, owned by the containers' runAsUser, when they all
// share one).
package projected

import (
	"context"
	"errors"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"mykubelet/mylib/volume"
	"mykubelet/mylib/volume/configmap"
	"mykubelet/mylib/volume/downwardapi"
	"mykubelet/mylib/volume/secret"
	"mykubelet/mylib/volume/util"
)

// PluginName is upstream's name for the plugin.
const PluginName = "kubernetes.io/projected"

// DefaultExpirationSeconds is a serviceAccountToken source's lifetime
// when the pod does not say (the API's default: one hour).
const DefaultExpirationSeconds int64 = 3600

// ProbeVolumePlugins is the plugin list this package contributes.
func ProbeVolumePlugins() []volume.VolumePlugin {
	return []volume.VolumePlugin{&projectedPlugin{}}
}

type projectedPlugin struct {
	host         volume.VolumeHost
	getConfigMap func(namespace, name string) (*v1.ConfigMap, error)
	getSecret    func(namespace, name string) (*v1.Secret, error)
	getToken     func(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

var _ volume.VolumePlugin = (*projectedPlugin)(nil)

func (p *projectedPlugin) Init(host volume.VolumeHost) error {
	p.host = host
	p.getConfigMap = host.GetConfigMapFunc()
	p.getSecret = host.GetSecretFunc()
	p.getToken = host.GetServiceAccountTokenFunc()
	return nil
}

func (p *projectedPlugin) GetPluginName() string { return PluginName }

func (p *projectedPlugin) CanSupport(spec *volume.Spec) bool {
	return spec.Volume != nil && spec.Volume.Projected != nil
}

// RequiresRemount: the token is refreshed, the sources change.
func (p *projectedPlugin) RequiresRemount(*volume.Spec) bool { return true }

func (p *projectedPlugin) NewMounter(spec *volume.Spec, pod *v1.Pod) (volume.Mounter, error) {
	if err := util.CheckVolumeName(spec.Name()); err != nil {
		return nil, err
	}
	return &projectedVolumeMounter{
		plugin: p, pod: pod, volName: spec.Name(), source: *spec.Volume.Projected,
		dir: p.host.GetPodVolumeDir(pod.UID, PluginName, spec.Name()),
	}, nil
}

func (p *projectedPlugin) NewUnmounter(volName string, podUID types.UID) (volume.Unmounter, error) {
	if err := util.CheckVolumeName(volName); err != nil {
		return nil, err
	}
	u := unmounter{dir: p.host.GetPodVolumeDir(podUID, PluginName, volName), podUID: podUID}
	if d, ok := p.host.(volume.ServiceAccountTokenDeleter); ok {
		u.deleteTokens = d.DeleteServiceAccountTokenFunc()
	}
	if f, ok := p.host.(volume.PodCertificateForgetter); ok {
		u.forgetCertificates = f.ForgetPodCertificates
	}
	return u, nil
}

type projectedVolumeMounter struct {
	plugin  *projectedPlugin
	pod     *v1.Pod
	volName string
	source  v1.ProjectedVolumeSource
	dir     string
}

func (m *projectedVolumeMounter) GetPath() string { return m.dir }

// GetAttributes: read-only for the container, managed by the kubelet.
func (m *projectedVolumeMounter) GetAttributes() volume.Attributes {
	return volume.Attributes{ReadOnly: true, Managed: true}
}

// SetUp collects every source and writes them together: one atomic swap
// for the whole volume, so ca.crt and token always belong together.
func (m *projectedVolumeMounter) SetUp(args volume.MounterArgs) error {
	payload, err := m.collectData()
	if err != nil {
		klog.ErrorS(err, "Error preparing data for projected volume", "volume", m.volName, "pod", klog.KObj(m.pod))
		return err
	}
	ctx := fmt.Sprintf("pod %s/%s volume %s", m.pod.Namespace, m.pod.Name, m.volName)
	if err := util.WriteVolumeDir(m.dir, ctx, payload); err != nil {
		return err
	}
	return volume.SetVolumeOwnership(m.dir, args.FsGroup, true)
}

func (m *projectedVolumeMounter) collectData() (map[string]util.FileProjection, error) {
	mode := m.source.DefaultMode
	if mode == nil {
		d := int32(v1.ProjectedVolumeSourceDefaultMode)
		mode = &d
	}
	ns := m.pod.Namespace
	payload := map[string]util.FileProjection{}
	var errs []error
	add := func(part map[string]util.FileProjection, err error) {
		if err != nil {
			errs = append(errs, err)
			return
		}
		for k, v := range part {
			payload[k] = v
		}
	}
	for i, src := range m.source.Sources {
		switch {
		case src.Secret != nil:
			optional := src.Secret.Optional != nil && *src.Secret.Optional
			s, err := m.plugin.getSecret(ns, src.Secret.Name)
			if err != nil {
				if !(apierrors.IsNotFound(err) && optional) {
					errs = append(errs, err)
					continue
				}
				s = &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: src.Secret.Name}}
			}
			add(secret.MakePayload(src.Secret.Items, s, mode, optional))
		case src.ConfigMap != nil:
			optional := src.ConfigMap.Optional != nil && *src.ConfigMap.Optional
			cm, err := m.plugin.getConfigMap(ns, src.ConfigMap.Name)
			if err != nil {
				if !(apierrors.IsNotFound(err) && optional) {
					errs = append(errs, err)
					continue
				}
				cm = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: src.ConfigMap.Name}}
			}
			add(configmap.MakePayload(src.ConfigMap.Items, cm, mode, optional))
		case src.DownwardAPI != nil:
			add(downwardapi.CollectData(src.DownwardAPI.Items, m.pod, m.plugin.host, mode))
		case src.ServiceAccountToken != nil:
			tok, err := m.token(src.ServiceAccountToken)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			payload[src.ServiceAccountToken.Path] = util.FileProjection{Data: []byte(tok), Mode: *mode}
		case src.ClusterTrustBundle != nil:
			anchors, err := m.trustAnchors(src.ClusterTrustBundle)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			payload[src.ClusterTrustBundle.Path] = util.FileProjection{Data: anchors, Mode: *mode}
		case src.PodCertificate != nil:
			key, chain, err := m.plugin.host.GetPodCertificateCredentialBundle(context.Background(), m.pod, m.volName, i)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			add(PodCertificatePayload(src.PodCertificate, key, chain, *mode), nil)
		default:
			errs = append(errs, fmt.Errorf("projected volume %q: source %d is of no kind this node serves", m.volName, i))
		}
	}
	return payload, errors.Join(errs...)
}

// token asks the token manager for a token of the pod's service account,
// bound to the pod: the API server invalidates it when the pod goes.
func (m *projectedVolumeMounter) token(src *v1.ServiceAccountTokenProjection) (string, error) {
	exp := DefaultExpirationSeconds
	if src.ExpirationSeconds != nil {
		exp = *src.ExpirationSeconds
	}
	var auds []string
	if src.Audience != "" {
		auds = []string{src.Audience}
	}
	tr, err := m.plugin.getToken(m.pod.Namespace, m.pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:         auds,
			ExpirationSeconds: &exp,
			BoundObjectRef: &authenticationv1.BoundObjectReference{
				APIVersion: "v1", Kind: "Pod", Name: m.pod.Name, UID: m.pod.UID,
			},
		},
	})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// trustAnchors are the PEM certificates of the ClusterTrustBundle the
// source names, or of those of its signer its label selector matches
// (nil matches none, empty all), from the kubelet's manager. optional:
// none found writes an empty file; otherwise the volume fails to mount
// and the pod waits.
func (m *projectedVolumeMounter) trustAnchors(src *v1.ClusterTrustBundleProjection) ([]byte, error) {
	optional := src.Optional != nil && *src.Optional
	switch {
	case src.Name != nil:
		return m.plugin.host.GetTrustAnchorsByName(*src.Name, optional)
	case src.SignerName != nil:
		return m.plugin.host.GetTrustAnchorsBySigner(*src.SignerName, src.LabelSelector, optional)
	}
	return nil, errors.New("ClusterTrustBundle projection requires either name or signerName to be set")
}

// PodCertificatePayload is the files a podCertificate source asks for:
// credentialBundlePath, the key then the chain in one file (one read
// gives a key and the chain issued for it); keyPath and
// certificateChainPath, each apart.
func PodCertificatePayload(src *v1.PodCertificateProjection, key, chain []byte, mode int32) map[string]util.FileProjection {
	out := map[string]util.FileProjection{}
	if src.CredentialBundlePath != "" {
		out[src.CredentialBundlePath] = util.FileProjection{Data: append(append([]byte{}, key...), chain...), Mode: mode}
	}
	if src.KeyPath != "" {
		out[src.KeyPath] = util.FileProjection{Data: key, Mode: mode}
	}
	if src.CertificateChainPath != "" {
		out[src.CertificateChainPath] = util.FileProjection{Data: chain, Mode: mode}
	}
	return out
}

type unmounter struct {
	dir                string
	podUID             types.UID
	deleteTokens       func(types.UID)
	forgetCertificates func(types.UID)
}

func (u unmounter) GetPath() string { return u.dir }

// TearDown removes the directory and, as upstream, forgets the pod's
// tokens in the token manager's cache, and its keys and certificates in
// the pod certificate manager.
func (u unmounter) TearDown() error {
	if u.deleteTokens != nil {
		u.deleteTokens(u.podUID)
	}
	if u.forgetCertificates != nil {
		u.forgetCertificates(u.podUID)
	}
	return util.RemoveVolumeDir(u.dir)
}
