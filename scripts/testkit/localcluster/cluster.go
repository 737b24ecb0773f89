// Package localcluster runs a real Kubernetes control plane on loopback:
// etcd, kube-apiserver, kube-controller-manager and kube-scheduler, built from
// the k8s.io/kubernetes module by scripts/build-control-plane.sh. No Docker, no
// VM: four processes and a directory of certificates. On request
// (Config.MetricsServer) a fifth, metrics-server, serves the resource metrics
// API (metrics.k8s.io) through the API server's aggregation layer, as a
// process on loopback instead of a pod (see metricsserver.go).
//
// scripts/cluster.sh uses it to start a cluster that outlives the command
// (Detach, with pid files), and scripts/testkit/testcluster to give each test package a
// cluster of its own on free ports.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"mykubelet/mylib/statedir"
)

// Upstream's defaults that the tutorial talks about.
const (
	// DefaultNodeMonitorGracePeriod is kube-controller-manager's
	// --node-monitor-grace-period in v1.37: how long a node may go without a
	// heartbeat (lease renewal or status update) before it is marked
	// NotReady with conditions Unknown.
	DefaultNodeMonitorGracePeriod = 50 * time.Second
	// FrontProxyClientName is the common name of the API server's
	// --proxy-client-cert-file, the only name --requestheader-allowed-names
	// accepts.
	FrontProxyClientName = "front-proxy-client"
	// ServiceClusterIPRange is the API server's --service-cluster-ip-range.
	ServiceClusterIPRange = "10.96.0.0/16"
	// ClusterCIDR is kube-controller-manager's --cluster-cidr, the range
	// its node IPAM controller (nodeipam, with --allocate-node-cidrs)
	// carves the nodes' spec.podCIDR out of: 4,096 ranges of
	// NodeCIDRMaskSize, room for the 1,000-node fleet, clear of the
	// service range and of the mock runtime's default 10.88.0.0/16.
	ClusterCIDR = "10.128.0.0/12"
	// NodeCIDRMaskSize is kube-controller-manager's --node-cidr-mask-size
	// (upstream's default for IPv4, 24: 254 pods' addresses a node).
	NodeCIDRMaskSize = 24
	// KubeletPreferredAddressTypes is the API server's
	// --kubelet-preferred-address-types, kubeadm's order: the node's
	// InternalIP before its hostname.
	KubeletPreferredAddressTypes = "InternalIP,ExternalIP,Hostname"
)

// Ports of the control plane; zero means "pick a free one".
type Ports struct {
	EtcdClient, EtcdPeer, APIServer, ControllerManager, Scheduler int
	// MetricsServer is used only with Config.MetricsServer.
	MetricsServer int
}

// DefaultPorts are the usual ports, for the learner's long-lived cluster.
var DefaultPorts = Ports{EtcdClient: 2379, EtcdPeer: 2380, APIServer: 6443, ControllerManager: 10257, Scheduler: 10259,
	MetricsServer: DefaultMetricsServerPort}

// Config says where and how to run the control plane.
type Config struct {
	// Dir holds pki/, logs/, run/ (pid files), etcd/ and admin.kubeconfig.
	Dir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager and
	// kube-scheduler.
	BinDir string
	Ports  Ports
	// NodeMonitorGracePeriod is passed to kube-controller-manager; zero keeps
	// the upstream default (DefaultNodeMonitorGracePeriod).
	NodeMonitorGracePeriod time.Duration
	// ClusterSigningDuration is kube-controller-manager's
	// --cluster-signing-duration, the longest life of a certificate it
	// signs for a CSR; zero keeps upstream's (a year).
	ClusterSigningDuration time.Duration
	// ClusterCIDR is kube-controller-manager's --cluster-cidr; "" is
	// the package's ClusterCIDR. A test that runs beside other clusters on
	// one machine picks a range of its own: each node's pod network routes
	// its podCIDR on the host, and two routes to one range would fight.
	ClusterCIDR string
	// Detach starts the processes in their own session so they outlive this
	// program; they are stopped with Down. Otherwise they are children that
	// die with this process, stopped with Cluster.Stop.
	Detach bool
	// ReadyTimeout bounds Start; default 3 minutes.
	ReadyTimeout time.Duration
	// MetricsServer starts metrics-server (BinDir/metrics-server) once the
	// control plane is ready, and Start waits until the APIService
	// v1beta1.metrics.k8s.io is Available. Off by default: it costs a
	// process and a few seconds that most tests do not need.
	MetricsServer bool
	// MetricResolution is metrics-server's --metric-resolution, how often
	// it scrapes the kubelets; zero: DefaultMetricResolution. At least
	// MinMetricResolution.
	MetricResolution time.Duration
	// Progress, when set, is told of each component as it comes up, with
	// the time since Start began (scripts/cluster.sh up prints it).
	Progress func(format string, args ...any)
}

// Cluster is a started control plane.
type Cluster struct {
	cfg   Config
	procs []*process
	ca    *CA
	// Host is the API server's URL, e.g. https://127.0.0.1:6443.
	Host string
	// AdminKubeconfig is the path of a kubeconfig for a cluster admin
	// (group system:masters), mode 0600.
	AdminKubeconfig string
	// Ports are the ports in use, with zeros replaced.
	Ports Ports

	started time.Time
}

// Start prepares the certificates and starts etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler, then waits until the API server
// is ready, both controllers are healthy and the default service account
// exists. On error, whatever it started is stopped again.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Dir == "" || cfg.BinDir == "" {
		return nil, errors.New("localcluster: Dir and BinDir are required")
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 3 * time.Minute
	}
	bins := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}
	if cfg.MetricsServer {
		bins = append(bins, MetricsServerName)
		if cfg.MetricResolution != 0 && cfg.MetricResolution < MinMetricResolution {
			return nil, fmt.Errorf("localcluster: MetricResolution %v is below metrics-server's minimum, %v", cfg.MetricResolution, MinMetricResolution)
		}
	}
	for _, b := range bins {
		if _, err := os.Stat(filepath.Join(cfg.BinDir, b)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: build the control plane with scripts/build-control-plane.sh", b, cfg.BinDir)
		}
	}
	ports, err := resolvePorts(cfg.Ports, cfg.MetricsServer)
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, Ports: ports, Host: "https://127.0.0.1:" + strconv.Itoa(ports.APIServer), started: time.Now()}
	if err := c.writePKI(); err != nil {
		return nil, fmt.Errorf("certificates in %s: %w", c.pki(""), err)
	}
	if err := c.start(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// resolvePorts checks that given ports are free and picks free ones for
// zeros; metrics-server's only when it is to run (else it is set to 0).
func resolvePorts(p Ports, metricsServer bool) (Ports, error) {
	type field struct {
		name string
		port *int
	}
	fields := []field{
		{"etcd client", &p.EtcdClient}, {"etcd peer", &p.EtcdPeer}, {"kube-apiserver", &p.APIServer},
		{"kube-controller-manager", &p.ControllerManager}, {"kube-scheduler", &p.Scheduler},
	}
	if metricsServer {
		fields = append(fields, field{"metrics-server", &p.MetricsServer})
	} else {
		p.MetricsServer = 0
	}
	var holds []net.Listener
	defer func() {
		for _, l := range holds {
			l.Close()
		}
	}()
	for _, f := range fields {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(*f.port))
		if err != nil {
			return p, fmt.Errorf("port %d for %s is taken: stop whatever listens there (`ss -ltnp 'sport = :%d'`) or choose another port", *f.port, f.name, *f.port)
		}
		holds = append(holds, l) // held until all are chosen, so no two fields get the same port
		*f.port = l.Addr().(*net.TCPAddr).Port
	}
	return p, nil
}

func (c *Cluster) pki(name string) string { return filepath.Join(c.cfg.Dir, "pki", name) }

func (c *Cluster) writePKI() error {
	ca, err := loadOrCreateCA(c.pki(""), "ca", "mykubelet-ca")
	if err != nil {
		return err
	}
	c.ca = ca
	// The aggregation layer's front proxy: the API server proxies to
	// extension API servers (metrics-server) with the client certificate
	// front-proxy-client, which they trust, by the CA and the name the
	// configmap kube-system/extension-apiserver-authentication publishes,
	// to pass the user in X-Remote-* headers. A CA of its own, as kubeadm
	// makes, so that no certificate of the cluster CA can act as the proxy.
	frontProxyCA, err := loadOrCreateCA(c.pki(""), "front-proxy-ca", "front-proxy-ca")
	if err != nil {
		return err
	}
	if err := frontProxyCA.writeIssued(c.pki(""), "front-proxy-client", CertSpec{CommonName: FrontProxyClientName}); err != nil {
		return err
	}
	loopback := []net.IP{net.ParseIP("127.0.0.1")}
	specs := map[string]CertSpec{
		"apiserver": {CommonName: "kube-apiserver", IPs: append(loopback, net.ParseIP("10.96.0.1")),
			DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}},
		"apiserver-kubelet-client":   {CommonName: "kube-apiserver-kubelet-client", Organizations: []string{"system:masters"}},
		"admin":                      {CommonName: "kubernetes-admin", Organizations: []string{"system:masters"}},
		"controller-manager":         {CommonName: "system:kube-controller-manager"},
		"controller-manager-serving": {CommonName: "kube-controller-manager", IPs: loopback, DNSNames: []string{"localhost"}},
		"scheduler":                  {CommonName: "system:kube-scheduler"},
		"scheduler-serving":          {CommonName: "kube-scheduler", IPs: loopback, DNSNames: []string{"localhost"}},
		// metrics-server serves on 127.0.0.1 under the name the aggregator
		// checks, <service>.<namespace>.svc.
		"metrics-server-serving": {CommonName: MetricsServerName, IPs: loopback,
			DNSNames: []string{"localhost", MetricsServerName + "." + MetricsServerNamespace + ".svc"}},
		// Its client identity: the ServiceAccount's user name and groups,
		// so that the manifest's RBAC bindings apply.
		"metrics-server": {CommonName: metricsServerUser,
			Organizations: []string{"system:serviceaccounts", "system:serviceaccounts:" + MetricsServerNamespace}},
	}
	for name, spec := range specs {
		if err := ca.writeIssued(c.pki(""), name, spec); err != nil {
			return err
		}
	}
	if err := writeServiceAccountKey(c.pki("")); err != nil {
		return err
	}
	c.AdminKubeconfig = filepath.Join(c.cfg.Dir, "admin.kubeconfig")
	for _, kc := range []struct{ file, cert string }{
		{c.AdminKubeconfig, "admin"},
		{filepath.Join(c.cfg.Dir, "controller-manager.kubeconfig"), "controller-manager"},
		{filepath.Join(c.cfg.Dir, "scheduler.kubeconfig"), "scheduler"},
		{filepath.Join(c.cfg.Dir, "metrics-server.kubeconfig"), "metrics-server"},
	} {
		if err := c.writeKubeconfig(kc.file, kc.cert); err != nil {
			return err
		}
	}
	return nil
}

// writeKubeconfig writes a kubeconfig that embeds the CA and the client
// certificate pki/<cert>.crt. It is rewritten on every start because the API
// server's port may differ.
func (c *Cluster) writeKubeconfig(path, cert string) error {
	crt, err := os.ReadFile(c.pki(cert + ".crt"))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(c.pki(cert + ".key"))
	if err != nil {
		return err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["mykubelet"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.ca.CertPEM}
	kc.AuthInfos[cert] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
	kc.Contexts["mykubelet"] = &clientcmdapi.Context{Cluster: "mykubelet", AuthInfo: cert}
	kc.CurrentContext = "mykubelet"
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	return statedir.WriteFile(path, b)
}

// RESTConfig returns a new admin *rest.Config.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", c.AdminKubeconfig)
}

// CA returns the cluster CA, for tests that mint credentials of their own.
func (c *Cluster) CA() *CA { return c.ca }

// CAFile is the path of the cluster CA certificate.
func (c *Cluster) CAFile() string { return c.pki("ca.crt") }

// Dir is the cluster's directory.
func (c *Cluster) Dir() string { return c.cfg.Dir }
