// Volumes: a pod's ConfigMaps, Secrets, service-account token, emptyDir and downward API, mounted as upstream's volume manager mounts them.
//
// Chapter 12's kubelet, API server included, with the volume manager on:
// before a pod's containers start, each of its volumes is set up in a
// directory under the pods directory of the state directory (written as
// upstream's atomic writer does, and rewritten when its source changes),
// and the runtime maps it into the containers with /etc/hosts,
// /etc/resolv.conf and the termination-message file. A volume of a kind
// this node cannot mount (a persistentVolumeClaim, nfs, csi…) leaves the
// pod ContainerCreating with a FailedMount event, as a real kubelet
// without that plugin does.
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
	o := options.New("15-volumes")
	o.UseNodeKubeconfig("go run ./chapters/03-tls-bootstrap")
	flags := app.AddFlags(o, net.IPv4(127, 0, 0, 1)) // chapter 09's flags; the API server dials the node IP
	port := o.Port("port", server.DefaultPort, "the kubelet API's port (status.daemonEndpoints.kubeletEndpoint.port)")
	certTimeout := o.Flags.Duration("serving-cert-timeout", bootstrap.DefaultServingCertificateTimeout, "how long to wait for `kubectl certificate approve`")
	clientCAFile := o.Flags.String("client-ca-file", "", "CA of the client certificates to accept (default: the node kubeconfig's CA, the cluster CA)")
	o.Main(os.Args[1:], func(ctx context.Context) error {
		// Chapter 12's Kubelet and its API, plus the volume manager: the
		// pods' volumes, /etc/hosts, /etc/resolv.conf and the
		// termination-message file mounted into their containers.
		s := flags.KubeletServer()
		s.EnableServer, s.ServingCertTimeout = true, *certTimeout
		s.KubeletConfiguration.Port, s.KubeletConfiguration.Authentication.X509.ClientCAFile = int32(*port), *clientCAFile
		s.Volumes = true
		return app.Run(ctx, s)
	})
}
