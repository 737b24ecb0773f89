package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"mykubelet/mylib/bootstraptoken"
	"mykubelet/mylib/signals"
	"mykubelet/mylib/statedir"
)

const usage = `usage: classroom [--kubeconfig PATH] [--state-dir DIR] COMMAND
  issue NAME…              one bootstrap token and kubeconfig per learner
  issue --count N          for learner-01 … learner-NN
  issue --ttl 48h …        how long the tokens stay valid (default 24h; before the names)
  revoke [NAME…]           delete their tokens (every learner's without NAME)
  status                   every learner's node: Ready, chapter, pods running`

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "classroom:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("classroom", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprintln(fs.Output(), usage) }
	kubeconfig := fs.String("kubeconfig", "", "an admin kubeconfig (default: $KUBECONFIG, then ~/.kube/config)")
	stateDir := fs.String("state-dir", statedir.Default(), "where the roster and the bootstrap kubeconfigs go (git-ignored)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("no command")
	}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	sub := flag.NewFlagSet("classroom "+cmd, flag.ContinueOnError)
	count := sub.Int("count", 0, "issue for learner-01 … learner-NN")
	ttl := sub.Duration("ttl", bootstraptoken.DefaultTTL, "how long the tokens stay valid")
	if err := sub.Parse(rest); err != nil {
		return err
	}

	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return errors.New("no admin kubeconfig: set KUBECONFIG (or --kubeconfig) to a cluster admin's, e.g. eval \"$(scripts/cluster.sh env)\"")
	}
	if err != nil {
		return fmt.Errorf("admin kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	c := &Classroom{Client: cs, Admin: cfg, StateDir: *stateDir, TTL: *ttl, Out: os.Stdout}
	ctx := signals.SetupSignalContext()
	switch cmd {
	case "issue":
		names := sub.Args()
		if *count > 0 {
			if len(names) > 0 {
				return errors.New("issue: give names or --count, not both")
			}
			names = Numbered(*count)
		}
		if len(names) == 0 {
			return errors.New("issue: give the learners' names, or --count N")
		}
		return c.Issue(ctx, names)
	case "revoke":
		return c.Revoke(ctx, sub.Args())
	case "status":
		return c.Status(ctx)
	}
	return fmt.Errorf("unknown command %s (issue, revoke, status)", strconv.Quote(cmd))
}
