// Static pods: run pods from manifest files, and show them in the API server as mirror pods.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"mykubelet/mylib/config"
	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/options"
	kubepod "mykubelet/mylib/pod"
	"mykubelet/mylib/statedir"
)

func main() {
	o := options.New("06-static-pods")
	manifestPath := o.Flags.String("pod-manifest-path", "", "directory of static pod manifests (default: <state-dir>/manifests)")
	fileCheck := o.Flags.Duration("file-check-frequency", config.DefaultFileCheckFrequency, "how often to relist the manifests even when nothing changed")
	housekeeping := o.Flags.Duration("housekeeping-interval", 2*time.Second, "how often to check the mirror pods in the API server")
	o.Main(os.Args[1:], func(ctx context.Context) error {
		o.UseNodeKubeconfig()
		if *manifestPath == "" {
			*manifestPath = statedir.Path(o.StateDir, statedir.ManifestDir)
		}
		if err := os.MkdirAll(*manifestPath, 0o700); err != nil {
			return err
		}
		client, _, err := o.Clientset(ctx)
		if err != nil {
			return err
		}
		if err := kubepod.CheckNodeRegistered(ctx, client, o.NodeName); err != nil {
			return err
		}
		fmt.Printf("watching %s for static pods of node %s\n", *manifestPath, o.NodeName)

		updates := make(chan kubetypes.PodUpdate)
		go config.NewSourceFile(*manifestPath, o.NodeName, *fileCheck, updates).Run(ctx)
		mc := kubepod.NewBasicMirrorClient(client, o.NodeName, nil)

		tick := time.NewTicker(*housekeeping)
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
				staticPods, sourceReady = u.Pods, true
				reportChanges(known, staticPods)
			case <-tick.C:
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
// the node, makes each static pod's mirror pod right (SyncMirrorPod) and
// deletes mirror pods whose manifest is gone. Chapter 07 replaces the list
// with a watch.
func syncMirrorPods(ctx context.Context, client kubernetes.Interface, mc kubepod.MirrorClient, node string, staticPods []*v1.Pod) error {
	list, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return fmt.Errorf("list pods of node %s: %w", node, err)
	}
	mirrors := map[string]*v1.Pod{}
	var mirrorPods []*v1.Pod
	for i := range list.Items {
		if p := &list.Items[i]; kubetypes.IsMirrorPod(p) {
			mirrors[kubetypes.GetPodFullName(p)] = p
			mirrorPods = append(mirrorPods, p)
		}
	}
	var errs []error
	for _, p := range staticPods {
		action, err := kubepod.SyncMirrorPod(ctx, mc, p, mirrors[kubetypes.GetPodFullName(p)])
		if err != nil {
			errs = append(errs, err)
		} else if action != kubepod.MirrorUnchanged {
			fmt.Printf("mirror pod %s/%s %s\n", p.Namespace, p.Name, action)
		}
	}
	for _, name := range kubepod.OrphanedMirrorPods(staticPods, mirrorPods) {
		deleted, err := mc.DeleteMirrorPod(ctx, name, nil)
		if err != nil {
			errs = append(errs, err)
		} else if deleted {
			n, ns, _ := kubetypes.ParsePodFullName(name)
			fmt.Printf("mirror pod %s/%s deleted (its manifest is gone)\n", ns, n)
		}
	}
	return errors.Join(errs...)
}
