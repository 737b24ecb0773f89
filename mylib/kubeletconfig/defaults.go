package kubeletconfig

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"mykubelet/mylib/logs"
)

// Upstream's defaults (pkg/kubelet/apis/config/v1beta1/defaults.go, v1.37)
// for the supported fields.
const (
	DefaultAddress                   = "0.0.0.0"
	DefaultPort                      = 10250
	DefaultSyncFrequency             = time.Minute
	DefaultFileCheckFrequency        = 20 * time.Second
	DefaultNodeStatusUpdateFrequency = 10 * time.Second
	DefaultNodeStatusReportFrequency = 5 * time.Minute
	DefaultNodeLeaseDurationSeconds  = 40
	DefaultKubeAPIQPS                = 50
	DefaultKubeAPIBurst              = 100
	DefaultEventRecordQPS            = 50
	DefaultEventBurst                = 100
	DefaultMaxPods                   = 110
	DefaultNodeStatusMaxImages       = 50 // -1: no cap
	DefaultContainerRuntimeEndpoint  = "unix:///run/containerd/containerd.sock"
	DefaultAuthenticationCacheTTL    = 2 * time.Minute
	DefaultAuthorizedCacheTTL        = 5 * time.Minute
	DefaultUnauthorizedCacheTTL      = 30 * time.Second
	// Log rotation: mylib/logs's defaults, upstream's.
	DefaultContainerLogMaxSize         = logs.DefaultContainerLogMaxSize
	DefaultContainerLogMaxFiles        = logs.DefaultContainerLogMaxFiles
	DefaultContainerLogMaxWorkers      = logs.DefaultContainerLogMaxWorkers
	DefaultContainerLogMonitorInterval = logs.DefaultContainerLogMonitorInterval

	// Node pressure (the eviction manager, the image GC manager, the
	// image pulls). evictionMaxPodGracePeriod and imageMaximumGCAge
	// default to 0: a pod evicted on a soft threshold gets no grace
	// period, and no image is collected by age alone.
	DefaultEvictionPressureTransitionPeriod = 5 * time.Minute
	DefaultImageGCHighThresholdPercent      = 85
	DefaultImageGCLowThresholdPercent       = 80
	DefaultImageMinimumGCAge                = 2 * time.Minute
	DefaultRegistryPullQPS                  = 5
	DefaultRegistryBurst                    = 10

	// The container manager: cgroups per QoS class with the cgroupfs
	// driver, under cgroupRoot "" (the root); enforceNodeAllocatable
	// defaults to [pods] (DefaultNodeAllocatableEnforcement).
	DefaultCgroupsPerQOS = true
	DefaultCgroupDriver  = "cgroupfs"
)

// DefaultNodeAllocatableEnforcement is upstream's enforceNodeAllocatable
// default: kubepods is limited to node allocatable.
func DefaultNodeAllocatableEnforcement() []string { return []string{"pods"} }

// DefaultEvictionHard is upstream's evictionHard on Linux
// (pkg/kubelet/eviction/defaults_linux.go, v1.37), applied when the
// configuration sets none; a new map at each call, so a caller may change
// it. As upstream, an evictionHard that is set replaces it whole: the
// signals it leaves out have no hard threshold.
func DefaultEvictionHard() map[string]string {
	return map[string]string{
		"memory.available":   "100Mi",
		"nodefs.available":   "10%",
		"nodefs.inodesFree":  "5%",
		"imagefs.available":  "15%",
		"imagefs.inodesFree": "5%",
	}
}

// SetDefaults fills in what kc leaves unset, as upstream's
// SetDefaults_KubeletConfiguration does for these fields. As there,
// nodeStatusReportFrequency follows nodeStatusUpdateFrequency when only
// that is set.
func SetDefaults(kc *kubeletv1beta1.KubeletConfiguration) {
	def := func(d *metav1.Duration, v time.Duration) {
		if d.Duration == 0 {
			d.Duration = v
		}
	}
	if kc.Kind == "" {
		kc.Kind, kc.APIVersion = Kind, APIVersion
	}
	if kc.Address == "" {
		kc.Address = DefaultAddress
	}
	if kc.Port == 0 {
		kc.Port = DefaultPort
	}
	def(&kc.SyncFrequency, DefaultSyncFrequency)
	def(&kc.FileCheckFrequency, DefaultFileCheckFrequency)
	if kc.NodeStatusReportFrequency.Duration == 0 {
		kc.NodeStatusReportFrequency.Duration = DefaultNodeStatusReportFrequency
		if kc.NodeStatusUpdateFrequency.Duration != 0 {
			kc.NodeStatusReportFrequency = kc.NodeStatusUpdateFrequency
		}
	}
	def(&kc.NodeStatusUpdateFrequency, DefaultNodeStatusUpdateFrequency)
	if kc.NodeLeaseDurationSeconds == 0 {
		kc.NodeLeaseDurationSeconds = DefaultNodeLeaseDurationSeconds
	}
	if kc.KubeAPIQPS == nil {
		kc.KubeAPIQPS = ptr.To[int32](DefaultKubeAPIQPS)
	}
	if kc.KubeAPIBurst == 0 {
		kc.KubeAPIBurst = DefaultKubeAPIBurst
	}
	if kc.EventRecordQPS == nil {
		kc.EventRecordQPS = ptr.To[int32](DefaultEventRecordQPS)
	}
	if kc.EventBurst == 0 {
		kc.EventBurst = DefaultEventBurst
	}
	if kc.MaxPods == 0 {
		kc.MaxPods = DefaultMaxPods
	}
	if kc.NodeStatusMaxImages == nil {
		kc.NodeStatusMaxImages = ptr.To[int32](DefaultNodeStatusMaxImages)
	}
	if kc.ContainerRuntimeEndpoint == "" {
		kc.ContainerRuntimeEndpoint = DefaultContainerRuntimeEndpoint
	}
	if kc.Authentication.Anonymous.Enabled == nil {
		kc.Authentication.Anonymous.Enabled = ptr.To(false)
	}
	if kc.Authentication.Webhook.Enabled == nil {
		kc.Authentication.Webhook.Enabled = ptr.To(true)
	}
	def(&kc.Authentication.Webhook.CacheTTL, DefaultAuthenticationCacheTTL)
	if kc.Authorization.Mode == "" {
		kc.Authorization.Mode = kubeletv1beta1.KubeletAuthorizationModeWebhook
	}
	def(&kc.Authorization.Webhook.CacheAuthorizedTTL, DefaultAuthorizedCacheTTL)
	def(&kc.Authorization.Webhook.CacheUnauthorizedTTL, DefaultUnauthorizedCacheTTL)
	if kc.ContainerLogMaxSize == "" {
		kc.ContainerLogMaxSize = DefaultContainerLogMaxSize
	}
	if kc.ContainerLogMaxFiles == nil {
		kc.ContainerLogMaxFiles = ptr.To[int32](DefaultContainerLogMaxFiles)
	}
	if kc.ContainerLogMaxWorkers == nil {
		kc.ContainerLogMaxWorkers = ptr.To[int32](DefaultContainerLogMaxWorkers)
	}
	if kc.ContainerLogMonitorInterval == nil {
		kc.ContainerLogMonitorInterval = &metav1.Duration{Duration: DefaultContainerLogMonitorInterval}
	}
	if kc.CgroupsPerQOS == nil {
		kc.CgroupsPerQOS = ptr.To(DefaultCgroupsPerQOS)
	}
	if kc.CgroupDriver == "" {
		kc.CgroupDriver = DefaultCgroupDriver
	}
	if kc.EnforceNodeAllocatable == nil {
		kc.EnforceNodeAllocatable = DefaultNodeAllocatableEnforcement()
	}
	SetNodePressureDefaults(kc)
}

// SetNodePressureDefaults fills in the eviction, image GC and image pull
// fields kc leaves unset, as upstream: evictionHard (DefaultEvictionHard;
// upstream sets it when it loads the file, in cmd/kubelet/app), the
// transition period, the GC thresholds and minimum age, the registry's
// rate; serializeImagePulls is true unless maxParallelImagePulls asks for
// 2 or more pulls at once. SetDefaults calls it; a program that completes
// a configuration of its own (app.NodePressureFlags) calls it alone.
func SetNodePressureDefaults(kc *kubeletv1beta1.KubeletConfiguration) {
	if kc.EvictionHard == nil {
		kc.EvictionHard = DefaultEvictionHard()
	}
	if kc.EvictionPressureTransitionPeriod.Duration == 0 {
		kc.EvictionPressureTransitionPeriod.Duration = DefaultEvictionPressureTransitionPeriod
	}
	if kc.ImageMinimumGCAge.Duration == 0 {
		kc.ImageMinimumGCAge.Duration = DefaultImageMinimumGCAge
	}
	if kc.ImageGCHighThresholdPercent == nil {
		kc.ImageGCHighThresholdPercent = ptr.To[int32](DefaultImageGCHighThresholdPercent)
	}
	if kc.ImageGCLowThresholdPercent == nil {
		kc.ImageGCLowThresholdPercent = ptr.To[int32](DefaultImageGCLowThresholdPercent)
	}
	if kc.SerializeImagePulls == nil {
		kc.SerializeImagePulls = ptr.To(kc.MaxParallelImagePulls == nil || *kc.MaxParallelImagePulls < 2)
	}
	if kc.RegistryPullQPS == nil {
		kc.RegistryPullQPS = ptr.To[int32](DefaultRegistryPullQPS)
	}
	if kc.RegistryBurst == 0 {
		kc.RegistryBurst = DefaultRegistryBurst
	}
}
