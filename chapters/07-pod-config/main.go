// Pod config: merge static pods and API server pods into one stream of changes, kept by the pod manager.
package main

import (
	"context"
	"fmt"
	"os"
	"sync"

	"k8s.io/utils/clock"

	"mykubelet/mylib/config"
	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/options"
	kubepod "mykubelet/mylib/pod"
	"mykubelet/mylib/server"
)

func main() {
	o := options.New("07-pod-config")
	o.UseNodeKubeconfig("go run ./chapters/03-tls-bootstrap")
	sources := o.PodSources()
	debug := o.DebugServer()
	o.Main(os.Args[1:], func(ctx context.Context) error {
		lis, err := debug.Listen()
		if err != nil {
			return err
		}
		client, err := o.NodeClientset(ctx, "go run ./chapters/04-register-node")
		if err != nil {
			return err
		}
		clk := clock.RealClock{}
		ctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()

		// The two sources, merged by PodConfig.
		cfg := config.NewPodConfig(clk)
		files, err := config.NewSourceFile(config.SourceFileConfig{Path: sources.ManifestPath, NodeName: o.NodeName,
			Period: sources.FileCheckFrequency, Updates: cfg.Channel(ctx, kubetypes.FileSource), Clock: clk})
		if err != nil {
			return err
		}
		wg.Go(func() { files.Run(ctx) })
		wg.Go(func() {
			config.NewSourceApiserver(client, o.NodeName, cfg.Channel(ctx, kubetypes.ApiserverSource)).Run(ctx)
		})
		fmt.Printf("watching %s and the API server for pods of node %s\n", sources.ManifestPath, o.NodeName)

		// The kubelet's sync loop with its config branch only: each update
		// goes to the pod manager (HandlePodAdditions, HandlePodUpdates, …);
		// housekeeping keeps the mirror pods. The next chapter adds the pod
		// workers.
		pm := kubepod.NewBasicPodManager()
		kl, err := kubelet.New(kubelet.Config{Client: client, NodeName: o.NodeName, Clock: clk, Pods: &kubelet.PodsConfig{
			Updates: cfg.Updates(), SourcesReady: cfg.SeenAllSources, WithoutWorkers: true,
			HousekeepingPeriod: sources.HousekeepingInterval, PodManager: pm, Out: os.Stdout,
		}})
		if err != nil {
			return err
		}
		server.ServeHTTP(ctx, &wg, lis, server.NewDebugServer(pm))
		fmt.Printf("debug server on http://%s/pods\n", lis.Addr())

		err = kl.RunPods(ctx)
		fmt.Println("stopped")
		return err
	})
}
