// Package testing is a fake volume.VolumeHost for the plugins' tests, as
// upstream's pkg/volume/testing (much smaller: maps instead of informers).
//
// Where it departs from upstream, and why: the ConfigMaps, Secrets and
// tokens live in maps the test fills (the ClusterTrustBundles in the
// manager it gives); there is no fake mounter, since the
// plugins here never call mount(2).
package testing

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"mykubelet/mylib/clustertrustbundle"
	"mykubelet/mylib/podcertificate"
	"mykubelet/mylib/volume"
)

// FakeVolumeHost lays pods out under Root as the kubelet does
// (Root/pods/<uid>/volumes/<escaped plugin>/<volume>) and serves objects
// from its maps. Safe for concurrent use.
type FakeVolumeHost struct {
	Root   string
	Client kubernetes.Interface
	Node   types.NodeName
	// Allocatable is GetNodeAllocatable's answer.
	Allocatable v1.ResourceList
	// HostPathRoot is GetHostPathRoot's answer ("": Root/host).
	HostPathRoot string
	// TrustBundles answers GetTrustAnchorsByName and
	// GetTrustAnchorsBySigner (e.g. clustertrustbundle.NewInformerManager
	// over a fake clientset); nil: they fail.
	TrustBundles clustertrustbundle.Manager
	// PodCertificates answers GetPodCertificateCredentialBundle; nil: it
	// fails.
	PodCertificates podcertificate.Manager

	mu         sync.Mutex
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
	// TokenRequests records every TokenRequest the plugins asked for.
	tokenRequests []*authenticationv1.TokenRequest
	// Token is the token GetServiceAccountTokenFunc returns.
	token         string
	deletedTokens []types.UID
}

var _ volume.ServiceAccountTokenDeleter = (*FakeVolumeHost)(nil)
var _ volume.PodCertificateForgetter = (*FakeVolumeHost)(nil)

var _ volume.VolumeHost = (*FakeVolumeHost)(nil)

// NewFakeVolumeHost returns a host rooted at root (a t.TempDir()).
func NewFakeVolumeHost(root string) *FakeVolumeHost {
	return &FakeVolumeHost{Root: root, Node: "node-1", configMaps: map[string]*v1.ConfigMap{}, secrets: map[string]*v1.Secret{}, token: "fake-token"}
}

// SetConfigMap adds or replaces a ConfigMap.
func (h *FakeVolumeHost) SetConfigMap(cm *v1.ConfigMap) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.configMaps[cm.Namespace+"/"+cm.Name] = cm.DeepCopy()
}

// SetSecret adds or replaces a Secret.
func (h *FakeVolumeHost) SetSecret(s *v1.Secret) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.secrets[s.Namespace+"/"+s.Name] = s.DeepCopy()
}

// SetToken sets the token the next TokenRequests return.
func (h *FakeVolumeHost) SetToken(tok string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.token = tok
}

// TokenRequests returns copies of the TokenRequests asked so far, with
// the service account's namespace and name in their ObjectMeta.
func (h *FakeVolumeHost) TokenRequests() []*authenticationv1.TokenRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*authenticationv1.TokenRequest, len(h.tokenRequests))
	for i, tr := range h.tokenRequests {
		out[i] = tr.DeepCopy()
	}
	return out
}

func (h *FakeVolumeHost) GetPodDir(podUID types.UID) string {
	return filepath.Join(h.Root, "pods", string(podUID))
}

func (h *FakeVolumeHost) GetPodVolumeDir(podUID types.UID, pluginName, volumeName string) string {
	return filepath.Join(h.GetPodDir(podUID), "volumes", volume.EscapePluginName(pluginName), volumeName)
}

func (h *FakeVolumeHost) GetKubeClient() kubernetes.Interface { return h.Client }

func (h *FakeVolumeHost) GetConfigMapFunc() func(namespace, name string) (*v1.ConfigMap, error) {
	return func(namespace, name string) (*v1.ConfigMap, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if cm, ok := h.configMaps[namespace+"/"+name]; ok {
			return cm.DeepCopy(), nil
		}
		return nil, apierrors.NewNotFound(v1.Resource("configmap"), name)
	}
}

func (h *FakeVolumeHost) GetSecretFunc() func(namespace, name string) (*v1.Secret, error) {
	return func(namespace, name string) (*v1.Secret, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if s, ok := h.secrets[namespace+"/"+name]; ok {
			return s.DeepCopy(), nil
		}
		return nil, apierrors.NewNotFound(v1.Resource("secret"), name)
	}
}

func (h *FakeVolumeHost) GetServiceAccountTokenFunc() func(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return func(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
		if name == "" {
			return nil, fmt.Errorf("no service account name")
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		rec := tr.DeepCopy()
		rec.Namespace, rec.Name = namespace, name
		h.tokenRequests = append(h.tokenRequests, rec)
		out := tr.DeepCopy()
		out.Status.Token = h.token
		return out, nil
	}
}

func (h *FakeVolumeHost) GetNodeName() types.NodeName { return h.Node }

func (h *FakeVolumeHost) GetNodeAllocatable() (v1.ResourceList, error) {
	return h.Allocatable, nil
}

// GetHostPathRoot is HostPathRoot, or Root/host (the mock runtime's).
func (h *FakeVolumeHost) GetHostPathRoot() string {
	if h.HostPathRoot != "" {
		return h.HostPathRoot
	}
	return filepath.Join(h.Root, "host")
}

func (h *FakeVolumeHost) GetTrustAnchorsByName(name string, allowMissing bool) ([]byte, error) {
	if h.TrustBundles == nil {
		return nil, fmt.Errorf("ClusterTrustBundle %q: this host has no manager", name)
	}
	return h.TrustBundles.GetTrustAnchorsByName(name, allowMissing)
}

func (h *FakeVolumeHost) GetTrustAnchorsBySigner(signerName string, labelSelector *metav1.LabelSelector, allowMissing bool) ([]byte, error) {
	if h.TrustBundles == nil {
		return nil, fmt.Errorf("ClusterTrustBundles of signer %q: this host has no manager", signerName)
	}
	return h.TrustBundles.GetTrustAnchorsBySigner(signerName, labelSelector, allowMissing)
}

func (h *FakeVolumeHost) GetPodCertificateCredentialBundle(ctx context.Context, pod *v1.Pod, volumeName string, sourceIndex int) ([]byte, []byte, error) {
	if h.PodCertificates == nil {
		return nil, nil, fmt.Errorf("podCertificate source of volume %q: this host has no manager", volumeName)
	}
	return h.PodCertificates.GetPodCertificateCredentialBundle(ctx, pod, volumeName, sourceIndex)
}

// ForgetPodCertificates calls PodCertificates' ForgetPod.
func (h *FakeVolumeHost) ForgetPodCertificates(podUID types.UID) {
	if h.PodCertificates != nil {
		h.PodCertificates.ForgetPod(context.Background(), &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: podUID}})
	}
}

// DeleteServiceAccountTokenFunc records the pods whose tokens were dropped.
func (h *FakeVolumeHost) DeleteServiceAccountTokenFunc() func(podUID types.UID) {
	return func(podUID types.UID) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.deletedTokens = append(h.deletedTokens, podUID)
	}
}

// DeletedTokens lists the pods DeleteServiceAccountTokenFunc was called for.
func (h *FakeVolumeHost) DeletedTokens() []types.UID {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]types.UID(nil), h.deletedTokens...)
}
