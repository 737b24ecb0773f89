// Chapter 01: a Node is Ready while someone posts its conditions and renews its Lease.
//
// This program is not a kubelet yet: it uses the admin kubeconfig, creates
// (or adopts) the Node named by --node-name, posts the four conditions the
// kubelet posts, and then renews the node's Lease in kube-node-lease every
// 0.25 × --lease-duration until you press Ctrl-C.
package main

import (
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"mykubelet/mylib/nodelease"
	"mykubelet/mylib/nodestatus"
	"mykubelet/mylib/options"
)

func main() {
	o := options.New("01-node-lease")
	leaseDuration := nodelease.DurationSeconds(nodelease.DefaultLeaseDurationSeconds)
	o.Flags.Var(&leaseDuration, "lease-duration", "the Lease's leaseDurationSeconds (kubelet config nodeLeaseDurationSeconds); it is renewed every quarter of it")

	o.Main(os.Args[1:], func(ctx context.Context) error {
		cs, cfg, err := o.Clientset(ctx) // the admin kubeconfig: see the README
		if err != nil {
			return err
		}
		clk := clock.RealClock{}

		// 1. The Node object: create it, or adopt the one that exists.
		node, err := ensureNode(ctx, cs, o.NodeName)
		if err == nil {
			err = o.AnnotateNode(ctx, cs) // which chapter runs as the node (an instructor's status view reads it)
		}
		if err != nil {
			return err
		}

		// 2. Its conditions, each found by its type, written to the status
		// subresource with a patch.
		setters := []nodestatus.Setter{
			nodestatus.MemoryPressureCondition(clk.Now, nodestatus.NoPressure),
			nodestatus.DiskPressureCondition(clk.Now, nodestatus.NoPressure),
			nodestatus.PIDPressureCondition(clk.Now, nodestatus.NoPressure),
			nodestatus.ReadyCondition(clk.Now, nil, nil),
		}
		updated := node.DeepCopy()
		for _, set := range setters {
			if err := set(ctx, updated); err != nil {
				return err
			}
		}
		if node, _, err = nodestatus.PatchNodeStatus(ctx, cs.CoreV1(), node, updated); err != nil {
			return err
		}
		fmt.Printf("node %s: posted conditions %s\n", node.Name, conditions(node))

		// 3. The heartbeat: the Lease, renewed until Ctrl-C, with a client
		// whose requests time out after 10 s (the kubelet's
		// nodeStatusUpdateFrequency) and whose connections are closed after
		// repeated failures.
		hb, err := nodelease.NewHeartbeatClient(cfg, 10*time.Second, time.Duration(leaseDuration)*time.Second)
		if err != nil {
			return err
		}
		lc, err := nodelease.NewController(nodelease.Config{
			Client:                     hb,
			OnRepeatedHeartbeatFailure: hb.CloseAllConns,
			NodeName:                   o.NodeName,
			LeaseDurationSeconds:       int32(leaseDuration),
			Clock:                      clk,
			OnRenewed: func(l *coordinationv1.Lease, created bool) {
				verb := "renewed"
				if created {
					verb = "created"
				}
				fmt.Printf("lease %s/%s: %s, holder %s, duration %ds, renewTime %s\n", l.Namespace, l.Name, verb,
					*l.Spec.HolderIdentity, *l.Spec.LeaseDurationSeconds, l.Spec.RenewTime.UTC().Format(time.RFC3339))
			},
		})
		if err != nil {
			return err
		}
		fmt.Printf("lease %s/%s: renewing every %v until Ctrl-C\n", v1.NamespaceNodeLease, o.NodeName, lc.RenewInterval())
		lc.Run(ctx)

		fmt.Printf("stopped: lease %s/%s is no longer renewed; the node lifecycle controller will mark node %s NotReady\n", v1.NamespaceNodeLease, o.NodeName, o.NodeName)
		return nil
	})
}

// ensureNode creates the Node with the labels every kubelet sets, or returns
// the existing one.
func ensureNode(ctx context.Context, cs kubernetes.Interface, name string) (*v1.Node, error) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: name,
		Labels: map[string]string{
			v1.LabelHostname:   name,
			v1.LabelOSStable:   goruntime.GOOS,
			v1.LabelArchStable: goruntime.GOARCH,
		},
	}}
	created, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err == nil {
		fmt.Printf("node %s: created\n", name)
		return created, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create node %s: %w", name, err)
	}
	existing, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", name, err)
	}
	fmt.Printf("node %s: already registered, adopting it\n", name)
	return existing, nil
}

// conditions formats the four conditions as Type=Status, in the order the
// kubelet posts them.
func conditions(node *v1.Node) string {
	s := ""
	for _, t := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure, v1.NodeReady} {
		if _, c := nodestatus.GetNodeCondition(&node.Status, t); c != nil {
			s += fmt.Sprintf(" %s=%s", t, c.Status)
		}
	}
	if s == "" {
		return "(none)"
	}
	return s[1:]
}
