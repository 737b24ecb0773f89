package fleet

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"mykubelet/mylib/bootstrap"
)

// Identities says what obtaining the fleet's client certificates did.
type Identities struct {
	// Requested counts the nodes that asked for a new certificate (one CSR
	// each); Reused those whose certificate in the state dir was still valid.
	Requested, Reused int
	// Took is the wall time of the whole step.
	Took time.Duration
}

// identityDir is where one node's kubeconfig and certificates live.
func identityDir(stateDir, fleetName, node string) string {
	return filepath.Join(stateDir, "fleet", fleetName, node)
}

// loadIdentities makes sure every node has a client certificate, asking for
// the missing ones with the bootstrap kubeconfig, at most parallel at a
// time, and returns each node's *rest.Config.
func loadIdentities(ctx context.Context, cfg Config, names []string, clk clock.PassiveClock) ([]*rest.Config, Identities, error) {
	start := clk.Now()
	configs := make([]*rest.Config, len(names))
	reused := make([]bool, len(names))
	errs := make([]error, len(names))
	sem := make(chan struct{}, cfg.CSRParallelism)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			dir := identityDir(cfg.StateDir, cfg.Name, name)
			kubeconfig := filepath.Join(dir, "kubelet.kubeconfig")
			res, err := bootstrap.LoadClientCert(ctx, bootstrap.Config{
				BootstrapKubeconfig: cfg.BootstrapKubeconfig,
				Kubeconfig:          kubeconfig,
				CertDir:             filepath.Join(dir, "pki"),
				NodeName:            name,
				Timeout:             cfg.CertificateTimeout,
				Clock:               clk,
			})
			if err != nil {
				errs[i] = fmt.Errorf("node %s: %w", name, err)
				return
			}
			reused[i] = res.Reused
			configs[i], errs[i] = clientConfig(kubeconfig)
		})
	}
	wg.Wait()
	var ids Identities
	for i := range names {
		if errs[i] != nil {
			return nil, ids, errs[i]
		}
		if reused[i] {
			ids.Reused++
		} else {
			ids.Requested++
		}
	}
	ids.Took = clk.Since(start)
	return configs, ids, nil
}

// clientConfig loads a node kubeconfig with its certificate and key read
// into memory. Two reasons: with file paths client-go starts a goroutine per
// connection pool that watches the files and never stops it; and with
// Proxy set, client-go builds this client a transport of its own instead of
// keeping one in its global cache, so that closing it at shutdown really
// closes its connections.
func clientConfig(kubeconfig string) (*rest.Config, error) {
	c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", kubeconfig, err)
	}
	for _, f := range []struct {
		path *string
		data *[]byte
	}{{&c.CertFile, &c.CertData}, {&c.KeyFile, &c.KeyData}, {&c.CAFile, &c.CAData}} {
		if *f.path == "" {
			continue
		}
		b, err := os.ReadFile(*f.path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kubeconfig, err)
		}
		*f.data, *f.path = b, ""
	}
	// Loopback only: never a proxy.
	c.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	return c, nil
}
