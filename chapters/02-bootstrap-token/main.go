// Chapter 02: a bootstrap token lets a new node authenticate just enough to ask for its own certificate.
//
// This program plays the cluster administrator (it uses the admin
// kubeconfig): it creates a bootstrap token Secret in kube-system, binds the
// token's group to the ClusterRoles TLS bootstrapping needs, writes a
// bootstrap kubeconfig into the state directory, and proves with a
// SelfSubjectReview that the API server accepts it as system:bootstrap:<id>.
package main

import (
	"context"
	"fmt"
	"os"

	"k8s.io/client-go/tools/clientcmd"

	"mykubelet/mylib/bootstrap"
	"mykubelet/mylib/bootstraptoken"
	"mykubelet/mylib/options"
	"mykubelet/mylib/statedir"
)

func main() {
	o := options.New("02-bootstrap-token")
	token := o.Flags.String("token", "", "use this bootstrap token (<id>.<secret>, [a-z0-9]{6}.[a-z0-9]{16}) instead of reusing the state dir's or generating one")
	ttl := o.Flags.Duration("ttl", bootstraptoken.DefaultTTL, "how long the token stays valid (kubeadm token create --ttl)")
	autoApprove := o.Flags.Bool("auto-approve", true, "put the token in kubeadm's group, whose node CSRs the controller manager approves; "+
		"false: in group "+bootstraptoken.ManualApprovalGroup+", whose CSRs wait for kubectl certificate approve")

	o.Main(os.Args[1:], func(ctx context.Context) error {
		// 0. A malformed --token is refused before anything is sent.
		if *token != "" {
			if _, err := bootstraptoken.Parse(*token); err != nil {
				return fmt.Errorf("--token: %w", err)
			}
		}

		// 1. As admin: the token, its Secret, the RBAC, the bootstrap kubeconfig.
		cs, admin, err := o.Clientset(ctx)
		if err != nil {
			return err
		}
		path := statedir.Path(o.StateDir, statedir.BootstrapKubeconfig)
		if _, err := bootstraptoken.Setup(ctx, cs, admin, bootstraptoken.SetupOptions{
			Token:       *token,
			TTL:         *ttl,
			AutoApprove: *autoApprove,
			Kubeconfig:  path,
			Out:         os.Stdout,
		}); err != nil {
			return err
		}

		// 2. The proof, with the bootstrap kubeconfig only: who am I?
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return fmt.Errorf("load %s: %w", path, err)
		}
		return bootstrap.PrintWhoAmI(ctx, os.Stdout, cfg)
	})
}
