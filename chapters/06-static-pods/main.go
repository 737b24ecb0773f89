// Static pods: run pods from manifest files, and show them in the API server as mirror pods.
package main

import (
	"context"
	"fmt"
	"os"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"mykubelet/mylib/config"
	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/options"
	kubepod "mykubelet/mylib/pod"
)

func main() {
	o := options.New("06-static-pods")
	o.UseNodeKubeconfig("go run ./chapters/03-tls-bootstrap")
	sources := o.PodSources()
	o.Main(os.Args[1:], func(ctx context.Context) error {
		client, err := o.NodeClientset(ctx, "go run ./chapters/04-register-node")
		if err != nil {
			return err
		}
		fmt.Printf("watching %s for static pods of node %s\n", sources.ManifestPath, o.NodeName)

		clk := clock.RealClock{}
		ctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		updates := make(chan kubetypes.PodUpdate)
		files, err := config.NewSourceFile(config.SourceFileConfig{Path: sources.ManifestPath, NodeName: o.NodeName,
			Period: sources.FileCheckFrequency, Updates: updates, Clock: clk})
		if err != nil {
			return err
		}
		wg.Go(func() { files.Run(ctx) })
		mc := kubepod.NewBasicMirrorClient(client, o.NodeName, nil)

		tick := clk.NewTicker(sources.HousekeepingInterval)
		defer tick.Stop()
		var staticPods []*v1.Pod
		sourceReady := false            // no housekeeping before the first list: it would see every mirror pod as orphaned
		known := map[string]types.UID{} // full name → UID, to report changes
		for {
			select {
			case <-ctx.Done():
				fmt.Println("stopped")
				return nil
			case u := <-updates:
				// Two manifests naming the same pod: the first wins, as in
				// the kubelet's pod config.
				staticPods, sourceReady = config.FilterDuplicateNames(u.Pods, kubetypes.FileSource), true
				reportChanges(known, staticPods)
			case <-tick.C():
			}
			if !sourceReady {
				continue
			}
			if err := syncMirrorPods(ctx, client, mc, o.NodeName, staticPods); err != nil && ctx.Err() == nil {
				klog.ErrorS(err, "Syncing mirror pods failed; will retry", "node", o.NodeName)
			}
		}
	})
}

// reportChanges prints the static pods that appeared, changed or went away.
func reportChanges(known map[string]types.UID, pods []*v1.Pod) {
	now := map[string]bool{}
	for _, p := range pods {
		name := kubetypes.GetPodFullName(p)
		now[name] = true
		switch uid, ok := known[name]; {
		case !ok:
			fmt.Printf("static pod %s/%s added (uid %s)\n", p.Namespace, p.Name, p.UID)
		case uid != p.UID:
			fmt.Printf("static pod %s/%s changed (uid %s)\n", p.Namespace, p.Name, p.UID)
		}
		known[name] = p.UID
	}
	for name := range known {
		if !now[name] {
			n, ns, _ := kubetypes.ParsePodFullName(name)
			fmt.Printf("static pod %s/%s removed\n", ns, n)
			delete(known, name)
		}
	}
}

// syncMirrorPods is this chapter's housekeeping: it lists the pods bound to
// the node and hands them to kubepod.SyncMirrorPods, which makes each static
// pod's mirror pod right and deletes mirror pods whose manifest is gone.
// The next chapter replaces the list with a watch.
func syncMirrorPods(ctx context.Context, client kubernetes.Interface, mc kubepod.MirrorClient, node string, staticPods []*v1.Pod) error {
	list, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return fmt.Errorf("list pods of node %s: %w", node, err)
	}
	var mirrorPods []*v1.Pod
	for i := range list.Items {
		if p := &list.Items[i]; kubetypes.IsMirrorPod(p) {
			mirrorPods = append(mirrorPods, p)
		}
	}
	return kubepod.SyncMirrorPods(ctx, mc, staticPods, mirrorPods, os.Stdout)
}
