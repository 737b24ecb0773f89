// What kubectl expects: sidecars, port-forward, cp, attach and debug, the node's own pod range, and a node status that tells everything.
//
// Chapter 17's kubelet, with every part turned on that the Kubernetes
// documentation's everyday commands need of a node: restartable init
// containers (sidecars) that start before the main containers and stop
// after them; the runtime's streaming server behind the kubelet API for
// `kubectl port-forward`, `kubectl attach` and `kubectl cp` (a tar in the
// mock's sandbox); ephemeral containers for `kubectl debug`; the pod range
// the controller manager gives the node (spec.podCIDR), passed to the
// runtime with CRI UpdateRuntimeConfig; and a node status with the
// node's images, its System UUID and the kubelet's events.
package main

import (
	"context"
	"net"
	"os"

	"mykubelet/mylib/app"
	"mykubelet/mylib/bootstrap"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/options"
	"mykubelet/mylib/server"
)

func main() {
	o := options.New("18-what-kubectl-expects")
	o.UseNodeKubeconfig("go run ./chapters/03-tls-bootstrap")
	flags := app.AddFlags(o, net.IPv4(127, 0, 0, 1)) // chapter 09's flags; the API server dials the node IP
	port := o.Port("port", server.DefaultPort, "the kubelet API's port (kubectl exec, attach, port-forward and cp reach the node there)")
	certTimeout := o.Flags.Duration("serving-cert-timeout", bootstrap.DefaultServingCertificateTimeout, "how long to wait for `kubectl certificate approve`")
	clientCAFile := o.Flags.String("client-ca-file", "", "CA of the client certificates to accept (default: the node kubeconfig's CA, the cluster CA)")
	podCIDR := o.Flags.String("pod-cidr", fakeruntime.DefaultPodCIDR, "the mock runtime's pod IPs until the node has a spec.podCIDR (then the controller manager's range)")
	pressure := app.AddNodePressureFlags(o) // chapter 17's eviction and image flags, and the mock machine's
	gc := kuberuntime.DefaultGCPolicy()
	o.Main(os.Args[1:], func(ctx context.Context) error {
		// Chapter 17's Kubelet (volumes, stats, eviction, image and
		// container GC), with the probes (a sidecar's startup probe gates
		// the containers after it), admission and active deadlines, and
		// the mock runtime's pod network, where port-forward connects.
		s := flags.KubeletServer()
		s.EnableServer, s.ServingCertTimeout = true, *certTimeout
		s.KubeletConfiguration.Port, s.KubeletConfiguration.Authentication.X509.ClientCAFile = int32(*port), *clientCAFile
		s.Volumes, s.Stats, s.ContainerGC = true, true, &gc
		s.Probes, s.Admit, s.ActiveDeadline = true, true, true
		s.PodNetwork, s.PodCIDR = true, *podCIDR
		if err := pressure.Apply(s); err != nil {
			return err
		}
		s.Banner = "kubectl: exec, attach and port-forward through the kubelet API and the runtime's streaming server (cp needs a tar in the image: chapter 19); debug adds ephemeral containers\n" +
			"sidecars: init containers with restartPolicy Always start before the main containers and stop after them"
		return app.Run(ctx, s)
	})
}
