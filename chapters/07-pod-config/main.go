// Pod config: merge static pods and API server pods into one stream of changes, kept by the pod manager.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"mykubelet/mylib/config"
	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/options"
	kubepod "mykubelet/mylib/pod"
	"mykubelet/mylib/server"
	"mykubelet/mylib/statedir"
)

func main() {
	o := options.New("07-pod-config")
	manifestPath := o.Flags.String("pod-manifest-path", "", "directory of static pod manifests (default: <state-dir>/manifests)")
	fileCheck := o.Flags.Duration("file-check-frequency", config.DefaultFileCheckFrequency, "how often to relist the manifests even when nothing changed")
	housekeeping := o.Flags.Duration("housekeeping-interval", 2*time.Second, "how often to check mirror pods against static pods")
	debugAddr := o.Flags.String("debug-address", "127.0.0.1:10255", "loopback address of the debug server (/pods); port 0 picks a free one")
	o.Main(os.Args[1:], func(ctx context.Context) error {
		o.UseNodeKubeconfig()
		if *manifestPath == "" {
			*manifestPath = statedir.Path(o.StateDir, statedir.ManifestDir)
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

		// The two sources, merged by PodConfig.
		cfg := config.NewPodConfig(clock.RealClock{})
		go config.NewSourceFile(*manifestPath, o.NodeName, *fileCheck, cfg.Channel(ctx, kubetypes.FileSource)).Run(ctx)
		go config.NewSourceApiserver(client, o.NodeName, cfg.Channel(ctx, kubetypes.ApiserverSource)).Run(ctx)
		fmt.Printf("watching %s and the API server for pods of node %s\n", *manifestPath, o.NodeName)

		pm := kubepod.NewBasicPodManager()
		mc := kubepod.NewBasicMirrorClient(client, o.NodeName, nil)
		srv := &http.Server{Handler: server.NewDebugServer(pm), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(lis) }() // returns when Shutdown closes it
		defer srv.Shutdown(context.Background())
		fmt.Printf("debug server on http://%s/pods\n", lis.Addr())

		tick := time.NewTicker(*housekeeping)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				fmt.Println("stopped")
				return nil
			case u := <-cfg.Updates():
				handleUpdate(pm, u)
			case <-tick.C:
			}
			if cfg.SeenAllSources() { // before that, every mirror pod would look orphaned
				syncMirrorPods(ctx, pm, mc)
			}
		}
	})
}

// handleUpdate is the config branch of the kubelet's syncLoopIteration:
// it keeps the pod manager up to date. (Chapter 08 hands the pods to the pod
// workers as well.)
func handleUpdate(pm kubepod.Manager, u kubetypes.PodUpdate) {
	names := make([]string, 0, len(u.Pods))
	for _, p := range u.Pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	fmt.Printf("SyncLoop %s source=%s pods=[%s]\n", u.Op, u.Source, strings.Join(names, " "))
	for _, p := range u.Pods {
		switch u.Op {
		case kubetypes.ADD:
			pm.AddPod(p)
		case kubetypes.UPDATE, kubetypes.DELETE, kubetypes.RECONCILE:
			pm.UpdatePod(p)
		case kubetypes.REMOVE:
			pm.RemovePod(p)
		}
	}
}

// syncMirrorPods gives each static pod a current mirror pod and deletes the
// orphans, from the pod manager's view (which the API watch keeps fresh).
func syncMirrorPods(ctx context.Context, pm kubepod.Manager, mc kubepod.MirrorClient) {
	pods, _, orphans := pm.GetPodsAndMirrorPods()
	for _, p := range pods {
		if !kubetypes.IsStaticPod(p) {
			continue
		}
		mirror, _ := pm.GetMirrorPodByPod(p)
		action, err := kubepod.SyncMirrorPod(ctx, mc, p, mirror)
		if err != nil {
			klog.ErrorS(err, "Syncing the mirror pod failed; will retry", "pod", klog.KObj(p))
		} else if action != kubepod.MirrorUnchanged {
			fmt.Printf("mirror pod %s/%s %s\n", p.Namespace, p.Name, action)
		}
	}
	for _, name := range orphans {
		if deleted, err := mc.DeleteMirrorPod(ctx, name, nil); err != nil {
			klog.ErrorS(err, "Deleting an orphaned mirror pod failed; will retry", "podFullName", name)
		} else if deleted {
			n, ns, _ := kubetypes.ParsePodFullName(name)
			fmt.Printf("mirror pod %s/%s deleted (its manifest is gone)\n", ns, n)
		}
	}
}
