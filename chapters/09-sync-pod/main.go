// SyncPod and the status manager: the whole kubelet in one process, and the pods it runs are Running in kubectl.
//
// The node half of chapter 04 (registration, status, Lease) runs beside the
// pod half of chapter 08, whose SyncPod now does the work: a sandbox, the
// images by pull policy, the init containers in order, the containers by
// restart policy, all through the CRI; the pod's status goes to the API
// server through the status manager, and events say what happened.
package main

import (
	"context"
	"fmt"
	"net"
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
	"mykubelet/mylib/statedir"
)

func main() {
	o := options.New("09-sync-pod")
	o.UseNodeKubeconfig("go run ./chapters/03-tls-bootstrap")
	sources := o.PodSources()
	rt := o.Runtime(pleg.RelistPeriod)
	maxPods := o.MaxPods(nodestatus.DefaultMaxPods)
	var nodeIP net.IP
	o.Flags.TextVar(&nodeIP, "node-ip", net.IP(nil), "the node's InternalIP, the pods' hostIP (default: the address of the interface with the default route)")
	podLogs := o.Flags.String("pod-logs-dir", "", "where containers' logs go (default: <state-dir>/pod-logs)")
	o.Main(os.Args[1:], func(ctx context.Context) error {
		if *podLogs == "" {
			*podLogs = statedir.Path(o.StateDir, "pod-logs")
		}
		if err := os.MkdirAll(*podLogs, 0o700); err != nil {
			return err
		}
		// The node's credentials: a client for pods and the node, one for
		// events, each at the kubelet's rates.
		_, cfg, err := o.Clientset(ctx) // checks that the API server answers
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

		// Chapter 05: the runtime, served here unless --fake-runtime=false.
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

		// Events as the kubelet records them: source "kubelet", host the node.
		recorder, stopEvents := events.NewRecorder(ctx, eventClient, o.NodeName)
		defer stopEvents()

		// This chapter: both halves in one Kubelet, and SyncPod for real.
		kl, err := kubelet.New(kubelet.Config{Client: client, NodeName: o.NodeName, Clock: clk,
			Node: &kubelet.NodeConfig{
				Annotations:  o.NodeAnnotations(), // which chapter runs as the node (an instructor's status view reads it)
				Status:       &kubelet.NodeStatusOptions{RootDir: o.StateDir, MaxPods: *maxPods, NodeIP: nodeIP},
				OnRegistered: func(n *v1.Node, created bool) { fmt.Printf("node %s: registered (created %t)\n", n.Name, created) },
				OnStatusPatched: func(n *v1.Node, _ []byte, reason string) {
					fmt.Printf("node %s: status written (%s): %s\n", n.Name, reason, ready(n))
				},
			},
			Pods: &kubelet.PodsConfig{
				Updates: podConfig.Updates(), SourcesReady: podConfig.SeenAllSources,
				RemoteRuntimeService: runtime.RuntimeService(), RemoteImageService: runtime.ImageService(), RelistPeriod: rt.RelistPeriod,
				HousekeepingPeriod: sources.HousekeepingInterval, RunContainers: true, Recorder: recorder, PodLogsDirectory: *podLogs, Out: os.Stdout,
			},
		})
		if err != nil {
			return err
		}
		fmt.Printf("kubelet %s: pods from %s and the API server, runtime %s %s; Ctrl-C to stop\n",
			o.NodeName, sources.ManifestPath, runtime.Type(), rt.Endpoint)
		err = kl.Run(ctx)
		if rt.Fake {
			fmt.Println("stopped (the mock runtime, and its containers, with it)")
		} else {
			fmt.Println("stopped (the containers keep running in the runtime; started again, the kubelet adopts them)")
		}
		return err
	})
}

// ready is the node's Ready condition in one phrase (the setters always write one).
func ready(n *v1.Node) string {
	if _, c := nodestatus.GetNodeCondition(&n.Status, v1.NodeReady); c != nil && c.Status != v1.ConditionTrue {
		return fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
	}
	return fmt.Sprintf("Ready=True, runtime %s", n.Status.NodeInfo.ContainerRuntimeVersion)
}
