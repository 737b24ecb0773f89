// Node pressure: the eviction manager watches the node's memory, disk and PIDs and evicts a pod when one runs low; the image GC manager deletes unused images when the image filesystem fills.
//
// Chapter 16's kubelet, watching itself: every 10 s the eviction manager
// reads the summary the stats provider makes, compares each signal
// (memory.available, nodefs.available, imagefs.available, pid.available…)
// with the thresholds (--eviction-hard, --eviction-soft), sets the node's
// MemoryPressure, DiskPressure and PIDPressure conditions, refuses new pods
// while they hold, and evicts one pod per pass, the one that uses most
// above its requests. The image GC manager deletes the images no container
// uses when the image filesystem is fuller than --image-gc-high-threshold.
// The machine is the mock's, of the size the --fake-*-capacity flags give
// it, so that a pod can fill it.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"mykubelet/mylib/app"
	"mykubelet/mylib/bootstrap"
	"mykubelet/mylib/cadvisor"
	"mykubelet/mylib/eviction"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/options"
	"mykubelet/mylib/server"
)

func main() {
	o := options.New("17-node-pressure")
	o.UseNodeKubeconfig("go run ./chapters/03-tls-bootstrap")
	flags := app.AddFlags(o, net.IPv4(127, 0, 0, 1)) // chapter 09's flags; the API server dials the node IP
	port := o.Port("port", server.DefaultPort, "the kubelet API's port (status.daemonEndpoints.kubeletEndpoint.port: metrics-server scrapes it there)")
	certTimeout := o.Flags.Duration("serving-cert-timeout", bootstrap.DefaultServingCertificateTimeout, "how long to wait for `kubectl certificate approve`")
	clientCAFile := o.Flags.String("client-ca-file", "", "CA of the client certificates to accept (default: the node kubeconfig's CA, the cluster CA)")
	// Upstream's --eviction-* and --image-gc-* flags, and the mock
	// machine's size.
	pressure := app.AddNodePressureFlags(o)
	gc := kuberuntime.DefaultGCPolicy()
	o.Main(os.Args[1:], func(ctx context.Context) error {
		// Chapter 16's Kubelet, with the eviction manager and the image
		// GC manager over its stats provider, and chapter 10's container
		// GC: an image stays in use while a dead container of it is kept.
		s := flags.KubeletServer()
		s.EnableServer, s.ServingCertTimeout = true, *certTimeout
		s.KubeletConfiguration.Port, s.KubeletConfiguration.Authentication.X509.ClientCAFile = int32(*port), *clientCAFile
		s.Volumes = true
		s.Stats = true
		s.ContainerGC = &gc
		if err := pressure.Apply(s); err != nil {
			return err
		}
		s.Banner = banner(s)
		return app.Run(ctx, s)
	})
}

// banner says the machine's size and the thresholds the kubelet runs with.
func banner(s *app.KubeletServer) string {
	kc := s.KubeletConfiguration
	gc := ""
	if kc.ImageGCHighThresholdPercent != nil && kc.ImageGCLowThresholdPercent != nil {
		gc = fmt.Sprintf(" from %d%% down to %d%%", *kc.ImageGCHighThresholdPercent, *kc.ImageGCLowThresholdPercent)
	}
	return fmt.Sprintf("node pressure: %s\neviction: every %s, evictionHard %s, transition period %s\ngarbage collection: images every %s%s, dead containers every %s",
		machine(s.MockMachine), eviction.MonitoringInterval, thresholds(kc.EvictionHard), kc.EvictionPressureTransitionPeriod.Duration,
		s.ImageGCPeriod, gc, kuberuntime.ContainerGCPeriod)
}

// machine says the mock machine's size, field by field.
func machine(m cadvisor.MockMachine) string {
	size := func(v int64) string {
		if v == 0 {
			return "the host's"
		}
		return resource.NewQuantity(v, resource.BinarySI).String()
	}
	return fmt.Sprintf("memory %s, nodefs %s, imagefs %s (the mock machine's)", size(m.MemoryCapacity), size(m.NodeFsCapacity), size(m.ImageFsCapacity))
}

// thresholds writes a threshold map as the flag takes it, in order.
func thresholds(m map[string]string) string {
	var t []string
	for signal, value := range m {
		t = append(t, signal+"<"+value)
	}
	sort.Strings(t)
	if len(t) == 0 {
		return "none"
	}
	return strings.Join(t, ",")
}
