// Chapter 03: with only a bootstrap token, a node gets its own client certificate through a CertificateSigningRequest.
//
// This is what the kubelet does at start-up when its kubeconfig is missing
// (pkg/kubelet/certificate/bootstrap): generate a key, send a CSR for
// CN=system:node:<node-name>, O=system:nodes with the bootstrap kubeconfig,
// wait for it to be approved and signed, then write kubelet-client-current.pem
// and a node kubeconfig. It never reads the admin kubeconfig.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"mykubelet/mylib/bootstrap"
	"mykubelet/mylib/options"
	"mykubelet/mylib/statedir"
)

func main() {
	o := options.New("03-tls-bootstrap")
	bootstrapKubeconfig := o.Flags.String("bootstrap-kubeconfig", "", "the bootstrap kubeconfig chapter 02 wrote (default: <state-dir>/"+statedir.BootstrapKubeconfig+")")
	timeout := o.Flags.Duration("timeout", bootstrap.DefaultCertificateTimeout, "how long to wait for the API server to take the CSR and approve and sign it")

	o.Main(os.Args[1:], func(ctx context.Context) error {
		if o.Kubeconfig != "" {
			return errors.New("this chapter does not use --kubeconfig: it authenticates only with --bootstrap-kubeconfig, " +
				"and writes the node's own kubeconfig to <state-dir>/" + statedir.NodeKubeconfig)
		}
		if *bootstrapKubeconfig == "" {
			*bootstrapKubeconfig = statedir.Path(o.StateDir, statedir.BootstrapKubeconfig)
		}
		nodeKubeconfig := statedir.Path(o.StateDir, statedir.NodeKubeconfig)

		// 1. Reuse a valid node kubeconfig, or bootstrap one.
		if _, err := bootstrap.LoadClientCert(ctx, bootstrap.Config{
			BootstrapKubeconfig: *bootstrapKubeconfig,
			BootstrapCommand:    "go run ./chapters/02-bootstrap-token",
			Kubeconfig:          nodeKubeconfig,
			CertDir:             filepath.Dir(statedir.Path(o.StateDir, statedir.ClientCertCurrent)),
			NodeName:            o.NodeName,
			Timeout:             *timeout,
			Out:                 os.Stdout,
		}); err != nil {
			return err
		}

		// 2. The proof, with the node kubeconfig: who am I now?
		cfg, err := clientcmd.BuildConfigFromFlags("", nodeKubeconfig)
		if err != nil {
			return fmt.Errorf("load %s: %w", nodeKubeconfig, err)
		}
		cfg.Timeout = 10 * time.Second
		return bootstrap.PrintWhoAmI(ctx, os.Stdout, cfg)
	})
}
