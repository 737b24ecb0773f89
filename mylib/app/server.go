package app

// Run, run, RunKubelet, createAndInitKubelet and startKubelet, after
// upstream's cmd/kubelet/app/server.go.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/bootstrap"
	"mykubelet/mylib/events"
	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/nodestatus"
	"mykubelet/mylib/options"
	"mykubelet/mylib/server"
)

// Run is upstream's run for a node that has its credentials: the clients
// from s.Kubeconfig, the client CA when it serves the kubelet API, the
// container manager (the node's and the pods' cgroups, cm.NewForNode),
// the container runtime, then RunKubelet until ctx ends.
func Run(ctx context.Context, s *KubeletServer) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	cfg, err := options.LoadRESTConfig(s.Kubeconfig)
	if err != nil {
		return err
	}
	deps := &kubelet.Dependencies{Clock: clock.RealClock{}, Out: os.Stdout}
	if deps.KubeClient, deps.EventClient, err = NewClients(ctx, cfg, s.KubeletConfiguration); err != nil {
		return err
	}
	if s.EnableServer {
		if deps.ClientCA, err = ClientCA(cfg, s.KubeletConfiguration.Authentication.X509.ClientCAFile); err != nil {
			return err
		}
	}
	if err := containerManagerDependency(s, deps); err != nil { // cm.go
		return err
	}
	runtime, err := PreInitRuntimeService(ctx, &wg, s, deps)
	if err != nil {
		return err
	}
	defer runtime.Close()
	return RunKubelet(ctx, &wg, s, deps)
}

// NewClients checks that the API server answers, then makes the kubelet's
// two clients (kubeDeps.KubeClient and EventClient) at the
// KubeletConfiguration's rates (kubelet.NewClientsWithRates).
func NewClients(ctx context.Context, cfg *rest.Config, kc *kubeletv1beta1.KubeletConfiguration) (client, eventClient kubernetes.Interface, err error) {
	if _, err := options.NewCheckedClientset(ctx, cfg); err != nil {
		return nil, nil, err
	}
	if kc.KubeAPIQPS == nil || kc.EventRecordQPS == nil {
		return nil, nil, errors.New("KubeletConfiguration without defaults: kubeAPIQPS and eventRecordQPS are unset")
	}
	return kubelet.NewClientsWithRates(cfg, kubelet.ClientRates{KubeAPIQPS: *kc.KubeAPIQPS,
		KubeAPIBurst: kc.KubeAPIBurst, EventRecordQPS: *kc.EventRecordQPS, EventBurst: kc.EventBurst})
}

// ClientCA is the CA the kubelet API checks client certificates against:
// clientCAFile (authentication.x509.clientCAFile, --client-ca-file) when
// set, else the node kubeconfig's CA, inline or in its file.
func ClientCA(cfg *rest.Config, clientCAFile string) ([]byte, error) {
	if clientCAFile == "" && len(cfg.CAData) > 0 {
		return cfg.CAData, nil
	}
	if clientCAFile == "" {
		clientCAFile = cfg.CAFile
	}
	if clientCAFile == "" {
		return nil, errors.New("no client CA: the node kubeconfig has no CA and no client CA file is set (--client-ca-file, authentication.x509.clientCAFile)")
	}
	b, err := os.ReadFile(clientCAFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("client CA %s: %w", clientCAFile, err)
	}
	return b, err
}

// RunKubelet is upstream's RunKubelet: the pod sources and the event
// recorder into deps, the Kubelet (createAndInitKubelet), then
// startKubelet, until ctx ends; then one line says what stopped with it.
// deps needs the clients and the runtime (NewClients,
// PreInitRuntimeService); the container manager is made here when Run
// did not make it (a program with a run of its own); wg waits for what
// it starts.
func RunKubelet(ctx context.Context, wg *sync.WaitGroup, s *KubeletServer, deps *kubelet.Dependencies) error {
	kc := s.KubeletConfiguration
	if err := containerManagerDependency(s, deps); err != nil { // cm.go
		return err
	}
	var err error
	deps.PodConfig, err = kubelet.MakePodSourceConfig(ctx, wg, kubelet.PodSources{StaticPodPath: kc.StaticPodPath,
		FileCheckFrequency: kc.FileCheckFrequency.Duration, Client: deps.KubeClient, NodeName: s.NodeName, Clock: deps.Clock})
	if err != nil {
		return err
	}
	// Events as the kubelet records them: source "kubelet", host the node.
	recorder, stopEvents := events.NewRecorder(ctx, deps.EventClient, s.NodeName)
	defer stopEvents()
	deps.Recorder = recorder

	kl, err := createAndInitKubelet(s, deps)
	if err != nil {
		return err
	}
	err = startKubelet(ctx, wg, kl, s, deps)
	fmt.Println(stopped(s))
	return err
}

// stopped is the line that says what stopped with the kubelet: the mock
// runtime, when it ran in this process, or nothing that runs.
func stopped(s *KubeletServer) string {
	switch {
	case !s.FakeRuntime:
		return "stopped (the containers keep running in the runtime; started again, the kubelet adopts them)"
	case s.PodNetwork:
		return "stopped (the mock runtime, its containers and its pod network with it)"
	}
	return "stopped (the mock runtime, and its containers, with it)"
}

// createAndInitKubelet is upstream's: kubelet.NewMainKubelet, with this
// course's one-line reports of registration and status writes unless
// deps has its own. With Stats or Eviction it first gives deps the stats
// provider (statsProviderDependency), over the Kubelet once made.
func createAndInitKubelet(s *KubeletServer, deps *kubelet.Dependencies) (*kubelet.Kubelet, error) {
	if err := os.MkdirAll(s.KubeletConfiguration.PodLogsDir, 0o700); err != nil {
		return nil, err
	}
	if deps.OnRegistered == nil {
		deps.OnRegistered = func(n *v1.Node, created bool) {
			how := "created"
			if !created {
				how = "already existed, adopted"
			}
			fmt.Printf("node %s: registered (%s)\n", n.Name, how)
		}
	}
	if deps.OnStatusPatched == nil {
		deps.OnStatusPatched = func(n *v1.Node, _ []byte, reason string) {
			fmt.Printf("node %s: status written (%s): %s\n", n.Name, reason, nodestatus.ReadySummary(n))
		}
	}
	if s.Volumes {
		volumeDependencies(deps, s.NodeName, s.KubeletConfiguration.SyncFrequency.Duration, !s.FakeRuntime)
	}
	if s.Stats {
		statsDependencies(deps)
	}
	host := &lateHost{}
	if s.Stats || s.Eviction {
		if err := statsProviderDependency(s, deps, host); err != nil {
			return nil, err
		}
	}
	kl, err := kubelet.NewMainKubelet(s.KubeletConfiguration, deps, mainOptions(s))
	if err != nil {
		return nil, err
	}
	host.set(kl)
	return kl, nil
}

// mainOptions are s's parts of the kubelet to turn on: the eviction
// manager needs the admission handlers (it refuses pods under pressure),
// so Eviction turns Admit on; on a real runtime hostNetwork pods see the
// node's /etc/hosts (NodeHostsFile) and a hostPath volume is the
// machine's own path (HostPathRoot "/"), as upstream's.
func mainOptions(s *KubeletServer) kubelet.MainOptions {
	opts := s.MainOptions
	if opts.Eviction {
		opts.Admit = true
	}
	if !s.FakeRuntime && opts.NodeHostsFile == "" {
		opts.NodeHostsFile = "/etc/hosts" // a real runtime's hostNetwork pods see the node's, as upstream
	}
	if !s.FakeRuntime && opts.HostPathRoot == "" {
		opts.HostPathRoot = "/"
	}
	return opts
}

// startKubelet is upstream's: the kubelet API server when s.EnableServer
// (with the stats and metrics endpoints when s.Stats), then Kubelet.Run
// until ctx ends.
func startKubelet(ctx context.Context, wg *sync.WaitGroup, kl *kubelet.Kubelet, s *KubeletServer, deps *kubelet.Dependencies) error {
	kc := s.KubeletConfiguration
	if deps.RemoteRuntimeService == nil {
		return errors.New("kubelet: Dependencies.RemoteRuntimeService is required (PreInitRuntimeService)")
	}
	// The runtime's name, for the banner, as it says it (the CRI's Version).
	v, err := deps.RemoteRuntimeService.Version(ctx, &runtimeapi.VersionRequest{Version: "v1"})
	if err != nil {
		return fmt.Errorf("container runtime: %w", err)
	}
	if s.EnableServer {
		cfg := server.Config{NodeName: s.NodeName, Pods: kl.GetPodManager(), Runtime: deps.RemoteRuntimeService, Clock: deps.Clock}
		if s.Stats {
			if err := statsEndpoints(&cfg, s, kl, deps); err != nil {
				return err
			}
		}
		err := server.Run(ctx, wg, server.RunConfig{
			Config: cfg,
			Client: deps.KubeClient, ClientCA: deps.ClientCA, NodeIP: s.NodeIP, Address: kc.Address, Port: int(kc.Port),
			TLS: deps.TLSOptions, CertDir: s.CertDirectory, CertTimeout: s.ServingCertTimeout, Out: os.Stdout,
		})
		if err != nil {
			return err
		}
	}
	from := "the API server"
	if kc.StaticPodPath != "" {
		from = kc.StaticPodPath + " and the API server"
	}
	fmt.Printf("kubelet %s: pods from %s, runtime %s %s; Ctrl-C to stop\n", s.NodeName, from, v.GetRuntimeName(), kc.ContainerRuntimeEndpoint)
	if s.Banner != "" {
		fmt.Println(s.Banner)
	}
	return kl.Run(ctx)
}

// run is upstream's run for the capstone (NewKubeletCommand's): the
// node's credentials first, then the clients, the runtime and RunKubelet,
// as Run does for a node that has its credentials already.
func run(ctx context.Context, s *KubeletServer) error {
	kc, clk := s.KubeletConfiguration, clock.RealClock{}
	where := "no --config file"
	if s.ConfigFile != "" {
		where = "config " + s.ConfigFile
	}
	fmt.Printf("mykubelet %s: %s, flags over it: maxPods %d, port %d, rotateCertificates %t, serverTLSBootstrap %t\n",
		s.NodeName, where, kc.MaxPods, kc.Port, kc.RotateCertificates, kc.ServerTLSBootstrap)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	// 1. The client certificate: the node kubeconfig if it is valid, else
	// one from the bootstrap kubeconfig (upstream: bootstrap.LoadClientCert).
	if _, err := bootstrap.LoadClientCert(ctx, bootstrap.Config{BootstrapKubeconfig: s.BootstrapKubeconfig,
		Kubeconfig: s.Kubeconfig, CertDir: s.CertDirectory, NodeName: s.NodeName, Out: os.Stdout}); err != nil {
		return err
	}
	nodeConfig, err := options.LoadRESTConfig(s.Kubeconfig)
	if err != nil {
		return err
	}
	deps := &kubelet.Dependencies{Clock: clk, Out: os.Stdout}
	if deps.ClientCA, err = ClientCA(nodeConfig, kc.Authentication.X509.ClientCAFile); err != nil {
		return err
	}
	// 2. Its rotation (upstream: buildKubeletClientConfig).
	clientConfig := nodeConfig
	if kc.RotateCertificates {
		var bootstrapConfig *rest.Config
		if _, err := os.Stat(s.BootstrapKubeconfig); err == nil {
			if bootstrapConfig, err = clientcmd.BuildConfigFromFlags("", s.BootstrapKubeconfig); err != nil {
				return fmt.Errorf("bootstrap kubeconfig %s: %w", s.BootstrapKubeconfig, err)
			}
		}
		m, err := bootstrap.NewClientCertificateManager(bootstrap.RotationConfig{NodeConfig: nodeConfig,
			BootstrapConfig: bootstrapConfig, CertDir: s.CertDirectory, NodeName: s.NodeName})
		if err != nil {
			return err
		}
		clientConfig = rest.CopyConfig(nodeConfig)
		if _, err := bootstrap.UpdateTransport(ctx, clientConfig, m, 0, clk); err != nil {
			return err
		}
		m.Start()
		defer m.Stop()
		bootstrap.ReportCertificates(ctx, &wg, m, "client", os.Stdout, 0, clk)
		fmt.Println("client certificate: rotation on: a new CSR at 70-90% of its life; connections switch to the new one without a restart")
	}
	// 3. The clients at the configuration's rates, and the container
	// runtime: the runtime check is Version over the CRI.
	if deps.KubeClient, deps.EventClient, err = NewClients(ctx, clientConfig, kc); err != nil {
		return err
	}
	// The service account tokens get a client of their own, so that a
	// burst of pods does not queue their tokens and their statuses behind
	// each other (upstream sends both through KubeClient; see the
	// capstone's README, "How fast it starts pods").
	if deps.TokenClient, err = kubelet.NewTokenClient(clientConfig, *kc.KubeAPIQPS, kc.KubeAPIBurst); err != nil {
		return err
	}
	runtime, err := PreInitRuntimeService(ctx, &wg, s, deps)
	if err != nil {
		return err
	}
	defer runtime.Close()
	fmt.Printf("runtime: %s %s at %s\n", runtime.Type(), runtime.Version().GetRuntimeVersion(), kc.ContainerRuntimeEndpoint)

	// 4. The kubelet API's certificate (upstream: InitializeTLS, in run).
	if deps.TLSOptions, err = servingTLS(ctx, &wg, s, deps.KubeClient); err != nil {
		return err
	}
	return RunKubelet(ctx, &wg, s, deps)
}

// servingTLS is the kubelet API's certificate (upstream: InitializeTLS and
// NewKubeletServerCertificateManager): with serverTLSBootstrap, asked of
// the cluster CA with CSRs and rotated; without, self-signed.
func servingTLS(ctx context.Context, wg *sync.WaitGroup, s *KubeletServer, client kubernetes.Interface) (*tls.Config, error) {
	ips, names := []net.IP{s.NodeIP}, []string{s.NodeName}
	if !s.KubeletConfiguration.ServerTLSBootstrap {
		cert, created, err := bootstrap.SelfSignedServingCert(s.CertDirectory, s.NodeName, ips, names)
		if err != nil {
			return nil, err
		}
		verb := map[bool]string{true: "created", false: "reusing"}[created]
		fmt.Printf("serving certificate: self-signed, %s %s (the API server will not trust it for logs and exec: see --rotate-server-certificates)\n",
			verb, filepath.Join(s.CertDirectory, bootstrap.SelfSignedCertFile))
		return server.TLSConfig(cert), nil
	}
	m, err := bootstrap.NewServingCertificateManager(bootstrap.ServingRotationConfig{Client: client, CertDir: s.CertDirectory,
		NodeName: s.NodeName, IPs: ips, DNSNames: names})
	if err != nil {
		return nil, err
	}
	if cur := m.Current(); cur != nil {
		fmt.Printf("serving certificate: %s, valid until %s\n", filepath.Join(s.CertDirectory, bootstrap.ServerCertPrefix+"-current.pem"),
			cur.Leaf.NotAfter.UTC().Format(time.RFC3339))
	} else {
		fmt.Println("serving certificate: none yet: a kubernetes.io/kubelet-serving CSR waits for an admin's approval (kubectl certificate approve)")
	}
	m.Start()
	wg.Go(func() { <-ctx.Done(); m.Stop() })
	bootstrap.ReportCertificates(ctx, wg, m, "serving", os.Stdout, 0, nil)
	return bootstrap.ServingTLSConfig(m), nil
}
