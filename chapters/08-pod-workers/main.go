// Pod workers: one goroutine per pod syncs its updates in order, after the pod cache has a newer status.
package main

import (
	"context"
	"fmt"
	"os"
	"sync"

	"k8s.io/utils/clock"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/options"
	"mykubelet/mylib/pleg"
	kubepod "mykubelet/mylib/pod"
	"mykubelet/mylib/server"
)

func main() {
	o := options.New("08-pod-workers")
	o.UseNodeKubeconfig("go run ./chapters/03-tls-bootstrap")
	sources := o.PodSources()
	rt := o.Runtime(pleg.RelistPeriod) // try --relist-period 1h to watch workers wait for the pod cache
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

		// Chapter 05: the runtime, reached through the CRI.
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

		// Chapter 07: the pod sources (static pod files, the API server),
		// merged; MakePodSourceConfig is that chapter's wiring, as upstream's
		// makePodSourceConfig.
		cfg, err := kubelet.MakePodSourceConfig(ctx, &wg, kubelet.PodSources{StaticPodPath: sources.ManifestPath,
			FileCheckFrequency: sources.FileCheckFrequency, Client: client, NodeName: o.NodeName, Clock: clk})
		if err != nil {
			return err
		}

		// This chapter: the kubelet's pod half. The PLEG and pod cache of
		// chapter 05 feed the pod workers, driven by the sync loop.
		pm, cache := kubepod.NewBasicPodManager(), kubecontainer.NewCache()
		kl, err := kubelet.New(kubelet.Config{Client: client, NodeName: o.NodeName, Clock: clk, Pods: &kubelet.PodsConfig{
			Updates: cfg.Updates(), SourcesReady: cfg.SeenAllSources,
			RemoteRuntimeService: runtime.RuntimeService(), RemoteImageService: runtime.ImageService(), RelistPeriod: rt.RelistPeriod,
			HousekeepingPeriod: sources.HousekeepingInterval, PodManager: pm, PodCache: cache, Out: os.Stdout,
		}})
		if err != nil {
			return err
		}

		debugHandler := server.NewDebugServer(pm)
		debugHandler.Handle(server.PodCachePattern, server.NewPodCacheHandler(pm, cache, clk))
		server.ServeHTTP(ctx, &wg, lis, debugHandler)

		fmt.Printf("watching %s and the API server for pods of node %s; PLEG relists %s every %s\n", sources.ManifestPath, o.NodeName, rt.Endpoint, rt.RelistPeriod)
		fmt.Printf("debug server on http://%s/pods (POST /podcache/<uid> sets a pod status)\n", lis.Addr())
		err = kl.RunPods(ctx)
		fmt.Println("stopped")
		return err
	})
}
