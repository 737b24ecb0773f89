package app

import (
	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/volume"
)

// ProbeVolumePlugins is upstream's (cmd/kubelet/app/plugins.go): the
// volume types this kubelet mounts, handed to it in
// Dependencies.VolumePlugins.
//
// TODO(merge): return the plugins' lists: emptydir, configmap, secret,
// projected, downwardapi and hostpath ProbeVolumePlugins(), appended.
func ProbeVolumePlugins() []volume.VolumePlugin {
	return nil
}

// volumeDependencies fills what MainOptions.Volumes needs in deps: the
// plugins and the managers they read through, each with the node's
// client (upstream builds the managers in NewMainKubelet).
//
// TODO(merge): deps.ConfigMapManager = configmap.NewWatchingConfigMapManager(deps.KubeClient, resync),
// deps.SecretManager = secret.NewWatchingSecretManager(deps.KubeClient, resync),
// deps.TokenManager = token.NewManager(deps.KubeClient, deps.Clock), with
// resync the KubeletConfiguration's syncFrequency.
func volumeDependencies(deps *kubelet.Dependencies) {
	if deps.VolumePlugins == nil {
		deps.VolumePlugins = ProbeVolumePlugins()
	}
}
