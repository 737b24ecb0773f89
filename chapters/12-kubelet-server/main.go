// The kubelet's server: `kubectl logs` and `kubectl exec` reach our node over HTTPS, authenticated and authorized.
//
// Chapter 09's kubelet, plus its API on port 10250: a serving certificate
// from a kubernetes.io/kubelet-serving CSR that an admin approves; every
// request authenticated (client certificate or TokenReview) and authorized
// (SubjectAccessReview); container logs read from the runtime's CRI log
// files; exec and attach proxied to the runtime's streaming server.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/bootstrap"
	"mykubelet/mylib/events"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/nodestatus"
	"mykubelet/mylib/options"
	"mykubelet/mylib/pleg"
	kubepod "mykubelet/mylib/pod"
	"mykubelet/mylib/server"
	"mykubelet/mylib/statedir"
)

func main() {
	o := options.New("12-kubelet-server")
	o.UseNodeKubeconfig("go run ./chapters/03-tls-bootstrap")
	sources := o.PodSources()
	rt := o.Runtime(pleg.RelistPeriod)
	maxPods := o.MaxPods(nodestatus.DefaultMaxPods)
	port := o.Port("port", server.DefaultPort, "the kubelet API's port (status.daemonEndpoints.kubeletEndpoint.port)")
	nodeIP := net.IPv4(127, 0, 0, 1)
	o.Flags.TextVar(&nodeIP, "node-ip", nodeIP, "the node's InternalIP: the API server dials the kubelet there, and it is the serving certificate's IP")
	certTimeout := o.Flags.Duration("serving-cert-timeout", bootstrap.DefaultServingCertificateTimeout, "how long to wait for `kubectl certificate approve`")
	clientCAFile := o.Flags.String("client-ca-file", "", "CA of the client certificates to accept (default: the node kubeconfig's CA, the cluster CA)")
	podLogs := o.Flags.String("pod-logs-dir", "", "where containers' logs go (default: <state-dir>/pod-logs)")
	o.Main(os.Args[1:], func(ctx context.Context) error {
		if *podLogs == "" {
			*podLogs = statedir.Path(o.StateDir, "pod-logs")
		}
		if err := os.MkdirAll(*podLogs, 0o700); err != nil {
			return err
		}
		_, cfg, err := o.Clientset(ctx)
		if err != nil {
			return err
		}
		client, eventClient, err := kubelet.NewClients(cfg)
		if err != nil {
			return err
		}
		clientCA := cfg.CAData
		if *clientCAFile != "" || len(clientCA) == 0 {
			if clientCA, err = os.ReadFile(firstNonEmpty(*clientCAFile, cfg.CAFile)); err != nil {
				return fmt.Errorf("--client-ca-file: %w", err)
			}
		}
		clk := clock.RealClock{}
		ctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()

		// Chapters 05–09: the runtime, the pod sources, the events.
		if rt.Fake {
			if err := fakeruntime.ServeEndpoint(ctx, &wg, fakeruntime.New(clk), rt.Endpoint); err != nil {
				return err
			}
		}
		runtime, err := kuberuntime.Connect(ctx, rt.Endpoint, clk)
		if err != nil {
			return err
		}
		defer runtime.Close()
		// Chapter 07: the pod sources (static pod files, the API server), merged.
		podConfig, err := kubelet.MakePodSourceConfig(ctx, &wg, kubelet.PodSources{StaticPodPath: sources.ManifestPath,
			FileCheckFrequency: sources.FileCheckFrequency, Client: client, NodeName: o.NodeName, Clock: clk})
		if err != nil {
			return err
		}
		recorder, stopEvents := events.NewRecorder(ctx, eventClient, o.NodeName)
		defer stopEvents()

		// This chapter: the kubelet API, sharing the pod manager.
		pods := kubepod.NewBasicPodManager()
		err = server.Run(ctx, &wg, server.RunConfig{
			Config: server.Config{NodeName: o.NodeName, Pods: pods, Runtime: runtime.RuntimeService(), Clock: clk},
			Client: client, ClientCA: clientCA, NodeIP: nodeIP, Port: *port, Out: os.Stdout,
			CertDir: filepath.Dir(statedir.Path(o.StateDir, statedir.ClientCertCurrent)), CertTimeout: *certTimeout,
		})
		if err != nil {
			return err
		}
		kl, err := kubelet.New(kubelet.Config{Client: client, NodeName: o.NodeName, Clock: clk,
			Node: &kubelet.NodeConfig{
				Annotations: o.NodeAnnotations(), // which chapter runs as the node (an instructor's status view reads it)
				Status:      &kubelet.NodeStatusOptions{RootDir: o.StateDir, MaxPods: *maxPods, NodeIP: nodeIP, Port: int32(*port)},
				OnStatusPatched: func(n *v1.Node, _ []byte, reason string) {
					fmt.Printf("node %s: status written (%s): %s\n", n.Name, reason, ready(n))
				},
			},
			Pods: &kubelet.PodsConfig{
				Updates: podConfig.Updates(), SourcesReady: podConfig.SeenAllSources,
				RemoteRuntimeService: runtime.RuntimeService(), RemoteImageService: runtime.ImageService(), RelistPeriod: rt.RelistPeriod, PodManager: pods,
				HousekeepingPeriod: sources.HousekeepingInterval, RunContainers: true, Recorder: recorder, PodLogsDirectory: *podLogs, Out: os.Stdout,
			},
		})
		if err != nil {
			return err
		}
		fmt.Printf("kubelet %s: pods from %s and the API server, runtime %s %s; Ctrl-C to stop\n",
			o.NodeName, sources.ManifestPath, runtime.Type(), rt.Endpoint)
		err = kl.Run(ctx)
		fmt.Println("stopped")
		return err
	})
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ready is the node's Ready condition in one phrase.
func ready(n *v1.Node) string {
	if _, c := nodestatus.GetNodeCondition(&n.Status, v1.NodeReady); c != nil && c.Status != v1.ConditionTrue {
		return fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
	}
	return "Ready=True"
}
