// Package testcluster gives a test a real, isolated Kubernetes control plane:
// etcd, kube-apiserver, kube-controller-manager and kube-scheduler in the
// test's temporary directory, on free loopback ports, stopped when the test
// ends. Test packages run in parallel, each with a cluster of its own.
//
//	func TestSomething(t *testing.T) {
//		c := testcluster.Start(t)
//		cs := c.Clientset(t)
//		…
//	}
//
// The binaries come from scripts/build-control-plane.sh. When they are missing
// the test fails, saying how to build them; it never skips.
package testcluster

import (
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mykubelet/scripts/testkit/localcluster"
)

// KubeVersion is the control plane's version, built by scripts/build-control-plane.sh.
const KubeVersion = "v1.37.1"

// BinDirEnv overrides where the control-plane binaries are found.
const BinDirEnv = "MYKUBELET_BIN_DIR"

// BinDir is $MYKUBELET_BIN_DIR, else the cache scripts/build-control-plane.sh
// builds into.
func BinDir() string {
	if d := os.Getenv(BinDirEnv); d != "" {
		return d
	}
	cache := os.Getenv("MYKUBELET_CACHE_DIR")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "mykubelet")
	}
	return filepath.Join(cache, "control-plane-"+KubeVersion, "bin")
}

// Option changes how the cluster starts.
type Option func(*localcluster.Config)

// WithNodeMonitorGracePeriod sets kube-controller-manager's
// --node-monitor-grace-period, so a test can watch a node go NotReady in
// seconds instead of upstream's 50 s.
func WithNodeMonitorGracePeriod(d time.Duration) Option {
	return func(c *localcluster.Config) { c.NodeMonitorGracePeriod = d }
}

// WithClusterSigningDuration sets kube-controller-manager's
// --cluster-signing-duration, so that the certificates it signs for CSRs
// are short-lived and a test sees them rotate in minutes.
func WithClusterSigningDuration(d time.Duration) Option {
	return func(c *localcluster.Config) { c.ClusterSigningDuration = d }
}

// Cluster is a running control plane for one test (or one package, see New).
type Cluster struct {
	*localcluster.Cluster
}

// Start starts a control plane and stops it when t ends. It fails t when the
// control plane cannot start.
func Start(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "mykubelet-testcluster-")
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(dir, opts...)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("testcluster: %v", err)
	}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			t.Logf("testcluster: kept %s for its logs", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return c
}

// New starts a control plane in dir; the caller stops it with Stop. Use it
// from TestMain to share one cluster between the tests of a package.
func New(dir string, opts ...Option) (*Cluster, error) {
	cfg := localcluster.Config{Dir: dir, BinDir: BinDir(), ReadyTimeout: 4 * time.Minute}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := localcluster.Start(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	return &Cluster{Cluster: c}, nil
}

// Config returns a new admin *rest.Config (group system:masters).
func (c *Cluster) Config(t testing.TB) *rest.Config {
	t.Helper()
	cfg, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Clientset returns an admin clientset.
func (c *Cluster) Clientset(t testing.TB) *kubernetes.Clientset {
	t.Helper()
	return kubernetes.NewForConfigOrDie(c.Config(t))
}

// UserConfig returns a *rest.Config that authenticates as user in groups,
// with a client certificate signed by the cluster CA. Tests use it to act as
// a given node, e.g. UserConfig(t, "system:node:a", "system:nodes").
func (c *Cluster) UserConfig(t testing.TB, user string, groups ...string) *rest.Config {
	t.Helper()
	crt, key, err := c.CA().Issue(localcluster.CertSpec{CommonName: user, Organizations: groups, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return &rest.Config{
		Host: c.Host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   c.CA().CertPEM,
			CertData: crt,
			KeyData:  key,
		},
	}
}

// AnonymousConfig returns a *rest.Config with the cluster's address and CA
// and no credentials, for tests that add their own (a bearer token, say).
func (c *Cluster) AnonymousConfig() *rest.Config {
	return &rest.Config{Host: c.Host, TLSClientConfig: rest.TLSClientConfig{CAData: c.CA().CertPEM}}
}

// CAPool returns a pool with the cluster CA, to verify issued certificates.
func (c *Cluster) CAPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.CA().Cert)
	return p
}

// KillAPIServer sends SIGKILL to the cluster's kube-apiserver and waits until
// it has exited; etcd and the controllers keep running. RestartAPIServer
// brings it back.
func (c *Cluster) KillAPIServer(t testing.TB) {
	t.Helper()
	if err := c.Kill("kube-apiserver"); err != nil {
		t.Fatalf("testcluster: %v", err)
	}
}

// RestartAPIServer starts kube-apiserver again on the same port, with the
// same data (etcd kept it), and waits until /readyz is ok.
func (c *Cluster) RestartAPIServer(t testing.TB) {
	t.Helper()
	if err := c.Restart(context.Background(), "kube-apiserver"); err != nil {
		t.Fatalf("testcluster: %v", err)
	}
}
