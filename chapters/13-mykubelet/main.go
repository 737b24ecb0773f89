// mykubelet: one program, started the way the real kubelet is, that joins a cluster with a bootstrap token and runs its pods.
//
// The order is upstream's cmd/kubelet: main calls NewKubeletCommand (the
// flags and the --config file, flags over file), whose Execute calls run
// (server.go: the client certificate from the bootstrap kubeconfig when the
// node's is missing or expired, certificate rotation, the serving
// certificate: this program's lines; then mylib/app's clients and
// container runtime), which calls app.RunKubelet (the pod sources, the
// events, kubelet.NewMainKubelet, the kubelet API), which calls
// Kubelet.Run: registration, Lease, status, PLEG, pod workers, sync loop.
// Everything chapters 04 to 12 and 15 to 18 built, in one process.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"mykubelet/mylib/app"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/kubeletconfig"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/options"
	"mykubelet/mylib/signals"
	"mykubelet/mylib/statedir"
)

const program = "mykubelet"

func main() {
	os.Exit(NewKubeletCommand().Execute(os.Args[1:]))
}

// KubeletCommand is upstream's cobra command in small: the flag set, and
// what its flags land in.
type KubeletCommand struct {
	fs    *flag.FlagSet
	flags *kubeletconfig.Flags
	// --root-dir, and options of this program that upstream's kubelet does not have.
	rootDir     string
	fakeRuntime bool
	podCIDR     string
	// The mock machine's size and the image GC period (app.AddMockMachineFlags).
	mock *app.MockMachineFlags
}

// KubeletServer is mylib/app's, plus what only this program's run reads:
// the --config file's name and the bootstrap kubeconfig.
type KubeletServer struct {
	*app.KubeletServer
	ConfigFile, BootstrapKubeconfig string
}

// NewKubeletCommand registers upstream's flags (mylib/kubeletconfig) and
// this program's own.
func NewKubeletCommand() *KubeletCommand {
	c := &KubeletCommand{fs: flag.NewFlagSet(program, flag.ContinueOnError)}
	c.flags = kubeletconfig.AddFlags(c.fs)
	c.fs.Lookup("node-ip").Usage = "the node's InternalIP, the address the API server dials and the serving certificate's IP (default 127.0.0.1)"
	c.fs.StringVar(&c.rootDir, "root-dir", statedir.Default(), "the kubelet's root directory; the default of --kubeconfig ("+statedir.NodeKubeconfig+"), --bootstrap-kubeconfig ("+statedir.BootstrapKubeconfig+") and --cert-dir (pki) is in it; $"+statedir.EnvVar+" sets its default")
	c.fs.StringVar(&c.rootDir, "state-dir", statedir.Default(), "the course's name for --root-dir (the state directory of every chapter)")
	c.fs.BoolVar(&c.fakeRuntime, "fake-runtime", true, "serve the mock CRI runtime in this process (on unix://<root-dir>/"+statedir.RuntimeSocket+" unless --container-runtime-endpoint says where); false: connect to the runtime at --container-runtime-endpoint")
	c.fs.StringVar(&c.podCIDR, "pod-cidr", fakeruntime.DefaultPodCIDR, "the in-process mock runtime's pod IPs, in a network namespace of its own when it can make one")
	c.mock = app.AddMockMachineFlags(c.fs)
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	for _, name := range []string{"v", "vmodule"} {
		f := klogFlags.Lookup(name)
		c.fs.Var(f.Value, f.Name, f.Usage)
	}
	return c
}

// Execute parses args, reads the configuration and runs the kubelet until
// Ctrl-C. It returns the exit code: 0, 2 for bad flags, 1 for anything
// else (a bad --config file among them), each error one line on stderr.
func (c *KubeletCommand) Execute(args []string) int {
	c.fs.SetOutput(io.Discard)
	err := c.fs.Parse(args)
	c.fs.SetOutput(os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.fs.SetOutput(os.Stdout)
		fmt.Printf("Usage of %s:\n", program)
		c.fs.PrintDefaults()
		fmt.Println("\nThe course's own flags, which upstream's kubelet does not have: --state-dir, --fake-runtime and --pod-cidr (the mock runtime),")
		fmt.Println("--fake-memory-capacity, --fake-nodefs-capacity and --fake-imagefs-capacity (the mock machine), --image-gc-period,")
		fmt.Println("--minimum-image-gc-age (another name for --minimum-image-ttl-duration) and --max-parallel-image-pulls (upstream: the field only).")
		fmt.Println("The other eviction and image flags (--eviction-hard, --image-gc-high-threshold…) are upstream's, set as the KubeletConfiguration's fields.")
		return 0
	case err == nil && c.fs.NArg() > 0:
		err = fmt.Errorf("unexpected argument %q (all options are flags)", c.fs.Arg(0))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v (see --help)\n", program, err)
		return 2
	}
	defer klog.Flush()
	s, err := c.complete()
	if err == nil {
		err = run(signals.SetupSignalContext(), s)
	}
	if err != nil {
		klog.Flush()
		fmt.Fprintf(os.Stderr, "%s: error: %v\n", program, err)
		return 1
	}
	return 0
}

// complete reads the KubeletConfiguration (file, defaults, flags over
// file), fills in the defaults that depend on the root directory, and
// turns on every part of the kubelet that chapters 09 to 12 and 15 to 18 built.
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
	if c.fakeRuntime && kc.ContainerRuntimeEndpoint == kubeletconfig.DefaultContainerRuntimeEndpoint {
		kc.ContainerRuntimeEndpoint = "unix://" + statedir.Path(c.rootDir, statedir.RuntimeSocket)
	}
	// Every part chapters 09 to 12 and 15 to 17 turned on (15: the volume
	// manager and the containers' mounts; 16: the stats provider and the
	// kubelet's series on its API; 17: the eviction manager and image GC,
	// over the mock machine the --fake-* flags size); the probes may reach the
	// mock runtime's pod network, and only loopback with a runtime of its own.
	gc := kuberuntime.DefaultGCPolicy()
	s := &KubeletServer{ConfigFile: f.ConfigFile, BootstrapKubeconfig: f.BootstrapKubeconfig, KubeletServer: &app.KubeletServer{
		KubeletConfiguration: kc, Kubeconfig: f.Kubeconfig, CertDirectory: f.CertDir,
		FakeRuntime: c.fakeRuntime, PodNetwork: c.fakeRuntime, PodCIDR: c.podCIDR, EnableServer: true, Stats: true,
		MainOptions: kubelet.MainOptions{NodeName: nodeName, NodeIP: f.NodeIP, RootDirectory: c.rootDir,
			Annotations:   map[string]string{options.ChapterAnnotation: "13-mykubelet"},
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
	}}
	c.mock.Apply(s.KubeletServer)
	return s, os.MkdirAll(c.rootDir, 0o700)
}
