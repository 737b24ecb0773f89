// Stats and metrics: the node's and its pods' CPU, memory and disk on /stats/summary and /metrics/resource, for `kubectl top` and the HPA, and the kubelet's own series on /metrics.
//
// Chapter 15's kubelet, volumes and API server included, measuring: the
// stats provider reads each container's CPU time and memory from the
// runtime (CRI ContainerStats), its volumes and logs from disk, and the
// node's from the pods' sums and the kubelet's own; /stats/summary serves
// it whole, /metrics/resource as the few series metrics-server scrapes
// every 15 s. The kubelet also records its own series as it works (pod
// start latency, PLEG relists, pod workers, runtime operations) on
// /metrics, shows its configuration on /configz, and /healthz fails when
// its sync loop stops.
package main

import (
	"context"
	"net"
	"os"

	"mykubelet/mylib/app"
	"mykubelet/mylib/bootstrap"
	"mykubelet/mylib/options"
	"mykubelet/mylib/server"
)

func main() {
	o := options.New("16-stats-metrics")
	o.UseNodeKubeconfig("go run ./chapters/03-tls-bootstrap")
	flags := app.AddFlags(o, net.IPv4(127, 0, 0, 1)) // chapter 09's flags; the API server dials the node IP
	port := o.Port("port", server.DefaultPort, "the kubelet API's port (status.daemonEndpoints.kubeletEndpoint.port: metrics-server scrapes it there)")
	certTimeout := o.Flags.Duration("serving-cert-timeout", bootstrap.DefaultServingCertificateTimeout, "how long to wait for `kubectl certificate approve`")
	clientCAFile := o.Flags.String("client-ca-file", "", "CA of the client certificates to accept (default: the node kubeconfig's CA, the cluster CA)")
	o.Main(os.Args[1:], func(ctx context.Context) error {
		// Chapter 15's Kubelet, plus the stats provider and the
		// kubelet's series, served on its API.
		s := flags.KubeletServer()
		s.EnableServer, s.ServingCertTimeout = true, *certTimeout
		s.KubeletConfiguration.Port, s.KubeletConfiguration.Authentication.X509.ClientCAFile = int32(*port), *clientCAFile
		s.Volumes = true
		s.Stats = true
		s.Banner = "stats: /stats/summary, /metrics/resource, /metrics, /metrics/probes, /configz; /healthz checks syncloop and pleg"
		return app.Run(ctx, s)
	})
}
