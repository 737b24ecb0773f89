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
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/config"
	"mykubelet/mylib/events"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/nodestatus"
	"mykubelet/mylib/options"
	"mykubelet/mylib/pleg"
	"mykubelet/mylib/statedir"
)

func main() {
	o := options.New("09-sync-pod")
	manifestPath := o.Flags.String("pod-manifest-path", "", "directory of static pod manifests (default: <state-dir>/manifests)")
	fileCheck := o.Flags.Duration("file-check-frequency", config.DefaultFileCheckFrequency, "how often to relist the manifests even when nothing changed")
	endpoint := o.Flags.String("container-runtime-endpoint", "", "the CRI socket, unix:///path (default: unix://<state-dir>/"+statedir.RuntimeSocket+")")
	fake := o.Flags.Bool("fake-runtime", true, "serve the mock CRI runtime on --container-runtime-endpoint in this process; false: use the runtime already there")
	relistPeriod := o.Flags.Duration("relist-period", pleg.RelistPeriod, "time between two PLEG relists")
	podLogs := o.Flags.String("pod-logs-dir", "", "where containers' logs go (default: <state-dir>/pod-logs)")
	maxPods := o.Flags.Int("max-pods", nodestatus.DefaultMaxPods, "pods this node can run (capacity pods)")
	nodeIP := o.Flags.String("node-ip", "", "the node's InternalIP, the pods' hostIP (default: the address of the interface with the default route)")
	o.Main(os.Args[1:], func(ctx context.Context) error {
		if *relistPeriod <= 0 || *fileCheck <= 0 {
			return fmt.Errorf("--relist-period and --file-check-frequency must be positive (got %s, %s)", *relistPeriod, *fileCheck)
		}
		ip := net.ParseIP(*nodeIP)
		if *nodeIP != "" && ip == nil {
			return fmt.Errorf("--node-ip %q is not an IP address", *nodeIP)
		}
		o.UseNodeKubeconfig()
		*manifestPath = orDefault(*manifestPath, statedir.Path(o.StateDir, statedir.ManifestDir))
		*endpoint = orDefault(*endpoint, "unix://"+statedir.Path(o.StateDir, statedir.RuntimeSocket))
		*podLogs = orDefault(*podLogs, statedir.Path(o.StateDir, "pod-logs"))
		if err := errors.Join(os.MkdirAll(*manifestPath, 0o700), os.MkdirAll(*podLogs, 0o700)); err != nil {
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
		if *fake {
			path, ok := strings.CutPrefix(*endpoint, "unix://")
			if !ok {
				return fmt.Errorf("--container-runtime-endpoint %q: the mock runtime serves only unix:// endpoints", *endpoint)
			}
			lis, err := fakeruntime.ListenUnix(path)
			if err != nil {
				return err
			}
			wg.Go(func() { _ = fakeruntime.New(clk).Serve(ctx, lis) }) // nil after ctx ends
		}
		runtime, err := kuberuntime.Connect(ctx, *endpoint, clk)
		if err != nil {
			return err
		}
		defer runtime.Close()

		// Chapter 07: the pod sources, merged.
		podConfig := config.NewPodConfig(clk)
		wg.Go(func() {
			config.NewSourceFile(*manifestPath, o.NodeName, *fileCheck, podConfig.Channel(ctx, kubetypes.FileSource)).Run(ctx)
		})
		wg.Go(func() {
			config.NewSourceApiserver(client, o.NodeName, podConfig.Channel(ctx, kubetypes.ApiserverSource)).Run(ctx)
		})

		// Events as the kubelet records them: source "kubelet, <node>".
		recorder, stopEvents := events.NewRecorder(ctx, eventClient, o.NodeName)
		defer stopEvents()

		// This chapter: both halves in one Kubelet, and SyncPod for real.
		kl, err := kubelet.New(kubelet.Config{Client: client, NodeName: o.NodeName, Clock: clk,
			Node: &kubelet.NodeConfig{
				Status:       &kubelet.NodeStatusOptions{RootDir: o.StateDir, MaxPods: *maxPods, NodeIP: ip},
				OnRegistered: func(n *v1.Node, created bool) { fmt.Printf("node %s: registered (created %t)\n", n.Name, created) },
				OnStatusPatched: func(n *v1.Node, _ []byte, reason string) {
					fmt.Printf("node %s: status written (%s): %s\n", n.Name, reason, ready(n))
				},
			},
			Pods: &kubelet.PodsConfig{
				Updates: podConfig.Updates(), SourcesReady: podConfig.SeenAllSources, Runtime: runtime, RelistPeriod: *relistPeriod,
				RunContainers: true, Recorder: recorder, PodLogsDirectory: *podLogs, Out: os.Stdout,
			},
		})
		if err != nil {
			return err
		}
		fmt.Printf("kubelet %s: pods from %s and the API server, runtime %s %s; Ctrl-C to stop\n",
			o.NodeName, *manifestPath, runtime.Type(), *endpoint)
		err = kl.Run(ctx)
		if *fake {
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

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
