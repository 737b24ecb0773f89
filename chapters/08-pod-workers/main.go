// Pod workers: one goroutine per pod syncs its updates in order, after the pod cache has a newer status.
package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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
		useNodeKubeconfig(o)
		if *manifestPath == "" {
			*manifestPath = statedir.Path(o.StateDir, statedir.ManifestDir)
		}
		if *endpoint == "" {
			*endpoint = "unix://" + statedir.Path(o.StateDir, statedir.RuntimeSocket)
		}
		if err := os.MkdirAll(*manifestPath, 0o700); err != nil {
			return err
		}
		lis, err := listenLoopback(*debugAddr)
		if err != nil {
			return err
		}
		client, _, err := o.Clientset(ctx)
		if err != nil {
			return err
		}
		if err := checkNodeRegistered(ctx, client, o.NodeName); err != nil {
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
		cache := kubecontainer.NewCache()
		p := pleg.NewGenericPLEG(runtime, make(chan *pleg.PodLifecycleEvent, pleg.ChannelCapacity),
			&pleg.RelistDuration{RelistPeriod: *relistPeriod, RelistThreshold: pleg.RelistThreshold}, cache, clk)
		wg.Add(1)
		go func() { defer wg.Done(); p.Run(ctx) }()

		// Chapter 07: the pod sources, merged, and the pod manager.
		cfg := config.NewPodConfig(clk)
		go config.NewSourceFile(*manifestPath, o.NodeName, *fileCheck, cfg.Channel(ctx, kubetypes.FileSource)).Run(ctx)
		go config.NewSourceApiserver(client, o.NodeName, cfg.Channel(ctx, kubetypes.ApiserverSource)).Run(ctx)
		pm := kubepod.NewBasicPodManager()

		// This chapter: the pod workers, driven by the kubelet's sync loop.
		kl := kubelet.New(client, o.NodeName, pm, cache, clk, os.Stdout)
		kl.SourcesReady = cfg.SeenAllSources

		debug := server.NewDebugServer(pm)
		debug.Handle(server.PodCachePattern, server.NewPodCacheHandler(pm, cache, clk))
		srv := &http.Server{Handler: debug, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(lis) }() // returns when Shutdown closes it
		defer srv.Shutdown(context.Background())

		fmt.Printf("watching %s and the API server for pods of node %s; PLEG relists %s every %s\n", *manifestPath, o.NodeName, *endpoint, *relistPeriod)
		fmt.Printf("debug server on http://%s/pods (POST /podcache/<uid> sets a pod status)\n", lis.Addr())
		kl.Run(ctx, cfg.Updates(), p.Watch())
		fmt.Println("stopped")
		return nil
	})
}

// listenLoopback refuses anything but a loopback address: the debug server
// has no authentication.
func listenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--debug-address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("--debug-address %q: use 127.0.0.1 or localhost; the debug server has no authentication", addr)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("debug server: %w", err)
	}
	return lis, nil
}

// useNodeKubeconfig makes the node's own kubeconfig (chapter 03) the default.
func useNodeKubeconfig(o *options.Options) {
	if o.Kubeconfig != "" {
		return
	}
	if p := statedir.Path(o.StateDir, statedir.NodeKubeconfig); fileExists(p) {
		o.Kubeconfig = p
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// checkNodeRegistered fails clearly when there is no Node (chapter 04).
func checkNodeRegistered(ctx context.Context, client kubernetes.Interface, node string) error {
	_, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("node %q is not registered; mirror pods need their Node: run chapter 04 first (go run ./chapters/04-register-node --node-name %s)", node, node)
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", node, err)
	}
	return nil
}
