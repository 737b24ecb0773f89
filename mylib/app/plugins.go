package app

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"mykubelet/mylib/clustertrustbundle"
	"mykubelet/mylib/configmap"
	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/podcertificate"
	"mykubelet/mylib/secret"
	"mykubelet/mylib/token"
	"mykubelet/mylib/volume"
	configmapvolume "mykubelet/mylib/volume/configmap"
	"mykubelet/mylib/volume/downwardapi"
	"mykubelet/mylib/volume/emptydir"
	"mykubelet/mylib/volume/hostpath"
	"mykubelet/mylib/volume/image"
	"mykubelet/mylib/volume/projected"
	secretvolume "mykubelet/mylib/volume/secret"
)

// ProbeVolumePlugins is upstream's (cmd/kubelet/app/plugins.go): the
// volume types this kubelet mounts (an image volume's files are the
// runtime's to mount: mylib/volume/image), handed to it in
// Dependencies.VolumePlugins. Any other kind (persistentVolumeClaim, csi,
// nfs, …) finds no plugin: its pod gets a FailedMount event. An emptyDir
// of medium Memory is on disk (the mock runtime's); see
// ProbeVolumePluginsForRuntime.
func ProbeVolumePlugins() []volume.VolumePlugin { return ProbeVolumePluginsForRuntime(false) }

// ProbeVolumePluginsForRuntime is ProbeVolumePlugins for a real runtime
// (realRuntime: containerd), where an emptyDir of medium Memory is a
// tmpfs, as upstream's (the kubelet runs as root there).
func ProbeVolumePluginsForRuntime(realRuntime bool) []volume.VolumePlugin {
	var all []volume.VolumePlugin
	emptyDir := func() []volume.VolumePlugin {
		return emptydir.ProbeVolumePluginsWith(emptydir.Options{Tmpfs: realRuntime})
	}
	for _, probe := range []func() []volume.VolumePlugin{emptyDir, configmapvolume.ProbeVolumePlugins,
		secretvolume.ProbeVolumePlugins, projected.ProbeVolumePlugins, downwardapi.ProbeVolumePlugins, hostpath.ProbeVolumePlugins,
		image.ProbeVolumePlugins} {
		all = append(all, probe()...)
	}
	return all
}

// volumeDependencies fills what MainOptions.Volumes needs in deps: the
// plugins and the managers they read through, each with the node's
// client (upstream builds the managers in NewMainKubelet). The ConfigMap
// and Secret managers watch each object a pod references (upstream's
// default configMapAndSecretChangeDetectionStrategy, Watch); resync is
// the KubeletConfiguration's syncFrequency; the ClusterTrustBundle
// manager watches them all, from the first pod that asks; the pod
// certificate manager files nodeName's PodCertificateRequests and
// watches them, from the first pod that asks. realRuntime:
// the plugins are ProbeVolumePluginsForRuntime's for a real runtime.
func volumeDependencies(deps *kubelet.Dependencies, nodeName string, resync time.Duration, realRuntime bool) {
	if deps.VolumePlugins == nil {
		deps.VolumePlugins = ProbeVolumePluginsForRuntime(realRuntime)
	}
	if deps.ConfigMapManager == nil {
		deps.ConfigMapManager = configmap.NewWatchingConfigMapManager(deps.KubeClient, resync)
	}
	if deps.SecretManager == nil {
		deps.SecretManager = secret.NewWatchingSecretManager(deps.KubeClient, resync)
	}
	if deps.TokenManager == nil {
		client := deps.TokenClient // a budget of its own (kubelet.NewTokenClient), else upstream's KubeClient
		if client == nil {
			client = deps.KubeClient
		}
		deps.TokenManager = token.NewManager(client, deps.Clock)
	}
	if deps.ClusterTrustBundleManager == nil {
		// The informer, once a pod asks, lives as long as the process
		// (upstream's runs under the kubelet's own context).
		deps.ClusterTrustBundleManager = clustertrustbundle.NewInformerManager(context.Background(), deps.KubeClient)
	}
	if deps.PodCertificateManager == nil {
		clk := deps.Clock
		if clk == nil {
			clk = clock.RealClock{}
		}
		deps.PodCertificateManager = podcertificate.NewIssuingManager(context.Background(), deps.KubeClient, types.NodeName(nodeName), clk)
	}
}
