package main

// run and RunKubelet, after upstream's cmd/kubelet/app/server.go.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/bootstrap"
	"mykubelet/mylib/events"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/kubeletconfig"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/logs"
	"mykubelet/mylib/nodestatus"
	"mykubelet/mylib/options"
	kubepod "mykubelet/mylib/pod"
	"mykubelet/mylib/prober"
	"mykubelet/mylib/server"
)

// KubeletServer is upstream's options.KubeletServer: the flags that are
// not configuration, and the configuration (file, defaults, flags over file).
type KubeletServer struct {
	kubeletconfig.Flags
	Config      *kubeletv1beta1.KubeletConfiguration
	StateDir    string // the kubelet's --root-dir
	NodeName    string
	FakeRuntime bool
	PodCIDR     string
}

// Dependencies is upstream's kubelet.Dependencies: what run builds for RunKubelet.
type Dependencies struct {
	Client, EventClient kubernetes.Interface
	ClientCA            []byte // the cluster CA: client certificates the kubelet API accepts
	Runtime             *kuberuntime.Manager
	ProbeDial           prober.DialFunc
	Clock               clock.WithTicker
}

// run is upstream's run: credentials, clients and runtime, then RunKubelet.
func run(ctx context.Context, s *KubeletServer) error {
	kc, clk := s.Config, clock.RealClock{}
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
		Kubeconfig: s.Kubeconfig, CertDir: s.CertDir, NodeName: s.NodeName, Out: os.Stdout}); err != nil {
		return err
	}
	nodeConfig, err := options.LoadRESTConfig(s.Kubeconfig)
	if err != nil {
		return err
	}
	clientCA, err := clusterCA(nodeConfig, kc.Authentication.X509.ClientCAFile)
	if err != nil {
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
			BootstrapConfig: bootstrapConfig, CertDir: s.CertDir, NodeName: s.NodeName})
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
	if _, err := options.NewCheckedClientset(ctx, clientConfig); err != nil {
		return err
	}
	client, eventClient, err := kubelet.NewClientsWithRates(clientConfig, kubelet.ClientRates{KubeAPIQPS: *kc.KubeAPIQPS,
		KubeAPIBurst: kc.KubeAPIBurst, EventRecordQPS: *kc.EventRecordQPS, EventBurst: kc.EventBurst})
	if err != nil {
		return err
	}

	// 3. The container runtime, and the runtime check: Version over the CRI.
	reach, why := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, ""
	if s.FakeRuntime {
		// podPidsLimit bounds each container's processes; the kubelet's
		// default, -1 (no bound of its own), leaves the mock's.
		pids := int64(0)
		if kc.PodPidsLimit != nil && *kc.PodPidsLimit > 0 {
			pids = *kc.PodPidsLimit
		}
		mock, err := fakeruntime.NewRuntime(fakeruntime.Config{Clock: clk, PodCIDR: s.PodCIDR, PodNetwork: true, PodPidsLimit: pids})
		if err != nil {
			return err
		}
		if err := mock.PodNetworkError(); err != nil {
			why = "the mock runtime has no pod network"
		} else {
			reach = append(reach, mock.PodCIDR())
		}
		if err := fakeruntime.ServeEndpoint(ctx, &wg, mock, kc.ContainerRuntimeEndpoint); err != nil {
			mock.Close()
			return err
		}
	}
	runtime, err := kuberuntime.Connect(ctx, kc.ContainerRuntimeEndpoint, clk)
	if err != nil {
		return err
	}
	defer runtime.Close()
	fmt.Printf("runtime: %s %s at %s\n", runtime.Type(), runtime.Version().GetRuntimeVersion(), kc.ContainerRuntimeEndpoint)

	err = RunKubelet(ctx, &wg, s, &Dependencies{Client: client, EventClient: eventClient, ClientCA: clientCA,
		Runtime: runtime, ProbeDial: prober.GuardedDialer(reach, why), Clock: clk})
	if s.FakeRuntime {
		fmt.Println("stopped (the mock runtime, its containers and its pod network with it)")
	} else {
		fmt.Println("stopped (the containers keep running in the runtime; started again, the kubelet adopts them)")
	}
	return err
}

// RunKubelet is upstream's RunKubelet and startKubelet: the pod sources,
// the Kubelet, its API server, then Kubelet.Run until ctx ends.
func RunKubelet(ctx context.Context, wg *sync.WaitGroup, s *KubeletServer, deps *Dependencies) error {
	kc, clk := s.Config, deps.Clock
	podConfig, err := kubelet.MakePodSourceConfig(ctx, wg, kubelet.PodSources{StaticPodPath: kc.StaticPodPath,
		FileCheckFrequency: kc.FileCheckFrequency.Duration, Client: deps.Client, NodeName: s.NodeName, Clock: clk})
	if err != nil {
		return err
	}
	recorder, stopEvents := events.NewRecorder(ctx, deps.EventClient, s.NodeName)
	defer stopEvents()
	podLogs := filepath.Join(s.StateDir, "pod-logs")
	if err := os.MkdirAll(podLogs, 0o700); err != nil {
		return err
	}

	pods, gc := kubepod.NewBasicPodManager(), kuberuntime.DefaultGCPolicy()
	kl, err := kubelet.New(kubelet.Config{Client: deps.Client, NodeName: s.NodeName, Clock: clk,
		Node: &kubelet.NodeConfig{
			Status:                    &kubelet.NodeStatusOptions{RootDir: s.StateDir, MaxPods: int(kc.MaxPods), NodeIP: s.NodeIP, Port: kc.Port},
			NodeStatusUpdateFrequency: kc.NodeStatusUpdateFrequency.Duration, NodeStatusReportFrequency: kc.NodeStatusReportFrequency.Duration,
			LeaseDurationSeconds: kc.NodeLeaseDurationSeconds,
			Annotations:          map[string]string{options.ChapterAnnotation: "13-mykubelet"},
			OnRegistered:         func(n *v1.Node, created bool) { fmt.Printf("node %s: registered (created %t)\n", n.Name, created) },
			OnStatusPatched: func(n *v1.Node, _ []byte, reason string) {
				fmt.Printf("node %s: status written (%s): %s\n", n.Name, reason, ready(n))
			},
		},
		Pods: &kubelet.PodsConfig{Updates: podConfig.Updates(), SourcesReady: podConfig.SeenAllSources,
			RemoteRuntimeService: deps.Runtime.RuntimeService(), RemoteImageService: deps.Runtime.ImageService(), PodManager: pods,
			RunContainers: true, Recorder: recorder, PodLogsDirectory: podLogs, Out: os.Stdout,
			ContainerGC: &gc, ActiveDeadline: true, Probes: true, ProbeDial: deps.ProbeDial, Admit: true,
			ContainerLogs: &logs.Config{MaxSize: kc.ContainerLogMaxSize, MaxFiles: int(*kc.ContainerLogMaxFiles),
				MaxWorkers: int(*kc.ContainerLogMaxWorkers), MonitorInterval: kc.ContainerLogMonitorInterval.Duration}},
	})
	if err != nil {
		return err
	}

	tlsConfig, err := servingTLS(ctx, wg, s, deps.Client)
	if err != nil {
		return err
	}
	err = server.Run(ctx, wg, server.RunConfig{
		Config: server.Config{NodeName: s.NodeName, Pods: pods, Runtime: deps.Runtime.RuntimeService(), Clock: clk},
		Client: deps.Client, ClientCA: deps.ClientCA, NodeIP: s.NodeIP, Address: kc.Address, Port: int(kc.Port), TLS: tlsConfig, Out: os.Stdout,
	})
	if err != nil {
		return err
	}
	fmt.Printf("kubelet %s: running pods from the API server%s; Ctrl-C to stop\n", s.NodeName, staticFrom(kc.StaticPodPath))
	return kl.Run(ctx)
}

// servingTLS is the kubelet API's certificate (upstream: InitializeTLS and
// NewKubeletServerCertificateManager): with serverTLSBootstrap, asked of
// the cluster CA with CSRs and rotated; without, self-signed.
func servingTLS(ctx context.Context, wg *sync.WaitGroup, s *KubeletServer, client kubernetes.Interface) (*tls.Config, error) {
	ips, names := []net.IP{s.NodeIP}, []string{s.NodeName}
	if !s.Config.ServerTLSBootstrap {
		cert, created, err := bootstrap.SelfSignedServingCert(s.CertDir, s.NodeName, ips, names)
		if err != nil {
			return nil, err
		}
		verb := map[bool]string{true: "created", false: "reusing"}[created]
		fmt.Printf("serving certificate: self-signed, %s %s (the API server will not trust it for logs and exec: see --rotate-server-certificates)\n",
			verb, filepath.Join(s.CertDir, bootstrap.SelfSignedCertFile))
		return server.TLSConfig(cert), nil
	}
	m, err := bootstrap.NewServingCertificateManager(bootstrap.ServingRotationConfig{Client: client, CertDir: s.CertDir,
		NodeName: s.NodeName, IPs: ips, DNSNames: names})
	if err != nil {
		return nil, err
	}
	if cur := m.Current(); cur != nil {
		fmt.Printf("serving certificate: %s, valid until %s\n", filepath.Join(s.CertDir, bootstrap.ServerCertPrefix+"-current.pem"),
			cur.Leaf.NotAfter.UTC().Format(time.RFC3339))
	} else {
		fmt.Println("serving certificate: none yet: a kubernetes.io/kubelet-serving CSR waits for an admin's approval (kubectl certificate approve)")
	}
	m.Start()
	wg.Go(func() { <-ctx.Done(); m.Stop() })
	bootstrap.ReportCertificates(ctx, wg, m, "serving", os.Stdout, 0, nil)
	return bootstrap.ServingTLSConfig(m), nil
}

// clusterCA is the CA the kubelet API checks client certificates against:
// the KubeletConfiguration's clientCAFile, or else the node kubeconfig's CA.
func clusterCA(cfg *rest.Config, clientCAFile string) ([]byte, error) {
	if clientCAFile == "" && len(cfg.CAData) > 0 {
		return cfg.CAData, nil
	}
	if clientCAFile == "" {
		clientCAFile = cfg.CAFile
	}
	if clientCAFile == "" {
		return nil, errors.New("no client CA: the node kubeconfig has no CA and the config sets no authentication.x509.clientCAFile")
	}
	b, err := os.ReadFile(clientCAFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("client CA %s: %w", clientCAFile, err)
	}
	return b, err
}

func staticFrom(path string) string {
	if path == "" {
		return ""
	}
	return " and " + path
}

// ready is the node's Ready condition in one phrase.
func ready(n *v1.Node) string {
	if _, c := nodestatus.GetNodeCondition(&n.Status, v1.NodeReady); c != nil && c.Status != v1.ConditionTrue {
		return fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
	}
	return "Ready=True"
}
