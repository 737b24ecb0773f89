package kubelet

// Volumes, with PodsConfig.Volumes (upstream: pkg/kubelet/volume_host.go,
// kubelet_volumes.go, and the volume parts of kubelet.go's SyncPod and
// SyncTerminatedPod and kubelet_pods.go's HandlePodCleanups):
//
//   - the Kubelet is the plugins' VolumeHost (kubeletVolumeHost): the pod
//     directories under the root directory R, the node's client, the
//     ConfigMap, Secret, token and ClusterTrustBundle managers, the
//     node's allocatable;
//   - the volume manager (mylib/volumemanager) runs beside the sync loop;
//   - SyncPod makes the pod's directories (R/pods/<uid>, its volumes and
//     plugins directories), registers the pod with the ConfigMap and
//     Secret managers and waits for its volumes before any container
//     starts (WaitForAttachAndMount);
//   - SyncTerminatedPod waits until they are torn down (WaitForUnmount),
//     then unregisters the pod and forgets its tokens;
//   - housekeeping removes the directories of pods the kubelet no longer
//     knows, once none of their volumes is mounted (cleanupOrphanedPodDirs).
//
// Where it departs from upstream, and why (one line each):
//   - the pod's directories are 0755, not 0750: the sandbox's user (65534)
//     must traverse them;
//   - with the mock runtime a hostPath volume lives under R/host
//     (GetHostPathRoot), never on the node's own file system (the course's
//     sandbox); on a real runtime it is the node's path, as upstream's;
//   - the token manager forgets a pod's tokens in SyncTerminatedPod, once
//     its volumes are down (upstream's projected plugin does it on
//     TearDown through VolumeHost.DeleteServiceAccountTokenFunc);
//   - an orphaned pod directory is removed whole: its volumes are plain
//     directories, never mount points;
//   - GetNodeAllocatable reads the Node from the API server (upstream
//     reads its node informer's cache).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/events"
	"mykubelet/mylib/network/dns"
	"mykubelet/mylib/volume"
	"mykubelet/mylib/volumemanager"
)

// The directories under the root directory (upstream's config.Default*).
const (
	podsDirName        = "pods"
	podVolumesDirName  = "volumes"
	podPluginsDirName  = "plugins"
	hostPathRootDir    = "host"
	podDirsPermissions = 0o755
)

// ConfigMapManager is what the Kubelet asks of mylib/configmap's Manager:
// the ConfigMaps the node's pods reference, watched.
type ConfigMapManager interface {
	GetConfigMap(namespace, name string) (*v1.ConfigMap, error)
	RegisterPod(pod *v1.Pod)
	UnregisterPod(pod *v1.Pod)
}

// SecretManager is mylib/secret's Manager, as ConfigMapManager.
type SecretManager interface {
	GetSecret(namespace, name string) (*v1.Secret, error)
	RegisterPod(pod *v1.Pod)
	UnregisterPod(pod *v1.Pod)
}

// TokenManager is mylib/token's Manager: service-account tokens bound to
// pods (TokenRequest), cached and refreshed.
type TokenManager interface {
	GetServiceAccountToken(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
	DeleteServiceAccountToken(podUID types.UID)
}

// ClusterTrustBundleManager is mylib/clustertrustbundle's Manager: the
// trust anchors of ClusterTrustBundles, for projected volumes.
type ClusterTrustBundleManager interface {
	GetTrustAnchorsByName(name string, allowMissing bool) ([]byte, error)
	GetTrustAnchorsBySigner(signerName string, labelSelector *metav1.LabelSelector, allowMissing bool) ([]byte, error)
}

// PodCertificateManager is mylib/podcertificate's Manager: the keys and
// certificate chains of podCertificate projections.
type PodCertificateManager interface {
	ForgetPod(ctx context.Context, pod *v1.Pod)
	GetPodCertificateCredentialBundle(ctx context.Context, pod *v1.Pod, volumeName string, sourceIndex int) (privKey, certChain []byte, err error)
}

// volumes is the Kubelet's state for PodsConfig.Volumes; nil without.
type volumes struct {
	rootDirectory    string
	pluginMgr        *volume.VolumePluginMgr
	manager          *volumemanager.VolumeManager
	configMapManager ConfigMapManager // each may be nil: its volumes fail
	secretManager    SecretManager
	tokenManager     TokenManager
	trustBundles     ClusterTrustBundleManager
	podCertificates  PodCertificateManager
	// dns gives each sandbox its DNS configuration (GetPodDNS).
	dns           *dns.Configurer
	clusterDomain string
	// nodeHostsFile is PodsConfig.NodeHostsFile.
	nodeHostsFile string
	// hostPathRoot is PodsConfig.HostPathRoot, made absolute.
	hostPathRoot string
}

// newVolumes builds the plugin manager and the volume manager; called by
// newPodHalf once the pod workers exist.
func (kl *Kubelet) newVolumes(cfg PodsConfig) error {
	if cfg.RootDirectory == "" {
		return errors.New("kubelet: Config.Pods.RootDirectory is required with Volumes (the pods' directories go under it)")
	}
	root, err := filepath.Abs(cfg.RootDirectory)
	if err != nil {
		return fmt.Errorf("kubelet: root directory: %w", err)
	}
	hostPathRoot := filepath.Join(root, hostPathRootDir)
	if cfg.HostPathRoot != "" {
		if hostPathRoot, err = filepath.Abs(cfg.HostPathRoot); err != nil {
			return fmt.Errorf("kubelet: hostPath root: %w", err)
		}
	}
	kl.volumes = &volumes{rootDirectory: root, pluginMgr: &volume.VolumePluginMgr{},
		configMapManager: cfg.ConfigMapManager, secretManager: cfg.SecretManager, tokenManager: cfg.TokenManager,
		trustBundles: cfg.ClusterTrustBundleManager, podCertificates: cfg.PodCertificateManager, nodeHostsFile: cfg.NodeHostsFile, hostPathRoot: hostPathRoot}
	if err := kl.volumes.pluginMgr.InitPlugins(cfg.VolumePlugins, kubeletVolumeHost{kl}); err != nil {
		return fmt.Errorf("kubelet: volume plugins: %w", err)
	}
	states, ok := kl.podWorkers.(podRuntimeStates)
	if !ok {
		return errors.New("kubelet: Config.Pods.Volumes needs pod workers that say which pods have terminated")
	}
	m, err := volumemanager.NewVolumeManager(volumemanager.Config{KubeClient: kl.client, PodManager: kl.podManager,
		PodStateProvider: volumePodStates{kl.podWorkers, states, kl.wasRejected}, PluginMgr: kl.volumes.pluginMgr, Recorder: kl.recorder, Clock: kl.clock})
	if err != nil {
		return fmt.Errorf("kubelet: %w", err)
	}
	kl.volumes.manager = m
	resolver := cfg.ResolverConfig
	nodeRef := &v1.ObjectReference{Kind: "Node", Name: kl.nodeName, UID: types.UID(kl.nodeName)}
	kl.volumes.dns = dns.NewConfigurer(kl.recorder, nodeRef, cfg.ClusterDNS, cfg.ClusterDomain, resolver)
	kl.volumes.clusterDomain = cfg.ClusterDomain
	return nil
}

// mountedVolumes are the pod's mounted volumes as the container mounts
// need them (kubecontainer.VolumeMap, by volume name).
func (kl *Kubelet) mountedVolumes(pod *v1.Pod) kubecontainer.VolumeMap {
	vm := kubecontainer.VolumeMap{}
	for name, mv := range kl.volumes.manager.GetMountedVolumesForPod(pod.UID) {
		vm[name] = kubecontainer.VolumeInfo{Mounter: mv.Mounter, ReadOnly: mv.ReadOnly}
	}
	return vm
}

// podRuntimeStates is the pod workers' answer the volume manager needs
// besides PodWorkers' own.
type podRuntimeStates interface {
	ShouldPodRuntimeBeRemoved(uid types.UID) bool
}

// volumePodStates answers the volume manager from the pod workers: a pod
// whose termination was requested gets no new volumes, nor does a pod
// admission rejected (it has no worker, and will never run); a terminated
// one loses them.
type volumePodStates struct {
	workers  interface{ IsPodTerminationRequested(types.UID) bool }
	states   podRuntimeStates
	rejected func(types.UID) bool
}

func (s volumePodStates) ShouldPodContainersBeTerminating(uid types.UID) bool {
	return s.workers.IsPodTerminationRequested(uid) || (s.rejected != nil && s.rejected(uid))
}

func (s volumePodStates) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	return s.states.ShouldPodRuntimeBeRemoved(uid)
}

// getPodsDir is R/pods.
func (kl *Kubelet) getPodsDir() string { return filepath.Join(kl.volumes.rootDirectory, podsDirName) }

// getPodDir is R/pods/<uid>.
func (kl *Kubelet) getPodDir(uid types.UID) string {
	return filepath.Join(kl.getPodsDir(), string(uid))
}

// getPodVolumesDir is R/pods/<uid>/volumes.
func (kl *Kubelet) getPodVolumesDir(uid types.UID) string {
	return filepath.Join(kl.getPodDir(uid), podVolumesDirName)
}

// getPodPluginsDir is R/pods/<uid>/plugins.
func (kl *Kubelet) getPodPluginsDir(uid types.UID) string {
	return filepath.Join(kl.getPodDir(uid), podPluginsDirName)
}

// makePodDataDirs makes the pod's directories (upstream's, 0755 here).
func (kl *Kubelet) makePodDataDirs(pod *v1.Pod) error {
	if err := validPodUID(pod.UID); err != nil {
		return err
	}
	for _, dir := range []string{kl.getPodDir(pod.UID), kl.getPodVolumesDir(pod.UID), kl.getPodPluginsDir(pod.UID)} {
		if err := os.MkdirAll(dir, podDirsPermissions); err != nil {
			return err
		}
		if err := os.Chmod(dir, podDirsPermissions); err != nil { // whatever the umask
			return err
		}
	}
	return nil
}

// validPodUID: a UID names a directory under R/pods, so it must be one
// plain name (the API server's are UUIDs; a static pod's a hash).
func validPodUID(uid types.UID) error {
	s := string(uid)
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, `/\`) || filepath.Base(s) != s {
		return fmt.Errorf("pod UID %q cannot name a directory", uid)
	}
	return nil
}

// waitForVolumes is SyncPod's part: the pod's directories, its ConfigMaps
// and Secrets registered, then its volumes mounted. An error is upstream's
// FailedMount event, unless the wait was only cut short (a timeout, or the
// pod's termination): then the reconciler's events have said why.
func (kl *Kubelet) waitForVolumes(ctx context.Context, pod *v1.Pod) error {
	if kl.volumes == nil {
		return nil
	}
	if !kl.podWorkers.IsPodTerminationRequested(pod.UID) {
		if m := kl.volumes.secretManager; m != nil {
			m.RegisterPod(pod)
		}
		if m := kl.volumes.configMapManager; m != nil {
			m.RegisterPod(pod)
		}
	}
	if err := kl.makePodDataDirs(pod); err != nil {
		kl.recorder.Eventf(pod, v1.EventTypeWarning, events.FailedToMakePodDataDirectories, "error making pod data directories: %v", err)
		return fmt.Errorf("making pod data directories for pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	err := kl.volumes.manager.WaitForAttachAndMount(ctx, pod)
	if err == nil {
		return nil
	}
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) { // upstream's !wait.Interrupted(err)
		kl.recorder.Eventf(pod, v1.EventTypeWarning, events.FailedMountVolume, "Unable to attach or mount volumes: %v", err)
	}
	kl.printf("syncPod %s/%s: volumes not mounted: %v", pod.Namespace, pod.Name, err)
	return err
}

// releaseVolumes is SyncTerminatedPod's part: wait until the pod's
// volumes are torn down, then the managers forget the pod.
func (kl *Kubelet) releaseVolumes(ctx context.Context, pod *v1.Pod) error {
	if kl.volumes == nil {
		return nil
	}
	if err := kl.volumes.manager.WaitForUnmount(ctx, pod); err != nil {
		return err
	}
	if m := kl.volumes.secretManager; m != nil {
		m.UnregisterPod(pod)
	}
	if m := kl.volumes.configMapManager; m != nil {
		m.UnregisterPod(pod)
	}
	if m := kl.volumes.tokenManager; m != nil {
		m.DeleteServiceAccountToken(pod.UID)
	}
	return nil
}

// cleanupOrphanedPodDirs removes R/pods/<uid> for each pod that is neither
// in the pod manager (pods) nor running (runningPods), once the volume
// manager has none of its volumes mounted or in operation (upstream's
// cleanupOrphanedPodDirs, in HandlePodCleanups).
func (kl *Kubelet) cleanupOrphanedPodDirs(pods []*v1.Pod, runningPods []types.UID) error {
	if kl.volumes == nil {
		return nil
	}
	keep := map[string]bool{}
	for _, p := range pods {
		keep[string(p.UID)] = true
	}
	for _, uid := range runningPods {
		keep[string(uid)] = true
	}
	entries, err := os.ReadDir(kl.getPodsDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		uid := types.UID(e.Name())
		if !e.IsDir() || keep[e.Name()] {
			continue
		}
		if kl.volumes.manager.HasPossiblyMountedVolumesForPod(uid) {
			klog.V(3).InfoS("Orphaned pod found, but volumes are not cleaned up", "podUID", uid)
			continue
		}
		if err := os.RemoveAll(kl.getPodDir(uid)); err != nil {
			errs = append(errs, fmt.Errorf("orphaned pod %q found, but error occurred when trying to remove the pod directory: %w", uid, err))
			continue
		}
		kl.printf("housekeeping: removed the directory of orphaned pod %s", uid)
	}
	return errors.Join(errs...)
}

// kubeletVolumeHost is the Kubelet as the plugins' VolumeHost.
type kubeletVolumeHost struct{ kl *Kubelet }

var _ volume.VolumeHost = kubeletVolumeHost{}

func (h kubeletVolumeHost) GetPodVolumeDir(podUID types.UID, pluginName, volumeName string) string {
	return filepath.Join(h.kl.getPodVolumesDir(podUID), volume.EscapePluginName(pluginName), volumeName)
}

func (h kubeletVolumeHost) GetPodDir(podUID types.UID) string { return h.kl.getPodDir(podUID) }

func (h kubeletVolumeHost) GetKubeClient() kubernetes.Interface { return h.kl.client }

func (h kubeletVolumeHost) GetConfigMapFunc() func(namespace, name string) (*v1.ConfigMap, error) {
	if m := h.kl.volumes.configMapManager; m != nil {
		return m.GetConfigMap
	}
	return func(namespace, name string) (*v1.ConfigMap, error) {
		return nil, fmt.Errorf("configmap %s/%s: this kubelet has no ConfigMap manager", namespace, name)
	}
}

func (h kubeletVolumeHost) GetSecretFunc() func(namespace, name string) (*v1.Secret, error) {
	if m := h.kl.volumes.secretManager; m != nil {
		return m.GetSecret
	}
	return func(namespace, name string) (*v1.Secret, error) {
		return nil, fmt.Errorf("secret %s/%s: this kubelet has no Secret manager", namespace, name)
	}
}

func (h kubeletVolumeHost) GetServiceAccountTokenFunc() func(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	if m := h.kl.volumes.tokenManager; m != nil {
		return m.GetServiceAccountToken
	}
	return func(namespace, name string, _ *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
		return nil, fmt.Errorf("token for service account %s/%s: this kubelet has no token manager", namespace, name)
	}
}

func (h kubeletVolumeHost) GetTrustAnchorsByName(name string, allowMissing bool) ([]byte, error) {
	if m := h.kl.volumes.trustBundles; m != nil {
		return m.GetTrustAnchorsByName(name, allowMissing)
	}
	return nil, fmt.Errorf("ClusterTrustBundle %q: this kubelet has no ClusterTrustBundle manager", name)
}

func (h kubeletVolumeHost) GetTrustAnchorsBySigner(signerName string, labelSelector *metav1.LabelSelector, allowMissing bool) ([]byte, error) {
	if m := h.kl.volumes.trustBundles; m != nil {
		return m.GetTrustAnchorsBySigner(signerName, labelSelector, allowMissing)
	}
	return nil, fmt.Errorf("ClusterTrustBundles of signer %q: this kubelet has no ClusterTrustBundle manager", signerName)
}

func (h kubeletVolumeHost) GetPodCertificateCredentialBundle(ctx context.Context, pod *v1.Pod, volumeName string, sourceIndex int) ([]byte, []byte, error) {
	if m := h.kl.volumes.podCertificates; m != nil {
		return m.GetPodCertificateCredentialBundle(ctx, pod, volumeName, sourceIndex)
	}
	return nil, nil, fmt.Errorf("podCertificate source of volume %q: this kubelet has no pod certificate manager", volumeName)
}

// ForgetPodCertificates drops the pod's keys and certificates when its
// projected volume is torn down.
func (h kubeletVolumeHost) ForgetPodCertificates(podUID types.UID) {
	if m := h.kl.volumes.podCertificates; m != nil {
		m.ForgetPod(context.Background(), &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: podUID}})
	}
}

func (h kubeletVolumeHost) GetNodeName() types.NodeName { return types.NodeName(h.kl.nodeName) }

// GetNodeAllocatable is the Node's status.allocatable.
func (h kubeletVolumeHost) GetNodeAllocatable() (v1.ResourceList, error) {
	ctx, cancel := context.WithTimeout(context.Background(), runtimeStatusTimeout)
	defer cancel()
	node, err := h.kl.client.CoreV1().Nodes().Get(ctx, h.kl.nodeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", h.kl.nodeName, err)
	}
	return node.Status.Allocatable, nil
}

// GetHostPathRoot is PodsConfig.HostPathRoot: R/host by default, "/" on
// a real runtime.
func (h kubeletVolumeHost) GetHostPathRoot() string {
	return h.kl.volumes.hostPathRoot
}

// cleanupPodDirs is housekeeping's part for the pods' directories: the
// runtime's running pods count as known (a pod still stopping keeps its
// directory; one whose containers have all exited does not, as
// upstream's cleanupOrphanedPodDirs, which lists only running pods); if
// they cannot be listed, nothing is removed this time.
func (kl *Kubelet) cleanupPodDirs(ctx context.Context, pods []*v1.Pod) {
	if kl.volumes == nil {
		return
	}
	running, err := kl.containerRuntime.GetPods(ctx, false)
	if err != nil {
		klog.ErrorS(err, "Listing the runtime's pods to clean up pod directories failed; will retry")
		return
	}
	uids := make([]types.UID, 0, len(running))
	for _, rp := range running {
		uids = append(uids, rp.ID)
	}
	if err := kl.cleanupOrphanedPodDirs(pods, uids); err != nil {
		klog.ErrorS(err, "Failed cleaning up orphaned pod directories")
	}
}

// ListVolumesForPod is a pod's mounted volumes, name to directory on the
// node (upstream's, for the stats provider); empty without volumes.
func (kl *Kubelet) ListVolumesForPod(uid types.UID) map[string]string {
	out := map[string]string{}
	if kl.volumes == nil {
		return out
	}
	for name, mv := range kl.volumes.manager.GetMountedVolumesForPod(uid) {
		if p := mv.Mounter.GetPath(); p != "" { // an image volume has no directory
			out[name] = p
		}
	}
	return out
}
