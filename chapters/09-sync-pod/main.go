// SyncPod and the status manager: the whole kubelet in one process, and the pods it runs are Running in kubectl.
//
// The node half of chapter 04 (registration, status, Lease) runs beside the
// pod half of chapter 08, whose SyncPod now does the work: a sandbox, the
// images by pull policy, the init containers in order, the containers by
// restart policy, all through the CRI; the pod's status goes to the API
// server through the status manager, and events say what happened.
//
// The start-up is upstream's cmd/kubelet/app, written once in mylib/app
// (the README walks through it): the node's clients, the runtime (served
// here unless --fake-runtime=false), the pod sources of chapter 07, the
// event recorder, kubelet.NewMainKubelet, Kubelet.Run. Chapters 10 to 13
// start from this Kubelet and add their own lines.
package main

import (
	"context"
	"os"

	"mykubelet/mylib/app"
	"mykubelet/mylib/options"
)

func main() {
	o := options.New("09-sync-pod")
	o.UseNodeKubeconfig("go run ./chapters/03-tls-bootstrap")
	flags := app.AddFlags(o, nil) // the pod sources, the runtime, --max-pods, --node-ip, --pod-logs-dir
	o.Main(os.Args[1:], func(ctx context.Context) error {
		// Both halves in one Kubelet, and SyncPod for real (RunContainers).
		return app.Run(ctx, flags.KubeletServer())
	})
}
