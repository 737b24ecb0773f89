// Package options holds the flags every chapter shares, so that each one
// accepts the same --kubeconfig, --node-name, --state-dir and klog's -v, and
// fails the same way: one clear line and a non-zero exit.
//
// A chapter's main looks like this:
//
//	o := options.New("01-node-lease")
//	ttl := o.Flags.Duration("ttl", 24*time.Hour, "…") // the chapter's own flags
//	o.Main(os.Args[1:], func(ctx context.Context) error { … })
package options

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"mykubelet/mylib/signals"
	"mykubelet/mylib/statedir"
)

// Options are the flags shared by every chapter.
type Options struct {
	// Kubeconfig is an explicit kubeconfig path. Empty means clientcmd's
	// default loading rules: $KUBECONFIG, then ~/.kube/config.
	Kubeconfig string
	// NodeName is the name of the Node this agent speaks for. It defaults to
	// the hostname, lower-cased, as the kubelet's --hostname-override does.
	NodeName string
	// StateDir holds generated keys, certificates and kubeconfigs (mode 0600).
	StateDir string

	// Flags is the chapter's flag set; add the chapter's own flags to it
	// before calling Parse or Main.
	Flags *flag.FlagSet
}

// New returns Options with their flags registered on a new flag set named
// after the program.
func New(program string) *Options {
	o := &Options{
		NodeName: DefaultNodeName(),
		StateDir: statedir.Default(),
		Flags:    flag.NewFlagSet(program, flag.ContinueOnError),
	}
	o.Flags.StringVar(&o.Kubeconfig, "kubeconfig", "", "path to a kubeconfig; default: $KUBECONFIG, then ~/.kube/config")
	o.Flags.StringVar(&o.NodeName, "node-name", o.NodeName, "name of the Node this agent registers (default: the hostname)")
	o.Flags.StringVar(&o.StateDir, "state-dir", o.StateDir, "directory for generated keys, certificates and kubeconfigs (git-ignored, mode 0600); $"+statedir.EnvVar+" sets the default")
	klog.InitFlags(o.Flags) // -v, --logtostderr, …
	return o
}

// DefaultNodeName is the hostname, lower-cased and trimmed, like the
// kubelet's GetHostname.
func DefaultNodeName() string {
	h, err := os.Hostname()
	if err != nil {
		return "mykubelet-node"
	}
	return strings.ToLower(strings.TrimSpace(h))
}

// Parse parses args and checks the shared flags. Errors are meant to be
// printed as one line.
func (o *Options) Parse(args []string) error {
	o.Flags.SetOutput(os.Stderr)
	if err := o.Flags.Parse(args); err != nil {
		return err
	}
	if o.Flags.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (all options are flags; see -h)", o.Flags.Arg(0))
	}
	if errs := validation.IsDNS1123Subdomain(o.NodeName); len(errs) > 0 {
		return fmt.Errorf("--node-name %q is not a valid node name: %s", o.NodeName, strings.Join(errs, "; "))
	}
	return nil
}

// Main parses args, builds the signal-aware context (first Ctrl-C cancels,
// second exits) and calls run. Any error ends the program with one line on
// stderr: exit code 2 for bad flags, 1 for everything else.
func (o *Options) Main(args []string, run func(ctx context.Context) error) {
	if err := o.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "%s: %v\n", o.Flags.Name(), err)
		os.Exit(2)
	}
	defer klog.Flush()
	ctx := signals.SetupSignalContext()
	if err := run(ctx); err != nil {
		klog.Flush()
		fmt.Fprintf(os.Stderr, "%s: error: %v\n", o.Flags.Name(), err)
		os.Exit(1)
	}
}

// ErrNoKubeconfig says where a kubeconfig can come from.
var ErrNoKubeconfig = errors.New("no kubeconfig found: pass --kubeconfig, set KUBECONFIG, or start the local cluster with `scripts/cluster.sh up` and run `eval \"$(scripts/cluster.sh env)\"`")

// RESTConfig loads the kubeconfig with clientcmd's loading rules: --kubeconfig,
// then $KUBECONFIG, then ~/.kube/config.
func (o *Options) RESTConfig() (*rest.Config, error) {
	return LoadRESTConfig(o.Kubeconfig)
}

// LoadRESTConfig loads a kubeconfig with clientcmd's loading rules; an explicit
// path, when given, wins.
func LoadRESTConfig(explicitPath string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = explicitPath
	if explicitPath != "" {
		if _, err := os.Stat(explicitPath); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", explicitPath, err)
		}
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, ErrNoKubeconfig
		}
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return cfg, nil
}

// Clientset loads the kubeconfig and checks that the API server answers, so
// that an unreachable server is reported once, clearly, before any work.
func (o *Options) Clientset(ctx context.Context) (*kubernetes.Clientset, *rest.Config, error) {
	cfg, err := o.RESTConfig()
	if err != nil {
		return nil, nil, err
	}
	cs, err := NewCheckedClientset(ctx, cfg)
	return cs, cfg, err
}

// NewCheckedClientset returns a clientset for cfg after asking the API server
// for /version, with a 10 s limit.
func NewCheckedClientset(ctx context.Context, cfg *rest.Config) (*kubernetes.Clientset, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cs.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw(); err != nil {
		return nil, fmt.Errorf("cannot reach the API server at %s: %w", cfg.Host, err)
	}
	return cs, nil
}

// UseNodeKubeconfig makes the node's own kubeconfig, written by chapter 03
// into the state directory, the default when --kubeconfig is not given, so
// that the agent acts with the node's credentials (system:node:<name>) and the
// Node authorizer and NodeRestriction apply to it. Call it after Parse.
func (o *Options) UseNodeKubeconfig() {
	if o.Kubeconfig != "" {
		return
	}
	if p := statedir.Path(o.StateDir, statedir.NodeKubeconfig); fileExists(p) {
		o.Kubeconfig = p
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
