// Package volume is upstream's pkg/volume in small: the plugin interface a
// volume type implements (VolumePlugin, Mounter, Unmounter), what a plugin
// may ask the kubelet (VolumeHost), and the plugin manager that finds a
// pod's volume its plugin (VolumePluginMgr). The plugins are its
// subpackages (emptydir, configmap, secret, projected, downwardapi,
// hostpath); the volume manager (mylib/volumemanager) calls them.
//
// Where it departs from upstream, and why: attach, detach, devices and
// block volumes are left out (a node of this course is controller-managed,
// so the attach/detach controller would do that part, and it has no
// disks); a
// Mounter writes files into a directory under the kubelet's root
// directory and the runtime maps that directory into the container (no
// mount(2), no tmpfs: the runtime is a mock).
package volume

import (
	"context"
	"errors"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Spec is one volume of a pod, as the volume manager hands it to a plugin
// (upstream's volume.Spec, without persistent volumes: a PVC's volume is
// found by the populator and has no plugin here).
type Spec struct {
	Volume   *v1.Volume
	ReadOnly bool
}

// Name is the volume's name in the pod.
func (s *Spec) Name() string { return s.Volume.Name }

// VolumeHost is what a plugin may ask the kubelet (upstream's
// volume.VolumeHost, reduced to what these plugins use).
type VolumeHost interface {
	// GetPodVolumeDir is where the pod's volume of this plugin lives:
	// <root>/pods/<uid>/volumes/<plugin name escaped>/<volume name>.
	GetPodVolumeDir(podUID types.UID, pluginName, volumeName string) string
	// GetPodDir is <root>/pods/<uid>.
	GetPodDir(podUID types.UID) string
	// GetKubeClient has the node's credentials.
	GetKubeClient() kubernetes.Interface
	// GetConfigMapFunc and GetSecretFunc read through the kubelet's
	// watching managers: only objects a pod on this node references.
	GetConfigMapFunc() func(namespace, name string) (*v1.ConfigMap, error)
	GetSecretFunc() func(namespace, name string) (*v1.Secret, error)
	// GetServiceAccountTokenFunc asks the token manager for a token bound
	// to the pod (TokenRequest); it caches and refreshes.
	GetServiceAccountTokenFunc() func(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
	// GetTrustAnchorsByName and GetTrustAnchorsBySigner ask the
	// ClusterTrustBundle manager (mylib/clustertrustbundle) for PEM trust
	// anchors; allowMissing: none found is empty, not an error.
	GetTrustAnchorsByName(name string, allowMissing bool) ([]byte, error)
	GetTrustAnchorsBySigner(signerName string, labelSelector *metav1.LabelSelector, allowMissing bool) ([]byte, error)
	// GetPodCertificateCredentialBundle asks the pod certificate manager
	// (mylib/podcertificate) for the PEM private key and certificate
	// chain of the pod's volume's podCertificate source at sourceIndex;
	// an error until the signer issued it.
	GetPodCertificateCredentialBundle(ctx context.Context, pod *v1.Pod, volumeName string, sourceIndex int) (privKey, certChain []byte, err error)
	// GetNodeName is the Node's name.
	GetNodeName() types.NodeName
	// GetNodeAllocatable is what a downward API resourceFieldRef without a
	// limit reports.
	GetNodeAllocatable() (v1.ResourceList, error)
	// GetHostPathRoot is the directory a hostPath volume's path is mapped
	// under (never the real host's path: the course's sandbox).
	GetHostPathRoot() string
}

// MounterArgs are SetUp's arguments (upstream: FsGroup, DesiredSize, …).
type MounterArgs struct {
	FsGroup *int64
}

// Attributes say how a mounted volume is to be used.
type Attributes struct {
	// ReadOnly: the runtime mounts it read-only.
	ReadOnly bool
	// Managed: the kubelet rewrites its content (configMap, secret, …);
	// such a volume is remounted when its source changes.
	Managed bool
}

// Mounter sets up one volume of one pod.
type Mounter interface {
	// GetPath is the directory the container's mount points at.
	GetPath() string
	// SetUp creates or refreshes the volume's content. It is called again
	// for a volume that RequiresRemount, and must be idempotent.
	SetUp(args MounterArgs) error
	GetAttributes() Attributes
}

// Unmounter tears one volume of one pod down.
type Unmounter interface {
	GetPath() string
	// TearDown removes the volume's directory and everything in it.
	TearDown() error
}

// VolumePlugin is one volume type (upstream's volume.VolumePlugin).
type VolumePlugin interface {
	// Init is called once, before any other method.
	Init(host VolumeHost) error
	// GetPluginName is upstream's: "kubernetes.io/configmap", …
	GetPluginName() string
	// CanSupport tells whether the plugin serves this volume.
	CanSupport(spec *Spec) bool
	// RequiresRemount: the content follows its source (SetUp is called
	// again on every reconciler pass that the populator marks).
	RequiresRemount(spec *Spec) bool
	NewMounter(spec *Spec, pod *v1.Pod) (Mounter, error)
	NewUnmounter(volName string, podUID types.UID) (Unmounter, error)
}

// VolumePluginMgr finds the plugin of a volume.
type VolumePluginMgr struct {
	plugins map[string]VolumePlugin
	host    VolumeHost
}

// InitPlugins initialises every plugin with host.
func (pm *VolumePluginMgr) InitPlugins(plugins []VolumePlugin, host VolumeHost) error {
	pm.plugins, pm.host = map[string]VolumePlugin{}, host
	var errs []error
	for _, p := range plugins {
		name := p.GetPluginName()
		if _, dup := pm.plugins[name]; dup {
			errs = append(errs, fmt.Errorf("volume plugin %q registered more than once", name))
			continue
		}
		if err := p.Init(host); err != nil {
			errs = append(errs, fmt.Errorf("volume plugin %q: %w", name, err))
			continue
		}
		pm.plugins[name] = p
	}
	return errors.Join(errs...)
}

// ErrNoPlugin is wrapped by FindPluginBySpec's error when no plugin serves
// a volume (a persistentVolumeClaim, csi, nfs, …: this node has none).
var ErrNoPlugin = errors.New("no volume plugin matched")

// FindPluginBySpec is the one plugin that supports spec.
func (pm *VolumePluginMgr) FindPluginBySpec(spec *Spec) (VolumePlugin, error) {
	var found []VolumePlugin
	for _, p := range pm.plugins {
		if p.CanSupport(spec) {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("%w: volume %q is of a kind this node cannot mount (%s)", ErrNoPlugin, spec.Name(), SourceKind(spec.Volume))
	case 1:
		return found[0], nil
	}
	return nil, fmt.Errorf("multiple volume plugins matched volume %q", spec.Name())
}

// FindPluginByName is the plugin registered under name.
func (pm *VolumePluginMgr) FindPluginByName(name string) (VolumePlugin, error) {
	if p, ok := pm.plugins[name]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("%w name: %s", ErrNoPlugin, name)
}

// EscapePluginName is the plugin's name as a directory name:
// "kubernetes.io/configmap" is "kubernetes.io~configmap", as upstream's
// utilstrings.EscapeQualifiedName.
func EscapePluginName(name string) string { return strings.ReplaceAll(name, "/", "~") }

// UnescapePluginName undoes EscapePluginName.
func UnescapePluginName(dir string) string { return strings.ReplaceAll(dir, "~", "/") }

// SourceKind names the volume's source as the pod spec spells it:
// "persistentVolumeClaim", "nfs", "configMap", …; "unknown" if none is set.
func SourceKind(v *v1.Volume) string {
	s := v.VolumeSource
	kinds := []struct {
		set  bool
		name string
	}{
		{s.HostPath != nil, "hostPath"}, {s.EmptyDir != nil, "emptyDir"}, {s.Secret != nil, "secret"},
		{s.ConfigMap != nil, "configMap"}, {s.Projected != nil, "projected"}, {s.DownwardAPI != nil, "downwardAPI"},
		{s.PersistentVolumeClaim != nil, "persistentVolumeClaim"}, {s.CSI != nil, "csi"}, {s.Ephemeral != nil, "ephemeral"},
		{s.NFS != nil, "nfs"}, {s.ISCSI != nil, "iscsi"}, {s.FC != nil, "fc"}, {s.Image != nil, "image"},
		{s.GitRepo != nil, "gitRepo"}, {s.CephFS != nil, "cephfs"}, {s.RBD != nil, "rbd"},
		{s.AWSElasticBlockStore != nil, "awsElasticBlockStore"}, {s.GCEPersistentDisk != nil, "gcePersistentDisk"},
		{s.AzureDisk != nil, "azureDisk"}, {s.AzureFile != nil, "azureFile"},
	}
	for _, k := range kinds {
		if k.set {
			return k.name
		}
	}
	return "unknown"
}

// PodCertificateForgetter is what a VolumeHost may add to let the
// projected plugin drop a pod's keys and certificates from the pod
// certificate manager when its volume is torn down (upstream's kubelet
// calls the manager's ForgetPod when the pod goes). Optional.
type PodCertificateForgetter interface {
	ForgetPodCertificates(podUID types.UID)
}

// ServiceAccountTokenDeleter is what a VolumeHost may add to let the
// projected plugin drop a pod's cached tokens when its volume is torn
// down (upstream's VolumeHost.DeleteServiceAccountTokenFunc). Optional: a
// host without it leaves the cleanup to the token manager's expiry.
type ServiceAccountTokenDeleter interface {
	DeleteServiceAccountTokenFunc() func(podUID types.UID)
}
