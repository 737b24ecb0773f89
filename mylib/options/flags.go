package options

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	kubepod "mykubelet/mylib/pod"
	"mykubelet/mylib/server"
	"mykubelet/mylib/statedir"
)

// checkDurations refuses a zero or negative value in any duration flag: each
// is a period or a time-out, and a ticker of zero panics.
func checkDurations(fs *flag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok || err != nil {
			return
		}
		if d, ok := g.Get().(time.Duration); ok && d <= 0 {
			err = fmt.Errorf("--%s must be positive (got %s)", f.Name, f.Value)
		}
	})
	return err
}

// intRange is an int flag that refuses values outside [min, max].
type intRange struct {
	p        *int
	min, max int
}

func (r *intRange) String() string {
	if r.p == nil {
		return "0"
	}
	return strconv.Itoa(*r.p)
}

func (r *intRange) Set(s string) error {
	v, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("not a whole number")
	}
	if v < r.min || v > r.max {
		return fmt.Errorf("must be between %d and %d", r.min, r.max)
	}
	*r.p = v
	return nil
}

// IntRange defines an int flag whose value must lie in [min, max]; a value
// outside is a flag error, before anything is sent anywhere.
func (o *Options) IntRange(name string, value, min, max int, usage string) *int {
	p := new(int)
	*p = value
	o.Flags.Var(&intRange{p: p, min: min, max: max}, name, usage)
	return p
}

// Port defines a TCP port flag (1–65535).
func (o *Options) Port(name string, value int, usage string) *int {
	return o.IntRange(name, value, 1, 65535, usage)
}

// MaxPods defines --max-pods (0 or more, as the kubelet's validation says).
func (o *Options) MaxPods(value int) *int {
	return o.IntRange("max-pods", value, 0, math.MaxInt32, "pods this node can run (capacity pods)")
}

// complete registers f to run in Complete, after the flags are parsed.
func (o *Options) complete(f func() error) { o.completers = append(o.completers, f) }

// PodSources are the flags of the pod sources: the static pod directory,
// how often it is relisted, and how often housekeeping runs.
type PodSources struct {
	// ManifestPath is --pod-manifest-path; Complete defaults it to
	// <state-dir>/manifests and creates it.
	ManifestPath string
	// FileCheckFrequency is --file-check-frequency.
	FileCheckFrequency time.Duration
	// HousekeepingInterval is --housekeeping-interval.
	HousekeepingInterval time.Duration
}

// Default intervals of the pod source flags (upstream's defaults).
const (
	DefaultFileCheckFrequency   = 20 * time.Second
	DefaultHousekeepingInterval = 2 * time.Second
)

// PodSources registers the pod source flags.
func (o *Options) PodSources() *PodSources {
	p := &PodSources{}
	o.Flags.StringVar(&p.ManifestPath, "pod-manifest-path", "", "directory of static pod manifests (default: <state-dir>/"+statedir.ManifestDir+")")
	o.Flags.DurationVar(&p.FileCheckFrequency, "file-check-frequency", DefaultFileCheckFrequency, "how often to relist the manifests even when nothing changed")
	o.Flags.DurationVar(&p.HousekeepingInterval, "housekeeping-interval", DefaultHousekeepingInterval, "how often housekeeping checks mirror pods (and pod workers) against the pods")
	o.complete(func() error {
		if p.ManifestPath == "" {
			p.ManifestPath = statedir.Path(o.StateDir, statedir.ManifestDir)
		}
		return os.MkdirAll(p.ManifestPath, 0o700)
	})
	return p
}

// Runtime are the flags of the container runtime and the PLEG.
type Runtime struct {
	// Endpoint is --container-runtime-endpoint; Complete defaults it to
	// unix://<state-dir>/<runtime socket>.
	Endpoint string
	// Fake is --fake-runtime: serve the mock runtime in this process.
	Fake bool
	// RelistPeriod is --relist-period.
	RelistPeriod time.Duration
}

// Runtime registers the runtime flags; relistPeriod is the default of
// --relist-period.
func (o *Options) Runtime(relistPeriod time.Duration) *Runtime {
	r := &Runtime{}
	o.Flags.StringVar(&r.Endpoint, "container-runtime-endpoint", "", "the CRI socket, unix:///path (default: unix://<state-dir>/"+statedir.RuntimeSocket+")")
	o.Flags.BoolVar(&r.Fake, "fake-runtime", true, "serve the mock CRI runtime on --container-runtime-endpoint in this process; false: connect to a runtime already there (e.g. containerd)")
	o.Flags.DurationVar(&r.RelistPeriod, "relist-period", relistPeriod, "time between two PLEG relists")
	o.complete(func() error {
		if r.Endpoint == "" {
			r.Endpoint = "unix://" + statedir.Path(o.StateDir, statedir.RuntimeSocket)
		}
		return nil
	})
	return r
}

// DebugServer is the flag of the debug server.
type DebugServer struct {
	// Address is --debug-address.
	Address string
}

// DefaultDebugAddress is where the debug server listens by default.
const DefaultDebugAddress = "127.0.0.1:10255"

// DebugServer registers --debug-address.
func (o *Options) DebugServer() *DebugServer {
	d := &DebugServer{}
	o.Flags.StringVar(&d.Address, "debug-address", DefaultDebugAddress, "loopback address of the debug server (/pods, and /podcache/<uid> where there is a pod cache); port 0 picks a free one")
	return d
}

// Listen listens on the debug address, which must be loopback.
func (d *DebugServer) Listen() (net.Listener, error) {
	return server.ListenLoopback("debug-address", d.Address)
}

// NodeClientset is Clientset for a program acting as the node: it also
// checks that the Node is registered, and otherwise names registerCommand,
// the command that registers it; then it puts NodeAnnotations on the Node
// (AnnotateNode), so the Node says which program now acts as it.
func (o *Options) NodeClientset(ctx context.Context, registerCommand string) (*kubernetes.Clientset, error) {
	cs, _, err := o.Clientset(ctx)
	if err != nil {
		return nil, err
	}
	if err := kubepod.CheckNodeRegistered(ctx, cs, o.NodeName); err != nil {
		if errors.Is(err, kubepod.ErrNodeNotRegistered) {
			return nil, fmt.Errorf("%w: run `%s --node-name %s` first", err, registerCommand, o.NodeName)
		}
		return nil, err
	}
	if err := o.AnnotateNode(ctx, cs); err != nil {
		return nil, err
	}
	return cs, nil
}

// ChapterAnnotation on a Node names the program that last registered it or
// acted as it: the program's name, which is its directory's (e.g.
// "04-register-node"). An instructor's status view (scripts/classroom)
// reads it to see how far along each learner's node is.
const ChapterAnnotation = "mykubelet.dev/chapter"

// NodeAnnotations are the annotations this program puts on its Node:
// ChapterAnnotation, the program's name. A program that registers the node
// gives them to kubelet.NodeConfig.Annotations; one that only acts as an
// already registered node gets them written by NodeClientset.
func (o *Options) NodeAnnotations() map[string]string {
	return map[string]string{ChapterAnnotation: o.Flags.Name()}
}

// AnnotateNode writes NodeAnnotations onto the Node named --node-name with
// a merge patch of its metadata, replacing what an earlier program wrote
// there. A node's own credentials may do it: the Node authorizer lets a
// node patch its own Node, and NodeRestriction restricts only some of its
// labels, not its annotations. A patch that changes nothing is not stored.
func (o *Options) AnnotateNode(ctx context.Context, cs kubernetes.Interface) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": o.NodeAnnotations()}})
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Nodes().Patch(ctx, o.NodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("annotate node %s: %w", o.NodeName, err)
	}
	return nil
}

// NodeNameFromKubeconfig returns <name> when the kubeconfig at path
// authenticates with a client certificate for system:node:<name>, and ""
// when it uses anything else. An unreadable kubeconfig is an error.
func NodeNameFromKubeconfig(path string) (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return "", fmt.Errorf("load kubeconfig %s: %w", path, err)
	}
	data := cfg.CertData
	if len(data) == 0 && cfg.CertFile != "" {
		if data, err = os.ReadFile(cfg.CertFile); err != nil {
			return "", fmt.Errorf("kubeconfig %s: client certificate: %w", path, err)
		}
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return "", nil // no client certificate: a token, say
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", fmt.Errorf("kubeconfig %s: client certificate: %w", path, err)
	}
	name, ok := strings.CutPrefix(cert.Subject.CommonName, "system:node:")
	if !ok {
		return "", nil
	}
	return name, nil
}
