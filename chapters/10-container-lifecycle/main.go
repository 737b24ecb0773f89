// When containers end: restarts with CrashLoopBackOff, graceful termination with hooks, and garbage collection.
//
// The whole kubelet of chapter 09, with what upstream does about containers
// that end switched on: dead containers and sandboxes collected every
// minute by the kubelet's GC policy, expired back-offs and orphaned runtime
// pods cleaned up at housekeeping, pods past activeDeadlineSeconds failed.
// Run it against a runtime of its own (chapter 05, --fake-runtime=false)
// and a Ctrl-C of the kubelet stops nothing that runs.
package main

import (
	"context"
	"fmt"
	"os"

	"mykubelet/mylib/app"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/options"
)

func main() {
	o := options.New("10-container-lifecycle")
	o.UseNodeKubeconfig("go run ./chapters/03-tls-bootstrap")
	flags := app.AddFlags(o, nil) // chapter 09's flags
	gc := kuberuntime.DefaultGCPolicy()
	gc.AddFlags(o.Flags) // --minimum-container-ttl-duration, --maximum-dead-containers(-per-container)
	o.Main(os.Args[1:], func(ctx context.Context) error {
		// Chapter 09's Kubelet; this chapter adds ContainerGC and ActiveDeadline.
		s := flags.KubeletServer()
		s.ContainerGC, s.ActiveDeadline = &gc, true
		s.Banner = fmt.Sprintf("container GC every %v: keep %d dead container(s) per container, %d on the node, older than %v",
			kuberuntime.ContainerGCPeriod, gc.MaxPerPodContainer, gc.MaxContainers, gc.MinAge)
		return app.Run(ctx, s)
	})
}
