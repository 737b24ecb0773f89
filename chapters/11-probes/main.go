// Probes: the kubelet of chapter 09 with its prober, so that startup, liveness and readiness probes decide a pod's Ready, its restarts and its Service endpoints.
//
// The mock runtime makes its pods' IPs reachable (a network namespace with
// a veth pair, when run as root), the images of the Kubernetes docs' probe
// examples serve on them, and its control API (a unix socket only your user
// can reach) makes a container's probe targets fail and recover.
package main

import (
	"context"
	"os"

	"mykubelet/mylib/app"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/options"
)

func main() {
	var control fakeruntime.ControlFlag // the mock runtime's control API, to make probes fail and recover
	o := options.New("11-probes")
	o.UseNodeKubeconfig("go run ./chapters/03-tls-bootstrap")
	flags := app.AddFlags(o, nil) // chapter 09's flags
	podCIDR := o.Flags.String("pod-cidr", fakeruntime.DefaultPodCIDR, "the mock runtime's pod IPs, made reachable in its own network namespace")
	o.Flags.Var(&control, "control-address", fakeruntime.ControlFlagUsage)
	o.Main(os.Args[1:], func(ctx context.Context) error {
		// Chapter 09's Kubelet, with Probes; the probes may reach loopback
		// and the pod network, when there is one (PreInitRuntimeService).
		s := flags.KubeletServer()
		s.Probes, s.PodNetwork, s.PodCIDR, s.ControlAddress = true, true, *podCIDR, control.Path(o.StateDir)
		return app.Run(ctx, s)
	})
}
