// Pod workers: one goroutine per pod syncs its updates in order, after the pod cache has a newer status.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"mykubelet/mylib/config"
	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/options"
	"mykubelet/mylib/pleg"
	kubepod "mykubelet/mylib/pod"
	"mykubelet/mylib/server"
	"mykubelet/mylib/statedir"
)

func main() {
	o := options.New("08-pod-workers")
	manifestPath := o.Flags.String("pod-manifest-path", "", "directory of static pod manifests (default: <state-dir>/manifests)")
	fileCheck := o.Flags.Duration("file-check-frequency", config.DefaultFileCheckFrequency, "how often to relist the manifests even when nothing changed")
	debugAddr := o.Flags.String("debug-address", "127.0.0.1:10255", "loopback address of the debug server (/pods, /podcache/<uid>); port 0 picks a free one")
	endpoint := o.Flags.String("container-runtime-endpoint", "", "the CRI socket, unix:///path (default: unix://<state-dir>/"+statedir.RuntimeSocket+")")
	fake := o.Flags.Bool("fake-runtime", true, "serve chapter 05's mock CRI runtime on --container-runtime-endpoint in this process")
	relistPeriod := o.Flags.Duration("relist-period", pleg.RelistPeriod, "time between two PLEG relists (try 1h to watch workers wait for the pod cache)")
	o.Main(os.Args[1:], func(ctx context.Context) error {
		if *relistPeriod <= 0 {
			return fmt.Errorf("--relist-period must be positive (got %s)", *relistPeriod)
		}
		o.UseNodeKubeconfig()
		if *manifestPath == "" {
			*manifestPath = statedir.Path(o.StateDir, statedir.ManifestDir)
		}
		if *endpoint == "" {
			*endpoint = "unix://" + statedir.Path(o.StateDir, statedir.RuntimeSocket)
		}
		if err := os.MkdirAll(*manifestPath, 0o700); err != nil {
			return err
		}
		lis, err := server.ListenLoopback("debug-address", *debugAddr)
		if err != nil {
			return err
		}
		client, _, err := o.Clientset(ctx)
		if err != nil {
			return err
		}
		if err := kubepod.CheckNodeRegistered(ctx, client, o.NodeName); err != nil {
			return err
		}
		clk := clock.RealClock{}
		ctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()

		// Chapter 05: the runtime, the pod cache and the PLEG.
		if *fake {
			path, ok := strings.CutPrefix(*endpoint, "unix://")
			if !ok {
				return fmt.Errorf("--container-runtime-endpoint %q: the mock runtime serves only unix:// endpoints", *endpoint)
			}
			rl, err := fakeruntime.ListenUnix(path)
			if err != nil {
				return err
			}
			wg.Add(1)
			go func() { defer wg.Done(); _ = fakeruntime.New(clk).Serve(ctx, rl) }() // nil after ctx ends
		}
		runtime, err := kuberuntime.Connect(ctx, *endpoint, clk)
		if err != nil {
			return err
		}
		defer runtime.Close()

		// Chapter 07: the pod sources, merged.
		cfg := config.NewPodConfig(clk)
		wg.Go(func() {
			config.NewSourceFile(*manifestPath, o.NodeName, *fileCheck, cfg.Channel(ctx, kubetypes.FileSource)).Run(ctx)
		})
		wg.Go(func() {
			config.NewSourceApiserver(client, o.NodeName, cfg.Channel(ctx, kubetypes.ApiserverSource)).Run(ctx)
		})

		// This chapter: the kubelet's pod half. The PLEG and pod cache of
		// chapter 05 feed the pod workers, driven by the sync loop.
		pm, cache := kubepod.NewBasicPodManager(), kubecontainer.NewCache()
		kl, err := kubelet.New(kubelet.Config{Client: client, NodeName: o.NodeName, Clock: clk, Pods: &kubelet.PodsConfig{
			Updates: cfg.Updates(), SourcesReady: cfg.SeenAllSources, Runtime: runtime, RelistPeriod: *relistPeriod,
			PodManager: pm, PodCache: cache, Out: os.Stdout,
		}})
		if err != nil {
			return err
		}

		debug := server.NewDebugServer(pm)
		debug.Handle(server.PodCachePattern, server.NewPodCacheHandler(pm, cache, clk))
		srv := &http.Server{Handler: debug, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(lis) }() // returns when Shutdown closes it
		defer srv.Shutdown(context.Background())

		fmt.Printf("watching %s and the API server for pods of node %s; PLEG relists %s every %s\n", *manifestPath, o.NodeName, *endpoint, *relistPeriod)
		fmt.Printf("debug server on http://%s/pods (POST /podcache/<uid> sets a pod status)\n", lis.Addr())
		err = kl.RunPods(ctx)
		fmt.Println("stopped")
		return err
	})
}
