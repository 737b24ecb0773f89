// The kubelet's server: `kubectl logs` and `kubectl exec` reach our node over HTTPS, authenticated and authorized.
//
// Chapter 09's kubelet, plus its API on port 10250: a serving certificate
// from a kubernetes.io/kubelet-serving CSR that an admin approves; every
// request authenticated (client certificate or TokenReview) and authorized
// (SubjectAccessReview); container logs read from the runtime's CRI log
// files; exec and attach proxied to the runtime's streaming server.
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
	o := options.New("12-kubelet-server")
	o.UseNodeKubeconfig("go run ./chapters/03-tls-bootstrap")
	flags := app.AddFlags(o, net.IPv4(127, 0, 0, 1)) // chapter 09's flags; the API server dials the node IP
	port := o.Port("port", server.DefaultPort, "the kubelet API's port (status.daemonEndpoints.kubeletEndpoint.port)")
	certTimeout := o.Flags.Duration("serving-cert-timeout", bootstrap.DefaultServingCertificateTimeout, "how long to wait for `kubectl certificate approve`")
	clientCAFile := o.Flags.String("client-ca-file", "", "CA of the client certificates to accept (default: the node kubeconfig's CA, the cluster CA)")
	o.Main(os.Args[1:], func(ctx context.Context) error {
		// Chapter 09's Kubelet, plus the kubelet API (startKubelet serves
		// it, with the Kubelet's pod manager, before Kubelet.Run).
		s := flags.KubeletServer()
		s.EnableServer, s.ServingCertTimeout = true, *certTimeout
		s.KubeletConfiguration.Port, s.KubeletConfiguration.Authentication.X509.ClientCAFile = int32(*port), *clientCAFile
		return app.Run(ctx, s)
	})
}
