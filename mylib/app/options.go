package app

import (
	"fmt"
	"net"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/kubeletconfig"
	"mykubelet/mylib/nodestatus"
	"mykubelet/mylib/options"
	"mykubelet/mylib/pleg"
	"mykubelet/mylib/statedir"
)

// KubeletServer is upstream's options.KubeletServer: the flags that are
// not configuration, the KubeletConfiguration, and the course's own
// options.
type KubeletServer struct {
	// KubeletConfiguration, defaulted (kubeletconfig.SetDefaults): the
	// static pod path, the runtime endpoint, the rates, maxPods, the port,
	// podLogsDir, the client CA file, the containerLog* fields, the
	// eviction thresholds, the image GC policy and the pulls.
	KubeletConfiguration *kubeletv1beta1.KubeletConfiguration
	// Kubeconfig holds the node's credentials (Run loads it).
	Kubeconfig string
	// BootstrapKubeconfig and ConfigFile are the capstone's (run's):
	// the bootstrap token's kubeconfig, which gets the node a client
	// certificate when Kubeconfig's is missing or expired, and the
	// --config file the KubeletConfiguration was read from ("": none).
	BootstrapKubeconfig, ConfigFile string
	// CertDirectory is where the kubelet API's serving certificate goes
	// (the kubelet's --cert-dir).
	CertDirectory string
	// MainOptions: the node name and IP, the root directory (--root-dir),
	// and the parts of the kubelet this program turns on. Its Eviction
	// (which turns Admit on too) runs the eviction manager and the image
	// GC manager over the stats provider Run builds
	// (Dependencies.StatsProvider, the one the kubelet API serves with
	// Stats), by the KubeletConfiguration's eviction* and image* fields,
	// on the machine MockMachine sizes; NodePressureFlags.Apply sets them
	// from the command line.
	kubelet.MainOptions

	// The course's options. FakeRuntime serves the mock runtime in this
	// process on the runtime endpoint; PodNetwork gives it a network
	// namespace with PodCIDR's addresses, which the probes may then reach
	// (without FakeRuntime: the runtime's own pod network).
	FakeRuntime, PodNetwork bool
	PodCIDR                 string
	// ControlAddress is the mock runtime's control API, a unix socket; ""
	// means none.
	ControlAddress string
	// EnableServer serves the kubelet API (mylib/server); without
	// Dependencies.TLSOptions it first asks for a serving certificate and
	// waits ServingCertTimeout for its approval.
	EnableServer       bool
	ServingCertTimeout time.Duration
	// Stats measures: the kubelet records its series as it runs
	// (Dependencies.Metrics), and with EnableServer the kubelet API
	// serves /stats/summary, /metrics/resource (what metrics-server reads
	// for `kubectl top` and the HPA), /metrics, /metrics/probes, /configz,
	// and /healthz with the syncloop and pleg checks.
	Stats bool
	// Banner is printed after the line that says the kubelet runs: what
	// this program adds, in a line or two; "" prints nothing more.
	Banner string
}

// Flags are the flags of a kubelet program of the course (mylib/options):
// the pod sources, the runtime, --max-pods, --node-ip, --pod-logs-dir,
// --node-status-max-images.
type Flags struct {
	o         *options.Options
	sources   *options.PodSources
	runtime   *options.Runtime
	maxPods   *int
	nodeIP    net.IP
	podLogs   string
	maxImages int32
}

// AddFlags registers the kubelet's flags on o (a program acting as the
// node: options.UseNodeKubeconfig). nodeIP is --node-ip's default: nil,
// the address of the interface with the default route; a program that
// serves the kubelet API gives the address the API server dials.
func AddFlags(o *options.Options, nodeIP net.IP) *Flags {
	f := &Flags{o: o, sources: o.PodSources(), runtime: o.Runtime(pleg.RelistPeriod), maxPods: o.MaxPods(nodestatus.DefaultMaxPods), nodeIP: nodeIP}
	usage := "the node's InternalIP, the pods' hostIP (default: the address of the interface with the default route)"
	if nodeIP != nil {
		usage = "the node's InternalIP: the API server dials the kubelet there, and it is the serving certificate's IP"
	}
	o.Flags.TextVar(&f.nodeIP, "node-ip", nodeIP, usage)
	o.Flags.StringVar(&f.podLogs, "pod-logs-dir", "", "where containers' logs go (default: <state-dir>/pod-logs)")
	f.maxImages = kubeletconfig.DefaultNodeStatusMaxImages
	o.Flags.Func("node-status-max-images", fmt.Sprintf("the most images node.status.images lists, largest first; -1: no cap (default %d)", kubeletconfig.DefaultNodeStatusMaxImages), func(s string) error {
		n, err := kubeletconfig.ParseNodeStatusMaxImages(s)
		f.maxImages = n
		return err
	})
	return f
}

// KubeletServer is what the flags say, once parsed and completed (in the
// function options.Main runs): the KubeletConfiguration with its defaults
// and the flags over them, the node's name, its annotation, the state
// directory as the root directory. The program then turns on its parts
// (RunContainers is on) and calls Run.
func (f *Flags) KubeletServer() *KubeletServer {
	kc := &kubeletv1beta1.KubeletConfiguration{StaticPodPath: f.sources.ManifestPath,
		FileCheckFrequency:       metav1.Duration{Duration: f.sources.FileCheckFrequency},
		ContainerRuntimeEndpoint: f.runtime.Endpoint, MaxPods: int32(*f.maxPods), PodLogsDir: f.podLogs,
		NodeStatusMaxImages: ptr.To(f.maxImages)}
	if kc.PodLogsDir == "" {
		kc.PodLogsDir = statedir.Path(f.o.StateDir, "pod-logs")
	}
	kubeletconfig.SetDefaults(kc)
	kc.Address = "" // the kubelet API listens on the node's IP only
	return &KubeletServer{KubeletConfiguration: kc, Kubeconfig: f.o.Kubeconfig, FakeRuntime: f.runtime.Fake,
		CertDirectory: statedir.Path(f.o.StateDir, "pki"),
		MainOptions: kubelet.MainOptions{NodeName: f.o.NodeName, NodeIP: f.nodeIP, RootDirectory: f.o.StateDir,
			Annotations: f.o.NodeAnnotations(), RelistPeriod: f.runtime.RelistPeriod,
			HousekeepingPeriod: f.sources.HousekeepingInterval, RunContainers: true}}
}
