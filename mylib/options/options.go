// Package options holds the flags every chapter shares, so that each one
// accepts the same --kubeconfig, --node-name, --state-dir and klog's -v, and
// fails the same way: one clear line and a non-zero exit.
//
// A chapter's main looks like this:
//
//	o := options.New("01-node-lease")
//	ttl := o.Flags.Duration("ttl", 24*time.Hour, "…") // the chapter's own flags
//	o.Main(os.Args[1:], func(ctx context.Context) error { … })
//
// Flags several chapters share are defined once, in groups (flags.go):
// PodSources, Runtime and DebugServer. Every duration flag must be positive:
// Parse refuses zero and negative values in one line.
//
// Chapters that act as the node call UseNodeKubeconfig: they use the node's
// own kubeconfig from the state directory (written by the TLS bootstrap),
// never $KUBECONFIG; --kubeconfig is the way to use another one on purpose.
package options

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	// default loading rules: $KUBECONFIG, then ~/.kube/config; with
	// UseNodeKubeconfig, the node's own kubeconfig in the state directory.
	Kubeconfig string
	// NodeName is the name of the Node this agent speaks for. It defaults to
	// the node kubeconfig's identity (system:node:<name>) when one is used,
	// else to the hostname, lower-cased, as the kubelet's --hostname-override
	// does.
	NodeName string
	// StateDir holds generated keys, certificates and kubeconfigs (mode 0600).
	StateDir string

	// Flags is the chapter's flag set; add the chapter's own flags to it
	// before calling Parse or Main.
	Flags *flag.FlagSet

	// nodeBootstrap, when set, is the command that writes the node
	// kubeconfig (see UseNodeKubeconfig).
	nodeBootstrap string
	// completers fill in defaults that depend on other flags (flags.go).
	completers []func() error
}

// New returns Options with their flags registered on a new flag set named
// after the program.
func New(program string) *Options {
	o := &Options{
		StateDir: statedir.Default(),
		Flags:    flag.NewFlagSet(program, flag.ContinueOnError),
	}
	o.Flags.StringVar(&o.Kubeconfig, "kubeconfig", "", "path to a kubeconfig; default: $KUBECONFIG, then ~/.kube/config")
	o.Flags.StringVar(&o.NodeName, "node-name", "", "name of the Node this agent speaks for (default: the hostname)")
	o.Flags.StringVar(&o.StateDir, "state-dir", o.StateDir, "directory for generated keys, certificates and kubeconfigs (git-ignored, mode 0600); $"+statedir.EnvVar+" sets the default")
	AddKlogFlags(o.Flags)
	o.Flags.Usage = func() {
		fmt.Fprintf(o.Flags.Output(), "Usage of %s:\n", o.Flags.Name())
		o.Flags.PrintDefaults()
	}
	return o
}

// UseNodeKubeconfig makes this program act as the node: unless --kubeconfig
// is given, it uses the node's own kubeconfig in the state directory, so that
// the Node authorizer and NodeRestriction apply to it, and --node-name
// defaults to the name in its certificate. When that kubeconfig is missing,
// the error names bootstrapCommand, the command that writes it. Call it
// before Parse or Main.
func (o *Options) UseNodeKubeconfig(bootstrapCommand string) {
	o.nodeBootstrap = bootstrapCommand
	o.Flags.Lookup("kubeconfig").Usage = "path to a kubeconfig to use instead of the node's own (default: <state-dir>/" + statedir.NodeKubeconfig + "; $KUBECONFIG is not read)"
	o.Flags.Lookup("node-name").Usage = "name of the Node this agent speaks for (default: the name in the node kubeconfig's certificate, system:node:<name>, else the hostname)"
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

// Parse parses args and checks the shared flags and every duration flag.
// Errors are meant to be printed as one line; the flag package prints
// nothing itself.
func (o *Options) Parse(args []string) error {
	o.Flags.SetOutput(io.Discard)
	if err := o.Flags.Parse(args); err != nil {
		return err
	}
	o.Flags.SetOutput(os.Stderr)
	if o.Flags.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (all options are flags)", o.Flags.Arg(0))
	}
	if err := checkDurations(o.Flags); err != nil {
		return err
	}
	if o.NodeName != "" {
		if errs := validation.IsDNS1123Subdomain(o.NodeName); len(errs) > 0 {
			return fmt.Errorf("--node-name %q is not a valid node name: %s", o.NodeName, strings.Join(errs, "; "))
		}
	}
	return nil
}

// Complete fills in what the flags left to defaults: the node kubeconfig
// (with UseNodeKubeconfig) and the node name. Main calls it after Parse.
func (o *Options) Complete() error {
	if o.nodeBootstrap != "" {
		if o.Kubeconfig == "" {
			o.Kubeconfig = statedir.Path(o.StateDir, statedir.NodeKubeconfig)
			if _, err := os.Stat(o.Kubeconfig); errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("no node kubeconfig at %s: run `%s` first, or pass --kubeconfig to use another one", o.Kubeconfig, o.nodeBootstrap)
			}
		}
		if o.NodeName == "" {
			name, err := NodeNameFromKubeconfig(o.Kubeconfig)
			if err != nil {
				return err
			}
			o.NodeName = name
		}
	}
	if o.NodeName == "" {
		o.NodeName = DefaultNodeName()
	}
	for _, f := range o.completers {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// Main parses args, builds the signal-aware context (first Ctrl-C cancels,
// second exits) and calls run. Any error ends the program with one line on
// stderr: exit code 2 for bad flags, 1 for everything else.
func (o *Options) Main(args []string, run func(ctx context.Context) error) {
	if err := o.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			o.Flags.SetOutput(os.Stdout)
			o.Flags.Usage()
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "%s: %v (see --help)\n", o.Flags.Name(), err)
		os.Exit(2)
	}
	defer klog.Flush()
	err := o.Complete()
	if err == nil {
		err = run(signals.SetupSignalContext())
	}
	if err != nil {
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
// path, when given, wins. A path that does not exist, given explicitly or as
// the only file in $KUBECONFIG, is reported as such.
func LoadRESTConfig(explicitPath string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = explicitPath
	if explicitPath != "" {
		if _, err := os.Stat(explicitPath); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", explicitPath, err)
		}
	} else if err := checkEnvKubeconfig(); err != nil {
		return nil, err
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

// checkEnvKubeconfig fails when $KUBECONFIG is set and none of its files
// exists: clientcmd would skip them silently and say "no configuration".
func checkEnvKubeconfig() error {
	env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	var paths []string
	for _, p := range strings.Split(env, string(os.PathListSeparator)) {
		if p != "" {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return nil
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return nil
		}
	}
	_, err := os.Stat(paths[0])
	return fmt.Errorf("kubeconfig %s (from $KUBECONFIG): %w", env, errors.Unwrap(err))
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
	_, err = cs.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	switch {
	case apierrors.IsUnauthorized(err): // it answered: the credentials are the problem
		return nil, fmt.Errorf("the API server at %s refused our credentials (expired or revoked?): %w", cfg.Host, err)
	case err != nil:
		return nil, fmt.Errorf("cannot reach the API server at %s: %w", cfg.Host, err)
	}
	return cs, nil
}

// AddKlogFlags adds klog's -v and -vmodule to fs. Of klog's flags, only
// the verbosity: the rest would fill --help.
func AddKlogFlags(fs *flag.FlagSet) {
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	for _, name := range []string{"v", "vmodule"} {
		f := klogFlags.Lookup(name)
		fs.Var(f.Value, f.Name, f.Usage)
	}
}
