package main

// run, after upstream's cmd/kubelet/app/server.go; RunKubelet is mylib/app's.

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"mykubelet/mylib/app"
	"mykubelet/mylib/bootstrap"
	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/options"
	"mykubelet/mylib/server"
)

// run is upstream's run: the node's credentials (this program's lines),
// then mylib/app's clients and runtime, then app.RunKubelet.
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
	if deps.ClientCA, err = app.ClientCA(nodeConfig, kc.Authentication.X509.ClientCAFile); err != nil {
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
	if deps.KubeClient, deps.EventClient, err = app.NewClients(ctx, clientConfig, kc); err != nil {
		return err
	}
	// The service account tokens get a client of their own, so that a
	// burst of pods does not queue their tokens and their statuses behind
	// each other (upstream sends both through KubeClient; see README,
	// "How fast it starts pods").
	if deps.TokenClient, err = kubelet.NewTokenClient(clientConfig, *kc.KubeAPIQPS, kc.KubeAPIBurst); err != nil {
		return err
	}
	runtime, err := app.PreInitRuntimeService(ctx, &wg, s.KubeletServer, deps)
	if err != nil {
		return err
	}
	defer runtime.Close()
	fmt.Printf("runtime: %s %s at %s\n", runtime.Type(), runtime.Version().GetRuntimeVersion(), kc.ContainerRuntimeEndpoint)

	// 4. The kubelet API's certificate (upstream: InitializeTLS, in run).
	if deps.TLSOptions, err = servingTLS(ctx, &wg, s, deps.KubeClient); err != nil {
		return err
	}
	return app.RunKubelet(ctx, &wg, s.KubeletServer, deps)
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
