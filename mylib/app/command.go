package app

// NewKubeletCommand and its flags, after upstream's
// cmd/kubelet/app/server.go (NewKubeletCommand) and options.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/kubeletconfig"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/options"
	"mykubelet/mylib/signals"
	"mykubelet/mylib/statedir"
)

// componentKubelet is the capstone's name, in its messages and --help
// (upstream's componentKubelet is "kubelet").
const componentKubelet = "mykubelet"

// courseFlagsHelp ends --help, as upstream's command's Long text opens it:
// the flags upstream's kubelet does not have.
const courseFlagsHelp = `
The course's own flags, which upstream's kubelet does not have: --state-dir, --fake-runtime and --pod-cidr (the mock runtime), --host-path-root,
--fake-memory-capacity, --fake-nodefs-capacity and --fake-imagefs-capacity (the mock machine), --image-gc-period,
--minimum-image-gc-age (another name for --minimum-image-ttl-duration) and --max-parallel-image-pulls (upstream: the field only).
The other eviction and image flags (--eviction-hard, --image-gc-high-threshold…) are upstream's, set as the KubeletConfiguration's fields.
`

// KubeletCommand is upstream's cobra command in small: the flag set, and
// what its flags land in.
type KubeletCommand struct {
	chapter string
	fs      *flag.FlagSet
	flags   *kubeletconfig.Flags
	// --root-dir, and options of this program that upstream's kubelet does not have.
	rootDir      string
	fakeRuntime  bool
	podCIDR      string
	hostPathRoot string
	// The mock machine's size and the image GC period (AddMockMachineFlags).
	mock *MockMachineFlags
}

// NewKubeletCommand registers upstream's flags (mylib/kubeletconfig) and
// the course's own (--root-dir's second name --state-dir, the mock
// runtime's and the mock machine's), with klog's -v and -vmodule. chapter
// names the program on its Node (options.ChapterAnnotation).
func NewKubeletCommand(chapter string) *KubeletCommand {
	c := &KubeletCommand{chapter: chapter, fs: flag.NewFlagSet(componentKubelet, flag.ContinueOnError)}
	c.flags = kubeletconfig.AddFlags(c.fs)
	c.fs.Lookup("node-ip").Usage = "the node's InternalIP, the address the API server dials and the serving certificate's IP (default 127.0.0.1)"
	c.fs.StringVar(&c.rootDir, "root-dir", statedir.Default(), "the kubelet's root directory; the default of --kubeconfig ("+statedir.NodeKubeconfig+"), --bootstrap-kubeconfig ("+statedir.BootstrapKubeconfig+") and --cert-dir (pki) is in it; $"+statedir.EnvVar+" sets its default")
	c.fs.StringVar(&c.rootDir, "state-dir", statedir.Default(), "the course's name for --root-dir (the state directory of every chapter)")
	c.fs.BoolVar(&c.fakeRuntime, "fake-runtime", true, "serve the mock CRI runtime in this process (on unix://<root-dir>/"+statedir.RuntimeSocket+" unless --container-runtime-endpoint says where); false: connect to the runtime at --container-runtime-endpoint")
	c.fs.StringVar(&c.hostPathRoot, "host-path-root", "", "where a hostPath volume's path is found; by default <root-dir>/host with the mock runtime (its pods never reach the machine's own files), and / with another runtime (the machine's own path, as upstream)")
	c.fs.StringVar(&c.podCIDR, "pod-cidr", fakeruntime.DefaultPodCIDR, "the in-process mock runtime's pod IPs, in a network namespace of its own when it can make one")
	c.mock = AddMockMachineFlags(c.fs)
	options.AddKlogFlags(c.fs)
	c.fs.Usage = func() {
		fmt.Fprintf(c.fs.Output(), "Usage of %s:\n", componentKubelet)
		c.fs.PrintDefaults()
		fmt.Fprint(c.fs.Output(), courseFlagsHelp)
	}
	return c
}

// Execute parses args, reads the configuration and runs the kubelet until
// Ctrl-C (upstream: the command's RunE, then Run). It returns the exit
// code: 0, 2 for bad flags, 1 for anything else (a bad --config file
// among them), each error one line on stderr.
func (c *KubeletCommand) Execute(args []string) int {
	c.fs.SetOutput(io.Discard)
	err := c.fs.Parse(args)
	c.fs.SetOutput(os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.fs.SetOutput(os.Stdout)
		c.fs.Usage()
		return 0
	case err == nil && c.fs.NArg() > 0:
		err = fmt.Errorf("unexpected argument %q (all options are flags)", c.fs.Arg(0))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v (see --help)\n", componentKubelet, err)
		return 2
	}
	defer klog.Flush()
	s, err := c.complete()
	if err == nil {
		err = run(signals.SetupSignalContext(), s)
	}
	if err != nil {
		klog.Flush()
		fmt.Fprintf(os.Stderr, "%s: error: %v\n", componentKubelet, err)
		return 1
	}
	return 0
}

// complete reads the KubeletConfiguration (file, defaults, flags over
// file), fills in the defaults that depend on the root directory, and
// turns on every part of the kubelet the course built: the capstone's
// KubeletServer.
func (c *KubeletCommand) complete() (*KubeletServer, error) {
	kc, err := c.flags.KubeletConfiguration()
	if err != nil {
		return nil, err
	}
	f := *c.flags
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&f.Kubeconfig, statedir.Path(c.rootDir, statedir.NodeKubeconfig))
	def(&f.BootstrapKubeconfig, statedir.Path(c.rootDir, statedir.BootstrapKubeconfig))
	def(&f.CertDir, statedir.Path(c.rootDir, "pki"))
	def(&kc.PodLogsDir, statedir.Path(c.rootDir, "pod-logs"))
	nodeName := strings.ToLower(f.HostnameOverride)
	def(&nodeName, options.DefaultNodeName())
	if errs := validation.IsDNS1123Subdomain(nodeName); len(errs) > 0 {
		return nil, fmt.Errorf("node name %q (--hostname-override, or the hostname) is not valid: %s", nodeName, strings.Join(errs, "; "))
	}
	if f.NodeIP == nil {
		f.NodeIP = net.IPv4(127, 0, 0, 1)
	}
	if c.fakeRuntime && c.hostPathRoot != "" && filepath.Clean(c.hostPathRoot) == "/" {
		return nil, errors.New("--host-path-root /: the mock runtime's pods never reach the machine's own files (give it a directory of its own, or run a real runtime: --fake-runtime=false)")
	}
	if c.fakeRuntime && kc.ContainerRuntimeEndpoint == kubeletconfig.DefaultContainerRuntimeEndpoint {
		kc.ContainerRuntimeEndpoint = "unix://" + statedir.Path(c.rootDir, statedir.RuntimeSocket)
	}
	// Every part the course turned on: the runtime's containers, their
	// GC, activeDeadlineSeconds, probes, admission, log rotation, the
	// volume manager and the containers' mounts, the stats provider and
	// the kubelet's series on its API, the eviction manager and image GC
	// over the mock machine the --fake-* flags size; the probes may reach
	// the mock runtime's pod network, and only loopback with a runtime of
	// its own.
	gc := kuberuntime.DefaultGCPolicy()
	s := &KubeletServer{ConfigFile: f.ConfigFile, BootstrapKubeconfig: f.BootstrapKubeconfig,
		KubeletConfiguration: kc, Kubeconfig: f.Kubeconfig, CertDirectory: f.CertDir,
		FakeRuntime: c.fakeRuntime, PodNetwork: c.fakeRuntime, PodCIDR: c.podCIDR, EnableServer: true, Stats: true,
		MainOptions: kubelet.MainOptions{NodeName: nodeName, NodeIP: f.NodeIP, RootDirectory: c.rootDir, HostPathRoot: c.hostPathRoot,
			Annotations:   map[string]string{options.ChapterAnnotation: c.chapter},
			RunContainers: true, ContainerGC: &gc, ActiveDeadline: true, Probes: true, Admit: true, ContainerLogRotation: true,
			Volumes: true, Eviction: true,
			// Unlike upstream, to start a burst of pods faster (upstream's
			// kubeAPIQPS 50 is the limit): the status manager writes 4 pods
			// at a time, and holds a new pod's ContainerCreating status back
			// for up to a second, so that a pod started within it gets one
			// status write (Running), not two. What the pod shows in the end
			// is the same (mylib/status, Config.CreatingStatusDelay). And it
			// reads the runtime's container events, as upstream's EventedPLEG
			// feature gate would (off there by default), to see a started
			// container at once, not at the next relist (mylib/pleg).
			StatusWriters: 4, CreatingStatusDelay: time.Second, EventedPLEG: true},
	}
	c.mock.Apply(s)
	return s, os.MkdirAll(c.rootDir, 0o700)
}
