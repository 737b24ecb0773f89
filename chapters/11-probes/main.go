// Probes: the kubelet of chapter 09 with its prober, so that startup, liveness and readiness probes decide a pod's Ready, its restarts and its Service endpoints.
//
// The mock runtime makes its pods' IPs reachable (a network namespace with
// a veth pair, when run as root), the images of the Kubernetes docs' probe
// examples serve on them, and its control API (a unix socket only your user
// can reach) makes a container's probe targets fail and recover.
package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/events"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/nodestatus"
	"mykubelet/mylib/options"
	"mykubelet/mylib/pleg"
	"mykubelet/mylib/prober"
	"mykubelet/mylib/server"
	"mykubelet/mylib/statedir"
)

func main() {
	o := options.New("11-probes")
	o.UseNodeKubeconfig("go run ./chapters/03-tls-bootstrap")
	sources := o.PodSources()
	rt := o.Runtime(pleg.RelistPeriod)
	maxPods := o.MaxPods(nodestatus.DefaultMaxPods)
	var nodeIP net.IP
	o.Flags.TextVar(&nodeIP, "node-ip", net.IP(nil), "the node's InternalIP, the pods' hostIP (default: the address of the interface with the default route)")
	podLogs := o.Flags.String("pod-logs-dir", "", "where containers' logs go (default: <state-dir>/pod-logs)")
	podCIDR := o.Flags.String("pod-cidr", fakeruntime.DefaultPodCIDR, "the mock runtime's pod IPs, made reachable in its own network namespace")
	var control fakeruntime.ControlFlag
	o.Flags.Var(&control, "control-address", fakeruntime.ControlFlagUsage)
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
		clk := clock.RealClock{}
		ctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()

		// The probes may reach loopback, and the pod network when there is one.
		reach, why := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, ""
		if rt.Fake {
			mock, err := fakeruntime.NewRuntime(fakeruntime.Config{Clock: clk, PodCIDR: *podCIDR, PodNetwork: true})
			if err != nil {
				return err
			}
			if err := mock.PodNetworkError(); err != nil {
				why = "the mock runtime has no pod network"
				fmt.Printf("pod network: none (%v); httpGet, tcpSocket and grpc probes will fail\n", err)
			} else {
				ns, veth := mock.PodNetworkName()
				reach = append(reach, mock.PodCIDR())
				fmt.Printf("pod network: %s in network namespace %s, reached through %s\n", mock.PodCIDR(), ns, veth)
			}
			if err := fakeruntime.ServeEndpoint(ctx, &wg, mock, rt.Endpoint); err != nil {
				mock.Close()
				return err
			}
			if path := control.Path(o.StateDir); path != "" {
				cl, err := fakeruntime.ListenControl(path)
				if err != nil {
					return fmt.Errorf("control API: %w", err)
				}
				server.ServeHTTP(ctx, &wg, cl, fakeruntime.NewControlHandler(mock))
				fmt.Printf("control API: unix://%s (curl it for help)\n", path)
			}
		} else {
			reach = append(reach, netip.MustParsePrefix(*podCIDR)) // the runtime's own pod network
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

		// This chapter: the same Kubelet as chapter 09, with Probes.
		kl, err := kubelet.New(kubelet.Config{Client: client, NodeName: o.NodeName, Clock: clk,
			Node: &kubelet.NodeConfig{
				Annotations: o.NodeAnnotations(), // which chapter runs as the node (an instructor's status view reads it)
				Status:      &kubelet.NodeStatusOptions{RootDir: o.StateDir, MaxPods: *maxPods, NodeIP: nodeIP},
				OnStatusPatched: func(n *v1.Node, _ []byte, reason string) {
					fmt.Printf("node %s: status written (%s)\n", n.Name, reason)
				},
			},
			Pods: &kubelet.PodsConfig{
				Updates: podConfig.Updates(), SourcesReady: podConfig.SeenAllSources,
				RemoteRuntimeService: runtime.RuntimeService(), RemoteImageService: runtime.ImageService(), RelistPeriod: rt.RelistPeriod,
				HousekeepingPeriod: sources.HousekeepingInterval, RunContainers: true, Recorder: recorder, PodLogsDirectory: *podLogs, Out: os.Stdout,
				Probes: true, ProbeDial: prober.GuardedDialer(reach, why),
			},
		})
		if err != nil {
			return err
		}
		fmt.Printf("kubelet %s: probes on; runtime %s %s; Ctrl-C to stop\n", o.NodeName, runtime.Type(), rt.Endpoint)
		err = kl.Run(ctx)
		fmt.Println("stopped (the mock runtime, its containers and its pod network with it)")
		return err
	})
}
