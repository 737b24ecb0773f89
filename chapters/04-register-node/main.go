// Chapter 04: the kubelet registers its own Node with its own credentials, then keeps the status and the Lease.
//
// It authenticates with the node kubeconfig chapter 03 wrote, so the API
// server's Node authorizer and NodeRestriction admission treat it as the
// node it is: it may write its own Node and Lease, no one else's.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"mykubelet/mylib/bootstrap"
	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/nodelease"
	"mykubelet/mylib/nodestatus"
	"mykubelet/mylib/options"
)

func main() {
	o := options.New("04-register-node")
	o.UseNodeKubeconfig("go run ./chapters/03-tls-bootstrap")
	c := agentConfig{leaseDuration: nodelease.DurationSeconds(nodelease.DefaultLeaseDurationSeconds)}
	maxPods := o.MaxPods(nodestatus.DefaultMaxPods)
	port := o.Port("port", int(nodestatus.DefaultKubeletPort), "kubelet port reported in status.daemonEndpoints (nothing listens on it yet)")
	o.Flags.StringVar(&c.runtimeVersion, "container-runtime-version", "mock://0.1.0", "the <type>://<version> reported as the container runtime until the CRI runtime (chapter 05) answers")
	o.Flags.DurationVar(&c.updateFreq, "node-status-update-frequency", kubelet.DefaultNodeStatusUpdateFrequency, "how often the node status is computed")
	o.Flags.DurationVar(&c.reportFreq, "node-status-report-frequency", kubelet.DefaultNodeStatusReportFrequency, "how often the status is written when nothing changed")
	o.Flags.TextVar(&c.nodeIP, "node-ip", net.IP(nil), "the node's InternalIP (default: the address of the interface with the default route)")
	o.Flags.Var((*nodestatus.ResourceListFlag)(&c.capacity), "capacity", "override measured capacity, e.g. cpu=8,memory=16Gi (default: this host's)")
	o.Flags.Var((*nodestatus.ResourceListFlag)(&c.systemReserved), "system-reserved", "resources kept for the system, subtracted from allocatable, e.g. cpu=500m,memory=1Gi")
	o.Flags.Var(&c.leaseDuration, "lease-duration", "the Lease's leaseDurationSeconds; renewed every quarter of it")

	o.Main(os.Args[1:], func(ctx context.Context) error {
		cs, cfg, err := o.Clientset(ctx)
		if err != nil {
			return err
		}
		// Who the API server thinks we are (kubectl auth whoami).
		me, err := bootstrap.WhoAmILine(ctx, cfg)
		if err != nil {
			return err
		}
		fmt.Printf("kubeconfig %s: %s\n", o.Kubeconfig, me)
		// The Lease and the status go through their own client, whose
		// requests time out (upstream's heartbeat client).
		hb, err := nodelease.NewHeartbeatClient(cfg, c.updateFreq, time.Duration(c.leaseDuration)*time.Second)
		if err != nil {
			return err
		}
		c.heartbeat, c.onHeartbeatFailure = hb, hb.CloseAllConns
		c.nodeName, c.stateDir, c.maxPods, c.port = o.NodeName, o.StateDir, *maxPods, int32(*port)
		c.annotations = o.NodeAnnotations() // which chapter runs as the node (an instructor's status view reads it)
		kl, err := newAgent(cs, clock.RealClock{}, c)
		if err != nil {
			return err
		}
		if err := kl.RegisterWithAPIServer(ctx); err != nil {
			if ctx.Err() != nil {
				return nil // Ctrl-C while registering
			}
			return err // "create node <name>: …"
		}
		kl.SyncNodeStatus(ctx) // the first status report, before the loops start
		fmt.Printf("running: status checked every %v, written on change or every %v; lease renewed every %v; Ctrl-C to stop\n",
			c.updateFreq, c.reportFreq, kl.LeaseRenewInterval())

		// The node half of the kubelet: the status loop and the lease.
		if err := kl.RunNode(ctx); err != nil {
			return err
		}
		fmt.Printf("stopped: node %s and its lease stay; the lease is no longer renewed\n", o.NodeName)
		return nil
	})
}

// agentConfig is what newAgent needs from the flags.
type agentConfig struct {
	nodeName, stateDir, runtimeVersion string
	nodeIP                             net.IP
	maxPods                            int
	port                               int32
	updateFreq, reportFreq             time.Duration
	capacity, systemReserved           v1.ResourceList
	annotations                        map[string]string
	leaseDuration                      nodelease.DurationSeconds
	heartbeat                          kubernetes.Interface // nil: the kubelet's client, without a timeout
	onHeartbeatFailure                 func()
}

// newAgent wires the kubelet's node half: the status setters and the lease,
// as pkg/kubelet's NewMainKubelet does (the write-load benchmark uses it too).
func newAgent(cs kubernetes.Interface, clk clock.WithTicker, c agentConfig) (*kubelet.Kubelet, error) {
	if err := os.MkdirAll(c.stateDir, 0o700); err != nil {
		return nil, err
	}
	return kubelet.New(kubelet.Config{Client: cs, NodeName: c.nodeName, Clock: clk, Node: &kubelet.NodeConfig{
		Annotations:               c.annotations,
		HeartbeatClient:           c.heartbeat,
		OnHeartbeatFailure:        c.onHeartbeatFailure,
		NodeStatusUpdateFrequency: c.updateFreq,
		NodeStatusReportFrequency: c.reportFreq,
		// Status builds the setters in the order of pkg/kubelet's
		// defaultNodeStatusFuncs (mylib/kubelet/node_status_funcs.go):
		// addresses, machine info, versions, endpoints, the Go runtime, the
		// three pressure conditions, Ready last.
		Status: &kubelet.NodeStatusOptions{NodeIP: c.nodeIP, MaxPods: c.maxPods, Port: c.port, RootDir: c.stateDir,
			Capacity: c.capacity, SystemReserved: c.systemReserved, RuntimeVersion: c.runtimeVersion},
		OnRegistered: func(n *v1.Node, created bool) {
			how := "created"
			if !created {
				how = "already existed, adopted"
			}
			fmt.Printf("node %s: registered (%s)\n", n.Name, how)
		},
		OnStatusPatched: func(n *v1.Node, patch []byte, reason string) {
			fmt.Printf("node %s: status written (%s): %s\n", n.Name, reason, nodestatus.Summary(n))
			klog.V(2).InfoS("Node status patch", "node", n.Name, "patch", string(patch))
		},
		LeaseDurationSeconds: int32(c.leaseDuration),
		OnLeaseRenewed: func(l *coordinationv1.Lease, created bool) {
			verb := "renewed"
			if created {
				verb = "created"
			}
			fmt.Printf("lease %s/%s: %s, renewTime %s\n", l.Namespace, l.Name, verb, l.Spec.RenewTime.UTC().Format(time.RFC3339))
		},
	}})
}
