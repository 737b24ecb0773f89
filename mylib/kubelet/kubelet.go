package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"mykubelet/mylib/allocation"
	"mykubelet/mylib/cadvisor"
	"mykubelet/mylib/cm"
	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/eviction"
	"mykubelet/mylib/images"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/logs"
	"mykubelet/mylib/metrics"
	"mykubelet/mylib/pleg"
	kubepod "mykubelet/mylib/pod"
	"mykubelet/mylib/podworkers"
	"mykubelet/mylib/prober"
	proberesults "mykubelet/mylib/prober/results"
	"mykubelet/mylib/status"
	"mykubelet/mylib/volume"
)

// Upstream's intervals for the sync loop.
const (
	// SyncTickerPeriod: how often the work queue is checked for due resyncs.
	SyncTickerPeriod = time.Second
	// DefaultHousekeepingPeriod: how often workers and mirror pods are
	// cleaned up (upstream's housekeepingPeriod).
	DefaultHousekeepingPeriod = 2 * time.Second
)

// Config is what New needs. Client and NodeName are always required; each
// half is built only when its part is set.
type Config struct {
	// Client talks to the API server with the node's credentials. Required.
	Client kubernetes.Interface
	// NodeName is the Node's name. Required.
	NodeName string
	// Clock is used for every wait and time stamp; nil means the real clock.
	Clock clock.WithTicker
	// Node configures the node half (RunNode); nil means none.
	Node *NodeConfig
	// Pods configures the pod half (RunPods); nil means none.
	Pods *PodsConfig
}

// PodsConfig is the pod half's part of Config.
type PodsConfig struct {
	// Updates is the merged stream of pod changes (PodConfig.Updates). Required.
	Updates <-chan kubetypes.PodUpdate
	// SourcesReady reports whether every pod source has sent its first list
	// (PodConfig.SeenAllSources); housekeeping waits for it, since before
	// that every mirror pod would look orphaned. Nil means always ready.
	SourcesReady func() bool
	// RemoteRuntimeService and RemoteImageService are the CRI (upstream's
	// Dependencies fields of these names; kuberuntime.Connect's Manager
	// has both: RuntimeService(), ImageService()). From them the kubelet
	// builds its runtime manager, whole (kuberuntime.NewKubeGenericRuntimeManager,
	// as upstream's NewMainKubelet), which the PLEG relists and the pod
	// workers sync pods with; the kubelet asks RemoteRuntimeService for the
	// runtime's Status. Required with RunContainers.
	RemoteRuntimeService runtimeapi.RuntimeServiceClient
	RemoteImageService   runtimeapi.ImageServiceClient
	// MachineInfo is the node's machine, as its status reports it
	// (upstream: the cadvisor's MachineInfo, which NewMainKubelet hands
	// the runtime manager): its memory sets each container's OOM score
	// adjustment. Nil: the host's (cadvisor.ReadMachineInfo).
	MachineInfo *cadvisor.MachineInfo
	// Runtime, instead of the CRI, is a runtime the PLEG relists (a
	// test's, say); not with RunContainers. The CRI or a Runtime is
	// required, unless WithoutWorkers.
	Runtime kubecontainer.Runtime
	// WithoutWorkers leaves out the PLEG and the pod workers: the sync loop
	// then keeps the pod manager up to date and, at housekeeping, the mirror
	// pods of static pods (which SyncPod does otherwise). A kubelet that
	// only watches its pods.
	WithoutWorkers bool
	// RelistPeriod is the PLEG's; zero means pleg.RelistPeriod.
	RelistPeriod time.Duration
	// HousekeepingPeriod: zero means DefaultHousekeepingPeriod.
	HousekeepingPeriod time.Duration
	// PodManager and PodCache are created when nil; pass them to share them
	// (with a debug server, say).
	PodManager kubepod.Manager
	PodCache   kubecontainer.Cache
	// Out receives one line for each thing SyncPod and friends do or would
	// do; nil means io.Discard.
	Out io.Writer

	// RunContainers makes SyncPod real: the sandbox, images and containers
	// through the CRI (RemoteRuntimeService and RemoteImageService), the pod's
	// status written by a status manager, events. False: the pod workers
	// only say what they would do.
	RunContainers bool
	// Recorder receives the events on pods (events.NewRecorder, with the
	// node's credentials); nil drops them.
	Recorder record.EventRecorder
	// PodLogsDirectory is where containers' logs go; "" means
	// kuberuntime.DefaultPodLogsDirectory.
	PodLogsDirectory string
	// StatusWriters is how many pods the status manager writes at the
	// same time (status.Config.Writers); 0 means one, upstream's loop.
	StatusWriters int
	// CreatingStatusDelay holds back a new pod's ContainerCreating status
	// for up to this long (status.Config.CreatingStatusDelay); 0 writes it
	// at once, as upstream.
	CreatingStatusDelay time.Duration
	// EventedPLEG also reads the runtime's container events
	// (pleg.EventedPLEG), so that a pod's change is seen when it happens,
	// not at the next relist; false relists only, as upstream, whose
	// EventedPLEG feature gate is off by default. Needs
	// RemoteRuntimeService.
	EventedPLEG bool

	// ContainerGC, with RunContainers, collects what ended (see
	// kubelet_lifecycle.go): dead containers and sandboxes by this policy
	// every kuberuntime.ContainerGCPeriod, expired crash-loop back-offs and
	// orphaned runtime pods at housekeeping. Nil: nothing is collected.
	ContainerGC *kuberuntime.GCPolicy
	// ActiveDeadline, with RunContainers, fails a pod past its
	// spec.activeDeadlineSeconds (reason DeadlineExceeded).
	ActiveDeadline bool
	// Probes runs the containers' startup, liveness and readiness probes
	// (mylib/prober; needs RunContainers): they set each container's
	// started and ready, a failed liveness or startup probe has the
	// container killed and restarted, and the sync loop prints one
	// "SyncLoop (probe)" line per result that changes. False: a container
	// is started and ready as soon as it runs.
	Probes bool
	// ProbeDial opens the connections of httpGet, tcpSocket and grpc
	// probes (prober.GuardedDialer keeps them to networks the kubelet may
	// reach); nil: a plain net.Dialer.
	ProbeDial prober.DialFunc
	// Admit checks each new pod against the Node before it runs, and fails
	// the pods that do not fit (kubelet_admission.go); needs RunContainers.
	// False admits every pod.
	Admit bool
	// AllowedUnsafeSysctls are the KubeletConfiguration's
	// allowedUnsafeSysctls: with Admit, a pod may set these sysctls (names
	// or prefixes ending in "*") besides the safe ones (mylib/sysctl); a
	// pod asking for another is rejected (SysctlForbidden).
	AllowedUnsafeSysctls []string
	// ContainerLogs, with RunContainers, rotates the running containers'
	// log files (mylib/logs: containerLogMaxSize, containerLogMaxFiles,
	// containerLogMonitorInterval, containerLogMaxWorkers; zero values are
	// upstream's defaults). Its Runtime and Clock are the Kubelet's. Nil:
	// logs grow without end.
	ContainerLogs *logs.Config
	// Volumes, with RunContainers, mounts the pods' volumes
	// (kubelet_volumes.go: the volume manager, the pods' directories under
	// RootDirectory) before their containers start. False: no volume is
	// set up (and the containers get no mounts).
	Volumes bool
	// RootDirectory is the kubelet's root directory (--root-dir): the
	// pods' directories go in RootDirectory/pods. Required with Volumes.
	// With RunContainers, the pods' allocated and actuated resources are
	// checkpointed in it too (mylib/allocation; kubelet_resize.go): each
	// container's status then shows allocatedResources and resources.
	RootDirectory string
	// ClusterDNS, ClusterDomain and ResolverConfig are the
	// KubeletConfiguration's clusterDNS, clusterDomain and resolvConf:
	// with Volumes, each sandbox gets the DNS configuration upstream's
	// would (mylib/network/dns), and each container its /etc/hosts.
	ClusterDNS     []net.IP
	ClusterDomain  string
	ResolverConfig string
	// NodeHostsFile, with Volumes, is the node's hosts file (/etc/hosts)
	// that a hostNetwork pod's containers see, copied under a
	// kubelet-managed header with the pod's hostAliases, as upstream's
	// (a real runtime's kubelet). "": a hostNetwork pod gets no /etc/hosts
	// from the kubelet (the mock runtime's: nothing of the host's files
	// reaches a pod).
	NodeHostsFile string
	// HostPathRoot, with Volumes, is where a hostPath volume's path is
	// found (VolumeHost.GetHostPathRoot): "/" is the machine's own files,
	// as upstream's (a real runtime's kubelet); "" is RootDirectory/host,
	// the mock runtime's, whose pods never reach the machine's files.
	HostPathRoot string
	// VolumePlugins are the volume types this kubelet mounts (upstream's
	// ProbeVolumePlugins); the Kubelet initialises them with itself as
	// their VolumeHost.
	VolumePlugins []volume.VolumePlugin
	// ConfigMapManager, SecretManager, TokenManager,
	// ClusterTrustBundleManager and PodCertificateManager are what the
	// plugins read ConfigMaps, Secrets, service-account tokens,
	// ClusterTrustBundles and pod certificates through; a nil one fails
	// its volumes.
	ConfigMapManager          ConfigMapManager
	SecretManager             SecretManager
	TokenManager              TokenManager
	ClusterTrustBundleManager ClusterTrustBundleManager
	PodCertificateManager     PodCertificateManager

	// Metrics records the kubelet's series (mylib/metrics: the PLEG's,
	// the pod workers', the runtime operations', the probes', the pod
	// start SLI); nil records none.
	Metrics *metrics.Metrics

	// ContainerManager, with RunContainers, makes the node's and the
	// pods' cgroups (mylib/cm; upstream's Dependencies.ContainerManager):
	// Run starts it, SyncPod makes each pod's cgroup before its sandbox,
	// which gets it as CgroupParent, and a pod's cgroup goes once its
	// containers are gone. Nil: no cgroups (cm.NewStubContainerManager).
	ContainerManager cm.ContainerManager

	// Eviction, with RunContainers and Admit, runs the eviction manager
	// and the image GC manager (kubelet_eviction.go); nil: neither, and
	// the node never reports pressure.
	Eviction *EvictionConfig
}

// EvictionConfig is what the eviction manager and the image GC manager
// need (PodsConfig.Eviction).
type EvictionConfig struct {
	// Stats is the summary and image filesystem the managers read. Required.
	Stats StatsProvider
	// Config: thresholds (eviction.ParseThresholdConfig), transition
	// period, the soft evictions' grace period.
	Config eviction.Config
	// MonitoringInterval: zero is eviction.MonitoringInterval.
	MonitoringInterval time.Duration
	// ImageGCPolicy and ImageGCPeriod (zero: images.ImageGCPeriod).
	ImageGCPolicy images.ImageGCPolicy
	ImageGCPeriod time.Duration
	// ImagePulls: serial or parallel pulls, the registry QPS.
	ImagePulls images.PullConfig
}

// Kubelet is the node agent: a node half and a pod half (see the package
// documentation).
type Kubelet struct {
	client   kubernetes.Interface
	nodeName string
	clock    clock.WithTicker

	node *nodeHalf // nil without Config.Node

	// The pod half; podManager is nil without Config.Pods, pleg and
	// podWorkers without workers.
	updates            <-chan kubetypes.PodUpdate
	sourcesReady       func() bool
	podManager         kubepod.Manager
	podCache           kubecontainer.Cache
	pleg               *pleg.GenericPLEG
	eventedPLEG        *pleg.EventedPLEG // nil unless PodsConfig.EventedPLEG
	mirrorPodClient    kubepod.MirrorClient
	podWorkers         podworkers.PodWorkers
	workQueue          podworkers.WorkQueue
	housekeepingPeriod time.Duration

	out   io.Writer            // a lineWriter: one Write per line, whole
	known map[types.UID]string // workers alive at the last housekeeping

	// The runtime's health (runtime.go); cri is nil without a pod half.
	cri          runtimeapi.RuntimeServiceClient
	runtimeState *runtimeState

	// Set with Config.Pods.RunContainers (kubelet_sync.go): the runtime
	// manager New built.
	containerRuntime kubecontainer.Runtime
	statusManager    status.Manager
	recorder         record.EventRecorder
	reasonCache      *ReasonCache
	backOff          *flowcontrol.Backoff
	// serviceInformer watches the cluster's Services for the containers'
	// service variables (upstream NewMainKubelet's serviceLister); RunPods
	// runs it.
	serviceInformer cache.SharedIndexInformer
	serviceLister   corelisters.ServiceLister
	hostIPsMu       sync.Mutex
	hostIPs         []string

	// containerManager makes the pods' cgroups (kubelet_cm.go); nil
	// without RunContainers.
	containerManager cm.ContainerManager
	// ownPodCgroups are the UIDs of the pods whose cgroups this kubelet
	// made (ensurePodCgroup): housekeeping removes no other pod's cgroup
	// (kubelet_cm.go says why).
	ownPodCgroups sync.Map
	// Set with Config.Pods.ContainerGC and ActiveDeadline (kubelet_lifecycle.go).
	lifecycle lifecycle
	// Set with Config.Pods.Probes (kubelet_probes.go).
	probeManager     prober.Manager
	livenessManager  proberesults.Manager
	readinessManager proberesults.Manager
	startupManager   proberesults.Manager
	admission        *admission // nil unless Config.Pods.Admit
	// allocationManager records the resources allocated to each pod and
	// those actuated for it (kubelet_resize.go); nil unless
	// Config.Pods.RunContainers with a RootDirectory.
	allocationManager *allocation.Manager
	pendingResizes    pendingResizes
	// containerLogManager rotates logs; nil unless Config.Pods.ContainerLogs.
	containerLogManager *logs.ContainerLogManager
	// volumes: the volume manager and friends; nil unless
	// Config.Pods.Volumes (kubelet_volumes.go).
	volumes *volumes
	// syncLoopMonitor: when the sync loop last entered or left an
	// iteration, for SyncLoopHealthCheck (kubelet_healthz.go).
	syncLoopMonitor loopMonitor
	// metrics records the kubelet's series (kubelet_metrics.go); nil
	// records none.
	metrics *metrics.Metrics
	// nodePressure: the eviction manager and the image GC manager; nil
	// unless Config.Pods.Eviction (kubelet_eviction.go).
	nodePressure *nodePressure
}

// New checks cfg and returns a Kubelet (upstream: NewMainKubelet).
func New(cfg Config) (*Kubelet, error) {
	if cfg.Client == nil {
		return nil, errors.New("kubelet: Config.Client is required")
	}
	if cfg.NodeName == "" {
		return nil, errors.New("kubelet: Config.NodeName is required")
	}
	if cfg.Node == nil && cfg.Pods == nil {
		return nil, errors.New("kubelet: Config.Node or Config.Pods is required (nothing to run)")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	kl := &Kubelet{client: cfg.Client, nodeName: cfg.NodeName, clock: cfg.Clock, out: &lineWriter{w: io.Discard}, known: map[types.UID]string{}}
	if cfg.Node != nil {
		if err := kl.newNodeHalf(*cfg.Node); err != nil {
			return nil, err
		}
	}
	if cfg.Pods != nil {
		if err := kl.newPodHalf(*cfg.Pods); err != nil {
			return nil, err
		}
	}
	return kl, nil
}

func (kl *Kubelet) newPodHalf(cfg PodsConfig) error {
	if cfg.Updates == nil {
		return errors.New("kubelet: Config.Pods.Updates is required (PodConfig.Updates())")
	}
	remote := cfg.RemoteRuntimeService != nil || cfg.RemoteImageService != nil
	if remote && (cfg.RemoteRuntimeService == nil || cfg.RemoteImageService == nil) {
		return errors.New("kubelet: Config.Pods.RemoteRuntimeService and RemoteImageService go together")
	}
	if remote && cfg.Runtime != nil {
		return errors.New("kubelet: Config.Pods.Runtime or the CRI (RemoteRuntimeService, RemoteImageService), not both")
	}
	if !remote && cfg.Runtime == nil && !cfg.WithoutWorkers {
		return errors.New("kubelet: Config.Pods.Runtime or the CRI (RemoteRuntimeService, RemoteImageService) is required (or WithoutWorkers)")
	}
	if (remote || cfg.Runtime != nil) && cfg.WithoutWorkers {
		return errors.New("kubelet: Config.Pods.Runtime is not used WithoutWorkers")
	}
	if cfg.RunContainers && !remote {
		return errNeedsContainerRuntime
	}
	if cfg.Probes && !cfg.RunContainers {
		return errors.New("kubelet: Config.Pods.Probes needs RunContainers (probes need running containers)")
	}
	if cfg.Admit && !cfg.RunContainers {
		return errAdmitNeedsRunContainers
	}
	if cfg.Eviction != nil && (!cfg.RunContainers || !cfg.Admit) {
		return errEvictionNeeds
	}
	if cfg.Volumes && !cfg.RunContainers {
		return errors.New("kubelet: Config.Pods.Volumes needs RunContainers (volumes are for containers)")
	}
	if cfg.ContainerLogs != nil && !cfg.RunContainers {
		return errors.New("kubelet: Config.Pods.ContainerLogs needs RunContainers (a CRI to reopen the logs)")
	}
	if cfg.RelistPeriod == 0 {
		cfg.RelistPeriod = pleg.RelistPeriod
	}
	if cfg.HousekeepingPeriod == 0 {
		cfg.HousekeepingPeriod = DefaultHousekeepingPeriod
	}
	if cfg.RelistPeriod < 0 || cfg.HousekeepingPeriod < 0 {
		return fmt.Errorf("kubelet: relist period (%v) and housekeeping period (%v) must be positive", cfg.RelistPeriod, cfg.HousekeepingPeriod)
	}
	if cfg.SourcesReady == nil {
		cfg.SourcesReady = func() bool { return true }
	}
	if cfg.PodManager == nil {
		cfg.PodManager = kubepod.NewBasicPodManager()
	}
	if cfg.PodCache == nil {
		cfg.PodCache = kubecontainer.NewCache()
	}
	if cfg.Out != nil {
		kl.out = &lineWriter{w: cfg.Out}
	}
	kl.updates = cfg.Updates
	kl.sourcesReady = cfg.SourcesReady
	kl.podManager = cfg.PodManager
	kl.podCache = cfg.PodCache
	kl.housekeepingPeriod = cfg.HousekeepingPeriod
	kl.mirrorPodClient = kubepod.NewBasicMirrorClient(kl.client, kl.nodeName, nil)
	kl.workQueue = podworkers.NewBasicWorkQueue(kl.clock)
	kl.runtimeState = &runtimeState{} // no checks without a PLEG
	kl.metrics = cfg.Metrics
	kl.metrics.SetNodeName(kl.nodeName)
	if cfg.WithoutWorkers {
		return nil
	}
	instrumentCRI(&cfg)
	runtime := cfg.Runtime
	var manager *kuberuntime.Manager
	if remote { // upstream's NewMainKubelet: the runtime manager, built whole
		if cfg.RunContainers {
			kl.recorder = cfg.Recorder
			if kl.recorder == nil {
				kl.recorder = &record.FakeRecorder{} // no Events channel: dropped
			}
			if cfg.Probes {
				kl.livenessManager = proberesults.NewManager()
				kl.readinessManager = proberesults.NewManager()
				kl.startupManager = proberesults.NewManager()
			}
		}
		var helper kubecontainer.RuntimeHelper // nil without RunContainers: nothing is run
		if cfg.RunContainers {
			helper = runtimeHelper{kl}
		}
		m, err := kuberuntime.NewKubeGenericRuntimeManager(context.TODO(), kl.recorder, kl.livenessManager, kl.startupManager,
			cfg.PodLogsDirectory, helper, "", kl.clock, cfg.RemoteRuntimeService, cfg.RemoteImageService)
		if err != nil {
			return fmt.Errorf("kubelet: the runtime manager: %w", err)
		}
		// httpGet hooks reach what probes reach: the networks the kubelet
		// may dial, and its pods' IPs.
		m.SetLifecycleHTTPDial(prober.AllowPodIPs(cfg.ProbeDial, kl.isPodIP))
		if cfg.MachineInfo == nil {
			if cfg.MachineInfo, err = cadvisor.ReadMachineInfo(""); err != nil {
				return fmt.Errorf("kubelet: the machine: %w", err)
			}
		}
		m.SetMachineInfo(cfg.MachineInfo)
		runtime, manager = m, m
		kl.cri = cfg.RemoteRuntimeService // to ask the runtime for its Status
	}
	kl.pleg = pleg.NewGenericPLEG(runtime, make(chan *pleg.PodLifecycleEvent, pleg.ChannelCapacity),
		&pleg.RelistDuration{RelistPeriod: cfg.RelistPeriod, RelistThreshold: pleg.RelistThreshold}, kl.podCache, kl.clock)
	kl.pleg.SetMetrics(kl.metrics)
	if cfg.EventedPLEG && cfg.RemoteRuntimeService != nil {
		kl.eventedPLEG = pleg.NewEventedPLEG(kl.pleg, cfg.RemoteRuntimeService)
	}
	kl.podWorkers = podworkers.New(kl, kl.workQueue, kl.podCache, kl.clock, podworkers.WithMetrics(kl.metrics))
	if kl.cri != nil {
		kl.runtimeState = newRuntimeState(MaxWaitForContainerRuntime, kl.clock)
	}
	kl.runtimeState.addHealthCheck("PLEG", kl.pleg.Healthy)
	if !cfg.RunContainers {
		return nil
	}
	kl.containerRuntime = runtime
	kl.containerManager = cfg.ContainerManager
	if kl.containerManager == nil {
		kl.containerManager = cm.NewStubContainerManager()
	}
	kl.serviceInformer = coreinformers.NewServiceInformer(kl.client, metav1.NamespaceAll, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	kl.serviceLister = corelisters.NewServiceLister(kl.serviceInformer.GetIndexer())
	kl.reasonCache = NewReasonCache()
	kl.backOff = kuberuntime.NewCrashLoopBackOff(kl.clock) // 10 s doubling to 300 s, on the kubelet's clock
	sm, err := status.NewManager(status.Config{Client: kl.client, PodManager: kl.podManager, PodDeletionSafety: kl, Clock: kl.clock,
		Writers: cfg.StatusWriters, CreatingStatusDelay: cfg.CreatingStatusDelay, Metrics: kl.metrics})
	if err != nil {
		return err
	}
	kl.statusManager = sm
	if cfg.RootDirectory != "" {
		if err := kl.newAllocationManager(cfg.RootDirectory); err != nil {
			return err
		}
		if manager != nil { // in-place resize: the runtime applies what is allocated
			manager.SetAllocationManager(kl.allocationManager)
			manager.SetContainerManager(kl.containerManager) // and resizes the pod's cgroup, if it has one
		}
	}
	if cfg.Probes {
		if err := kl.newProbeManager(cfg.ProbeDial); err != nil {
			return err
		}
	}
	if cfg.Admit {
		if err := kl.newAdmission(cfg.AllowedUnsafeSysctls); err != nil {
			return err
		}
	}
	if cfg.ContainerLogs != nil { // upstream: logs.NewContainerLogManager in NewMainKubelet
		lc := *cfg.ContainerLogs
		lc.Runtime, lc.Clock = kl.cri, kl.clock
		m, err := logs.NewContainerLogManager(lc)
		if err != nil {
			return fmt.Errorf("kubelet: %w", err)
		}
		kl.containerLogManager = m
	}
	if cfg.Volumes {
		if err := kl.newVolumes(cfg); err != nil {
			return err
		}
	}
	if err := kl.newLifecycle(cfg, manager); err != nil {
		return err
	}
	if cfg.Eviction != nil {
		return kl.newNodePressure(cfg, manager)
	}
	return nil
}

// Run records the Starting event (BirthCry), then runs the halves Config
// set up, side by side, until ctx ends or the node half fails to register
// (its error is returned; the pod half is then stopped too).
func (kl *Kubelet) Run(ctx context.Context) error {
	kl.BirthCry()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := kl.startContainerManager(ctx); err != nil { // kubelet_cm.go
		return err
	}
	var wg sync.WaitGroup
	var nodeErr, podsErr error
	if kl.node != nil {
		wg.Go(func() {
			if nodeErr = kl.RunNode(ctx); nodeErr != nil {
				cancel()
			}
		})
	}
	if kl.podManager != nil {
		wg.Go(func() { podsErr = kl.RunPods(ctx) })
	}
	wg.Wait()
	kl.removeOwnPodCgroups() // every pod worker has stopped (kubelet_cm.go)
	return errors.Join(nodeErr, podsErr)
}

// RunPods is the pod half: the PLEG relists the runtime and the sync loop
// hands pods to their workers, until ctx ends.
func (kl *Kubelet) RunPods(ctx context.Context) error {
	if kl.podManager == nil {
		return errors.New("kubelet: RunPods needs Config.Pods")
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	if kl.cri != nil {
		kl.updateRuntimeUp(ctx) // at once, so that a ready runtime makes a Ready node
		wg.Go(func() { kl.runUpdateRuntimeUp(ctx) })
	}
	if kl.statusManager != nil {
		wg.Go(func() { kl.statusManager.Run(ctx) })
	}
	if kl.serviceInformer != nil { // upstream: started in NewMainKubelet
		wg.Go(func() { kl.serviceInformer.Run(ctx.Done()) })
	}
	if gc := kl.lifecycle.containerGC; gc != nil {
		wg.Go(func() { gc.Run(ctx, kl.sourcesReady) })
	}
	if m := kl.containerLogManager; m != nil { // upstream: Start in initializeRuntimeDependentModules
		wg.Go(func() { m.Run(ctx) })
	}
	if kl.volumes != nil { // upstream: in Kubelet.Run, before the sync loop
		wg.Go(func() { kl.volumes.manager.Run(ctx, kl.sourcesReady) })
		if r, ok := kl.volumes.tokenManager.(interface{ Run(context.Context) }); ok {
			wg.Go(func() { r.Run(ctx) }) // drops expired tokens
		}
	}
	// Upstream: in initializeRuntimeDependentModules and StartGarbageCollection.
	kl.runNodePressure(ctx, &wg)
	var plegCh <-chan *pleg.PodLifecycleEvent // nil without workers: never ready
	if kl.pleg != nil {
		plegCh = kl.pleg.Watch()
		wg.Go(func() { kl.pleg.Run(ctx) })
		if kl.eventedPLEG != nil {
			wg.Go(func() { kl.eventedPLEG.Run(ctx) })
		}
	}
	// After the PLEG has started: its first relist makes the node Ready
	// while the loop waits.
	if kl.serviceInformer != nil {
		kl.waitForServices(ctx)
	}
	kl.syncLoop(ctx, kl.updates, plegCh)
	kl.stopProbes()
	if kl.podWorkers != nil {
		kl.podWorkers.Wait() // the syncs under way end (ctx is done) before Run returns
	}
	return nil
}

// ServiceSyncWait bounds how long RunPods waits for the Services' first
// list before the sync loop starts.
const ServiceSyncWait = 5 * time.Second

// waitForServices waits, at most ServiceSyncWait, for the Services' first
// list: a pod from the API server gets no environment before it (its
// container would wait a pod worker's back-off, 10 s). Upstream starts the
// informer in NewMainKubelet, seconds before its sync loop; ours starts with
// the loop. Past the wait (the API server away) the loop starts anyway:
// static pods do not need the Services.
func (kl *Kubelet) waitForServices(ctx context.Context) {
	waitCtx, cancel := context.WithTimeout(ctx, ServiceSyncWait)
	defer cancel()
	if !cache.WaitForCacheSync(waitCtx.Done(), kl.serviceInformer.HasSynced) && ctx.Err() == nil {
		klog.InfoS("Services not listed yet; pods from the API server wait for them", "waited", ServiceSyncWait)
	}
}

// PLEG is the pod half's PLEG (nil without workers), for its health and
// counters.
func (kl *Kubelet) PLEG() *pleg.GenericPLEG { return kl.pleg }

func (kl *Kubelet) printf(format string, args ...any) {
	fmt.Fprintf(kl.out, format+"\n", args...)
}

// lineWriter serializes the writes of the pod workers' goroutines, so that
// lines (one Write each) do not interleave.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// syncLoop runs syncLoopIteration until ctx ends. While the runtime is
// unhealthy (the PLEG has not relisted within its threshold) it syncs
// nothing: it logs "Skipping pod synchronization" with the reason, and
// looks again after 100 ms, then twice as long each time, up to 5 s, as
// upstream does. Unlike upstream, it waits quietly (at V(2)) during the
// first relist period: at start the PLEG has not relisted yet, which is
// no error, and the real kubelet's line about it misleads a newcomer.
// Before and after each iteration it notes the time, for
// SyncLoopHealthCheck.
func (kl *Kubelet) syncLoop(ctx context.Context, updates <-chan kubetypes.PodUpdate, plegCh <-chan *pleg.PodLifecycleEvent) {
	syncTicker := kl.clock.NewTicker(SyncTickerPeriod)
	defer syncTicker.Stop()
	housekeepingTicker := kl.clock.NewTicker(kl.housekeepingPeriod)
	defer housekeepingTicker.Stop()
	backoff := runtimeErrorBackoffBase
	start := kl.clock.Now()
	for {
		if err := kl.runtimeState.runtimeErrors(); err != nil {
			t := kl.clock.NewTimer(backoff) // before the log line: whoever reads it finds the timer set
			if kl.clock.Since(start) < pleg.RelistPeriod {
				klog.FromContext(ctx).V(2).Info("Waiting for the first relist before syncing pods", "err", err)
			} else {
				klog.FromContext(ctx).Error(err, "Skipping pod synchronization")
			}
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
			backoff = min(2*backoff, runtimeErrorBackoffMax)
			continue
		}
		backoff = runtimeErrorBackoffBase
		kl.syncLoopMonitor.store(kl.clock.Now())
		if !kl.syncLoopIteration(ctx, updates, plegCh, syncTicker.C(), housekeepingTicker.C()) {
			return
		}
		kl.syncLoopMonitor.store(kl.clock.Now())
	}
}

// syncLoopIteration waits for one thing to happen and hands the pods it
// concerns to their workers. It returns false when ctx has ended.
func (kl *Kubelet) syncLoopIteration(ctx context.Context, configCh <-chan kubetypes.PodUpdate, plegCh <-chan *pleg.PodLifecycleEvent,
	syncCh, housekeepingCh <-chan time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case u := <-configCh:
		kl.observePodsOnWatch(u)
		names := make([]string, 0, len(u.Pods))
		for _, p := range u.Pods {
			names = append(names, p.Namespace+"/"+p.Name)
		}
		kl.printf("SyncLoop %s source=%s pods=[%s]", u.Op, u.Source, strings.Join(names, " "))
		switch u.Op {
		case kubetypes.ADD:
			kl.HandlePodAdditions(ctx, u.Pods)
		case kubetypes.UPDATE:
			kl.HandlePodUpdates(ctx, u.Pods)
		case kubetypes.REMOVE:
			kl.HandlePodRemoves(ctx, u.Pods)
		case kubetypes.RECONCILE:
			kl.HandlePodReconcile(ctx, u.Pods)
		case kubetypes.DELETE:
			// DELETE is an UPDATE, because of graceful deletion (upstream's words).
			kl.HandlePodUpdates(ctx, u.Pods)
		case kubetypes.SET:
			klog.FromContext(ctx).Error(nil, "Kubelet does not support snapshot update")
		default:
			klog.FromContext(ctx).Error(nil, "Invalid operation type received", "operation", u.Op)
		}
	case e := <-plegCh:
		if pod, ok := kl.podManager.GetPodByUID(e.ID); ok {
			klog.V(2).InfoS("SyncLoop (PLEG): event for pod", "pod", klog.KObj(pod), "event", e.Type)
			kl.HandlePodSyncs(ctx, []*v1.Pod{pod})
		}
	case <-syncCh:
		kl.HandlePodSyncs(ctx, kl.getPodsToSync())
	case <-housekeepingCh:
		if kl.sourcesReady() {
			kl.HandlePodCleanups(ctx)
		}
	case u := <-updates(kl.livenessManager):
		if u.Result == proberesults.Failure {
			kl.handleProbeSync(ctx, u, "liveness", "unhealthy")
		}
	case u := <-updates(kl.readinessManager):
		kl.handleProbeSync(ctx, u, "readiness", map[bool]string{true: "ready", false: ""}[u.Result == proberesults.Success])
	case u := <-updates(kl.startupManager):
		kl.handleProbeSync(ctx, u, "startup", map[bool]string{true: "started", false: "unhealthy"}[u.Result == proberesults.Success])
	}
	return true
}

// HandlePodAdditions handles new pods (upstream's name): each goes into the
// pod manager; a mirror pod's change is its static pod's; any other pod is
// admitted (oldest first, when admission is on), its probes start, and its
// worker is created.
func (kl *Kubelet) HandlePodAdditions(ctx context.Context, pods []*v1.Pod) {
	for _, pod := range kl.inAdmissionOrder(pods) {
		kl.podManager.AddPod(pod)
		if kl.handleMirrorPod(ctx, pod) || !kl.admit(ctx, kubetypes.ADD, pod) {
			continue // a mirror pod, or rejected: no pod worker
		}
		kl.allocate(pod)
		if kl.probeManager != nil {
			kl.probeManager.AddPod(pod)
		}
		// A pod whose spec asks for more than its allocation (a resize
		// left pending when the kubelet stopped) is queued, and tried once
		// every pod of this batch is in: as upstream, no resize takes the
		// room of a pod not yet added.
		kl.pushPendingResize(pod)
		kl.dispatchWork(ctx, pod, kubetypes.SyncPodCreate)
	}
	kl.retryPendingResizes(ctx)
}

// HandlePodUpdates handles changed pods, and pods the API server is
// deleting gracefully: the pod manager is updated and each pod's worker
// syncs it.
func (kl *Kubelet) HandlePodUpdates(ctx context.Context, pods []*v1.Pod) {
	for _, pod := range pods {
		kl.podManager.UpdatePod(pod)
		if kl.handleMirrorPod(ctx, pod) || !kl.admit(ctx, kubetypes.UPDATE, pod) {
			continue
		}
		if kl.pushPendingResize(pod) { // a resize waits for its allocation (kubelet_resize.go)
			// Allocated, or found not to fit, before the pod's worker syncs
			// its new generation, as upstream: else that sync could write
			// status.observedGeneration with no resize condition yet, and
			// a client would take the resize for done before it began.
			kl.retryPendingResizes(ctx)
		}
		kl.dispatchWork(ctx, pod, kubetypes.SyncPodUpdate)
	}
	kl.retryPendingResizes(ctx)
}

// HandlePodRemoves handles pods that are gone from their source: out of the
// pod manager, their probes stop, and their workers kill them.
func (kl *Kubelet) HandlePodRemoves(ctx context.Context, pods []*v1.Pod) {
	for _, pod := range pods {
		kl.podManager.RemovePod(pod)
		if kl.handleMirrorPod(ctx, pod) || !kl.admit(ctx, kubetypes.REMOVE, pod) {
			continue
		}
		if kl.probeManager != nil {
			kl.probeManager.RemovePod(pod)
		}
		kl.dispatchWork(ctx, pod, kubetypes.SyncPodKill)
	}
	kl.retryPendingResizes(ctx) // what the removed pods held may fit a deferred resize
}

// HandlePodReconcile handles pods whose status alone changed in the API
// server: the pod manager takes the new copy; the kubelet owns the status,
// so there is nothing to run unless a readiness gate's condition changed
// what Ready is to say (a mirror pod's static pod is synced).
func (kl *Kubelet) HandlePodReconcile(ctx context.Context, pods []*v1.Pod) {
	for _, pod := range pods {
		kl.podManager.UpdatePod(pod)
		if kl.handleMirrorPod(ctx, pod) {
			continue
		}
		// A readiness gate's condition changed: Ready is to be written
		// again (upstream's NeedToReconcilePodReadiness).
		if status.NeedToReconcilePodReadiness(pod) {
			kl.dispatchWork(ctx, pod, kubetypes.SyncPodSync)
		}
	}
}

// HandlePodSyncs has the workers sync pods the pod manager already holds:
// those with a PLEG event, a due resync or a changed probe result.
func (kl *Kubelet) HandlePodSyncs(ctx context.Context, pods []*v1.Pod) {
	for _, pod := range pods {
		if kl.handleMirrorPod(ctx, pod) {
			continue
		}
		kl.dispatchWork(ctx, pod, kubetypes.SyncPodSync)
	}
}

// handleMirrorPod reports whether pod is a mirror pod; if so, its static
// pod (when known) is synced, since a mirror pod's change is its static
// pod's.
func (kl *Kubelet) handleMirrorPod(ctx context.Context, pod *v1.Pod) bool {
	if !kubetypes.IsMirrorPod(pod) {
		return false
	}
	if static, ok := kl.podManager.GetPodByMirrorPod(pod); ok {
		kl.dispatchWork(ctx, static, kubetypes.SyncPodUpdate)
	}
	return true
}

func (kl *Kubelet) dispatchWork(ctx context.Context, pod *v1.Pod, t kubetypes.SyncPodType) {
	if kl.podWorkers == nil {
		return // without workers, the pod manager is all there is
	}
	mirror, _ := kl.podManager.GetMirrorPodByPod(pod)
	kl.podWorkers.UpdatePod(ctx, podworkers.UpdatePodOptions{UpdateType: t, StartTime: kl.clock.Now(), Pod: pod, MirrorPod: mirror})
}

// HandlePodCleanups is housekeeping: workers of pods that are gone are
// terminated and dropped, and mirror pods without a static pod deleted.
// Without workers, it also gives each static pod its mirror pod.
func (kl *Kubelet) HandlePodCleanups(ctx context.Context) {
	pods, mirrorPods, orphans := kl.podManager.GetPodsAndMirrorPods()
	cgroupPods := kl.podCgroups() // before the workers are synced, as upstream (kubelet_cm.go)
	if kl.podWorkers == nil {
		var static []*v1.Pod
		for _, p := range pods {
			if kubetypes.IsStaticPod(p) {
				static = append(static, p)
			}
		}
		if err := kubepod.SyncMirrorPods(ctx, kl.mirrorPodClient, static, mirrorPods, kl.out); err != nil {
			klog.ErrorS(err, "Syncing mirror pods failed; will retry")
		}
		return
	}
	workers := kl.podWorkers.SyncKnownPods(pods)
	for uid, name := range kl.known {
		if _, ok := workers[uid]; !ok {
			kl.printf("pod worker %s (uid %s) cleaned up", name, uid)
			delete(kl.known, uid)
			if kl.reasonCache != nil {
				kl.reasonCache.RemovePod(uid) // its start failures go with it
			}
		}
	}
	for _, p := range pods {
		if _, ok := workers[p.UID]; ok {
			kl.known[p.UID] = p.Namespace + "/" + p.Name
		}
	}
	if kl.statusManager != nil { // forget the statuses of pods that are gone
		uids := map[types.UID]bool{}
		for _, p := range pods {
			uids[p.UID] = true
		}
		kl.statusManager.RemoveOrphanedStatuses(uids)
		if kl.probeManager != nil {
			kl.probeManager.CleanupPods(uids) // workers of pods that are gone
		}
	}
	if err := kubepod.DeleteOrphanedMirrorPods(ctx, kl.mirrorPodClient, orphans, kl.out); err != nil {
		klog.ErrorS(err, "Deleting orphaned mirror pods failed; will retry")
	}
	kl.removeOrphanedAllocations(pods)
	kl.retryPendingResizes(ctx)
	kl.cleanupEnded(ctx, pods, workers)
	kl.cleanupPodDirs(ctx, pods)
	kl.cleanupOrphanedPodCgroups(cgroupPods, possiblyRunningPods(workers))
}

// SyncPod would make the pod run: here it says what it would do, and, for a
// static pod, really makes its mirror pod right, as upstream's SyncPod does.
func (kl *Kubelet) SyncPod(ctx context.Context, updateType kubetypes.SyncPodType, pod, mirrorPod *v1.Pod, podStatus *kubecontainer.PodStatus) (bool, error) {
	if kl.containerRuntime != nil {
		return kl.syncPod(ctx, updateType, pod, mirrorPod, podStatus)
	}
	running := 0
	if podStatus != nil {
		running = len(podStatus.GetRunningContainerStatuses())
	}
	kl.printf("syncPod %s %s/%s: would start containers %v (the runtime reports %d running)",
		updateType, pod.Namespace, pod.Name, containerNames(pod), running)
	if kubetypes.IsStaticPod(pod) {
		action, err := kubepod.SyncMirrorPod(ctx, kl.mirrorPodClient, pod, mirrorPod)
		if err != nil {
			return false, err
		}
		if action != kubepod.MirrorUnchanged {
			kl.printf("mirror pod %s/%s %s", pod.Namespace, pod.Name, action)
		}
	}
	return false, nil
}

// SyncTerminatingPod would stop the containers within gracePeriod seconds
// (podStatusFn, the eviction's, applies only when it does).
func (kl *Kubelet) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus, gracePeriod *int64, podStatusFn podworkers.PodStatusFunc) error {
	if kl.containerRuntime != nil {
		return kl.syncTerminatingPod(ctx, pod, podStatus, gracePeriod, podStatusFn)
	}
	kl.printf("syncTerminatingPod %s/%s: would stop containers %v within %ds", pod.Namespace, pod.Name, containerNames(pod), *gracePeriod)
	return nil
}

// SyncTerminatedPod would release volumes and the pod directory (with
// RunContainers and Volumes it does: kubelet_volumes.go). Then, for a
// pod the API server is deleting, it finishes the deletion (grace period 0,
// only this UID), as upstream's status manager does once nothing runs.
func (kl *Kubelet) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus) error {
	if kl.containerRuntime != nil {
		return kl.syncTerminatedPod(ctx, pod, podStatus)
	}
	kl.printf("syncTerminatedPod %s/%s: would clean up volumes and the pod directory", pod.Namespace, pod.Name)
	if kubetypes.IsStaticPod(pod) || pod.DeletionTimestamp == nil {
		return nil
	}
	kl.printf("pod %s/%s: finishing its deletion in the API server (grace period 0)", pod.Namespace, pod.Name)
	var grace int64
	err := kl.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) { // gone, or replaced: done
		return fmt.Errorf("finish deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func containerNames(pod *v1.Pod) []string {
	names := make([]string, 0, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	return names
}
