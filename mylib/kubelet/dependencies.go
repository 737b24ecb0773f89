package kubelet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/cadvisor"
	"mykubelet/mylib/cm"
	"mykubelet/mylib/config"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/logs"
	"mykubelet/mylib/metrics"
	"mykubelet/mylib/network/dns"
	kubepod "mykubelet/mylib/pod"
	"mykubelet/mylib/prober"
	"mykubelet/mylib/volume"
)

// Dependencies is upstream's kubelet.Dependencies: what the kubelet is
// handed rather than builds, filled in by the program that starts it
// (upstream: cmd/kubelet/app's run and RunKubelet; here mylib/app).
type Dependencies struct {
	// KubeClient talks to the API server with the node's credentials, at
	// kubeAPIQPS/kubeAPIBurst (NewClientsWithRates). Required.
	KubeClient kubernetes.Interface
	// EventClient is the events' client, at eventRecordQPS/eventBurst; the
	// program builds Recorder with it.
	EventClient kubernetes.Interface
	// TokenClient sends the token manager's TokenRequests (one per pod
	// with a service account token volume); nil means KubeClient, as
	// upstream. NewTokenClient gives them a rate limiter of their own.
	TokenClient kubernetes.Interface
	// HeartbeatClient renews the Lease and writes the node status; nil
	// means KubeClient. OnHeartbeatFailure: see NodeConfig.
	HeartbeatClient    kubernetes.Interface
	OnHeartbeatFailure func()
	// Recorder records the events on pods (events.NewRecorder); nil drops them.
	Recorder record.EventRecorder
	// PodConfig is the merged pod sources (MakePodSourceConfig). Required.
	PodConfig *config.PodConfig
	// RemoteRuntimeService and RemoteImageService are the CRI clients
	// (kuberuntime.Connect's RuntimeService and ImageService); from them
	// NewMainKubelet builds the runtime manager the PLEG relists and
	// SyncPod drives, as upstream. Required.
	RemoteRuntimeService runtimeapi.RuntimeServiceClient
	RemoteImageService   runtimeapi.ImageServiceClient
	// ProbeDial opens the probes' connections (prober.GuardedDialer); nil:
	// a plain net.Dialer.
	ProbeDial prober.DialFunc
	// Clock: nil is the real clock.
	Clock clock.WithTicker
	// VolumePlugins, ConfigMapManager, SecretManager, TokenManager,
	// ClusterTrustBundleManager and PodCertificateManager: see PodsConfig (used with
	// MainOptions.Volumes; upstream's Dependencies.VolumePlugins, and the
	// managers NewMainKubelet builds).
	VolumePlugins             []volume.VolumePlugin
	ConfigMapManager          ConfigMapManager
	SecretManager             SecretManager
	TokenManager              TokenManager
	ClusterTrustBundleManager ClusterTrustBundleManager
	PodCertificateManager     PodCertificateManager
	// Metrics records the kubelet's series (PodsConfig.Metrics); nil:
	// none are recorded.
	Metrics *metrics.Metrics
	// ContainerManager makes the node's and the pods' cgroups
	// (cm.NewForNode; PodsConfig.ContainerManager); nil: none.
	ContainerManager cm.ContainerManager
	// StatsProvider is the node's and pods' figures (stats.Provider): the
	// eviction manager's and the image GC manager's input. Required with
	// MainOptions.Eviction.
	StatsProvider StatsProvider
	// Out receives the pod half's lines (PodsConfig.Out); nil: none.
	Out io.Writer
	// OnRegistered and OnStatusPatched: see NodeConfig.
	OnRegistered    func(node *v1.Node, created bool)
	OnStatusPatched func(node *v1.Node, patch []byte, reason string)

	// What the kubelet API server needs (upstream: Auth and TLSOptions,
	// built from these). The Kubelet does not read them.
	ClientCA   []byte      // the PEM bundle client certificates are checked against
	TLSOptions *tls.Config // nil: the server asks once for a certificate
}

// MainOptions are NewMainKubelet's other parameters: upstream's node name,
// node IP and root directory, and which parts of the kubelet the program
// turns on (upstream has them all; a chapter of this course adds its own).
type MainOptions struct {
	// NodeName is the Node's name. Required.
	NodeName string
	// NodeIP is the InternalIP; nil means the address of the interface with
	// the default route.
	NodeIP net.IP
	// RootDirectory is the kubelet's --root-dir: its filesystem is the
	// node's ephemeral-storage capacity. Required.
	RootDirectory string
	// Annotations: see NodeConfig (the course's chapter annotation).
	Annotations map[string]string
	// RelistPeriod and HousekeepingPeriod: see PodsConfig (zero: upstream's).
	RelistPeriod, HousekeepingPeriod time.Duration

	// RunContainers, ActiveDeadline, Probes and Admit: see PodsConfig.
	RunContainers, ActiveDeadline, Probes, Admit bool
	// ContainerGC: see PodsConfig (upstream's minimumGCAge,
	// maxPerPodContainerCount and maxContainerCount); nil: no collection.
	ContainerGC *kuberuntime.GCPolicy
	// ContainerLogRotation rotates the containers' logs by the
	// KubeletConfiguration's containerLog* fields (PodsConfig.ContainerLogs).
	ContainerLogRotation bool
	// Volumes mounts the pods' volumes under RootDirectory/pods
	// (PodsConfig.Volumes, with Dependencies.VolumePlugins and managers).
	Volumes bool
	// NodeHostsFile: see PodsConfig ("": a hostNetwork pod gets no
	// /etc/hosts from the kubelet).
	NodeHostsFile string
	// HostPathRoot: see PodsConfig ("": RootDirectory/host).
	HostPathRoot string
	// Eviction runs the eviction manager and the image GC manager over
	// Dependencies.StatsProvider (PodsConfig.Eviction, from the
	// KubeletConfiguration's eviction* and image* fields): the node's
	// pressure conditions follow it, and it refuses pods under pressure.
	Eviction bool
	// ImageGCPeriod is how often unused images are collected; zero is
	// images.ImageGCPeriod (the course's knob: upstream's is a constant).
	ImageGCPeriod time.Duration
	// MockMachine: the mock machine's size (cadvisor.MockMachine); the
	// node status's capacity follows it.
	MockMachine cadvisor.MockMachine
	// StatusWriters and CreatingStatusDelay: see PodsConfig (zero:
	// upstream's one loop, every status written at once).
	StatusWriters       int
	CreatingStatusDelay time.Duration
	// EventedPLEG: see PodsConfig (false: relisting only, as upstream).
	EventedPLEG bool
}

// StatsProvider is what the kubelet reads of the stats provider
// (stats.Provider has both).
type StatsProvider interface {
	Get(ctx context.Context, updateStats bool) (*statsapi.Summary, error)
	ImageFsStats(ctx context.Context) (imageFs, containerFs *statsapi.FsStats, err error)
}

// NewMainKubelet is upstream's NewMainKubelet: the Kubelet of a
// KubeletConfiguration (defaulted: kubeletconfig.SetDefaults) and its
// Dependencies, both halves, built by New. From kubeCfg it reads maxPods,
// port, nodeStatusUpdateFrequency, nodeStatusReportFrequency,
// nodeLeaseDurationSeconds, podLogsDir, nodeStatusMaxImages, with Admit
// allowedUnsafeSysctls, with ContainerLogRotation the
// containerLog* fields, and with Eviction the eviction*, imageGC*,
// image*GCAge and image pull fields.
func NewMainKubelet(kubeCfg *kubeletv1beta1.KubeletConfiguration, kubeDeps *Dependencies, opts MainOptions) (*Kubelet, error) {
	if kubeCfg == nil || kubeDeps == nil {
		return nil, errors.New("kubelet: NewMainKubelet needs a KubeletConfiguration and Dependencies")
	}
	if kubeDeps.PodConfig == nil {
		return nil, errors.New("kubelet: Dependencies.PodConfig is required (MakePodSourceConfig)")
	}
	if opts.RootDirectory == "" {
		return nil, errors.New("kubelet: MainOptions.RootDirectory is required")
	}
	var containerLogs *logs.Config
	if opts.ContainerLogRotation {
		if kubeCfg.ContainerLogMaxFiles == nil || kubeCfg.ContainerLogMaxWorkers == nil || kubeCfg.ContainerLogMonitorInterval == nil {
			return nil, fmt.Errorf("kubelet: ContainerLogRotation needs a defaulted KubeletConfiguration (containerLogMaxFiles, containerLogMaxWorkers, containerLogMonitorInterval)")
		}
		containerLogs = &logs.Config{MaxSize: kubeCfg.ContainerLogMaxSize, MaxFiles: int(*kubeCfg.ContainerLogMaxFiles),
			MaxWorkers: int(*kubeCfg.ContainerLogMaxWorkers), MonitorInterval: kubeCfg.ContainerLogMonitorInterval.Duration}
	}
	var clusterDNS []net.IP
	for _, s := range kubeCfg.ClusterDNS {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("kubelet: clusterDNS: %q is not an IP address", s)
		}
		clusterDNS = append(clusterDNS, ip)
	}
	resolverConfig := dns.DefaultResolverConfig // upstream's --resolv-conf default
	if kubeCfg.ResolverConfig != nil {
		resolverConfig = *kubeCfg.ResolverConfig
	}
	machine, err := cadvisor.ReadMachineInfoOf("", opts.MockMachine) // the memory the node reports
	if err != nil {
		return nil, fmt.Errorf("kubelet: the machine: %w", err)
	}
	pods := &PodsConfig{
		Updates: kubeDeps.PodConfig.Updates(), SourcesReady: kubeDeps.PodConfig.SeenAllSources,
		RemoteRuntimeService: kubeDeps.RemoteRuntimeService, RemoteImageService: kubeDeps.RemoteImageService, MachineInfo: machine,
		RelistPeriod: opts.RelistPeriod, HousekeepingPeriod: opts.HousekeepingPeriod, Out: kubeDeps.Out,
		RunContainers: opts.RunContainers, Recorder: kubeDeps.Recorder, PodLogsDirectory: kubeCfg.PodLogsDir,
		ContainerGC: opts.ContainerGC, ActiveDeadline: opts.ActiveDeadline, Probes: opts.Probes, ProbeDial: kubeDeps.ProbeDial,
		Admit: opts.Admit, AllowedUnsafeSysctls: kubeCfg.AllowedUnsafeSysctls, ContainerLogs: containerLogs,
		Volumes: opts.Volumes, RootDirectory: opts.RootDirectory, VolumePlugins: kubeDeps.VolumePlugins,
		ClusterDNS: clusterDNS, ClusterDomain: kubeCfg.ClusterDomain, ResolverConfig: resolverConfig, NodeHostsFile: opts.NodeHostsFile, HostPathRoot: opts.HostPathRoot,
		ConfigMapManager: kubeDeps.ConfigMapManager, SecretManager: kubeDeps.SecretManager, TokenManager: kubeDeps.TokenManager,
		ClusterTrustBundleManager: kubeDeps.ClusterTrustBundleManager, PodCertificateManager: kubeDeps.PodCertificateManager,
		Metrics: kubeDeps.Metrics, StatusWriters: opts.StatusWriters, CreatingStatusDelay: opts.CreatingStatusDelay,
		EventedPLEG: opts.EventedPLEG, ContainerManager: kubeDeps.ContainerManager,
	}
	if opts.Eviction {
		ec, err := evictionConfigFrom(kubeCfg, kubeDeps.StatsProvider, opts.ImageGCPeriod)
		if err != nil {
			return nil, err
		}
		pods.Eviction = ec
	}
	return New(Config{Client: kubeDeps.KubeClient, NodeName: opts.NodeName, Clock: kubeDeps.Clock,
		Node: &NodeConfig{
			Annotations: opts.Annotations,
			Status: &NodeStatusOptions{RootDir: opts.RootDirectory, MaxPods: int(kubeCfg.MaxPods), NodeIP: opts.NodeIP, Port: kubeCfg.Port,
				MockMachine: opts.MockMachine, NodeStatusMaxImages: kubeCfg.NodeStatusMaxImages}, // nodeStatusMaxImages: status.images' cap
			NodeStatusUpdateFrequency: kubeCfg.NodeStatusUpdateFrequency.Duration, NodeStatusReportFrequency: kubeCfg.NodeStatusReportFrequency.Duration,
			LeaseDurationSeconds: kubeCfg.NodeLeaseDurationSeconds,
			HeartbeatClient:      kubeDeps.HeartbeatClient, OnHeartbeatFailure: kubeDeps.OnHeartbeatFailure,
			OnRegistered: kubeDeps.OnRegistered, OnStatusPatched: kubeDeps.OnStatusPatched,
		},
		Pods: pods,
	})
}

// GetPodManager is the Kubelet's pod manager, for the kubelet API server
// (upstream hands the server the Kubelet itself, its HostInterface).
func (kl *Kubelet) GetPodManager() kubepod.Manager { return kl.podManager }
