// Package kubelet is the one Kubelet: a much smaller twin of upstream's
// pkg/kubelet, in two halves that can run alone or together.
//
//   - The node half (kubelet_node_status.go) registers the Node, keeps its
//     status with the nodestatus setters and renews its Lease: RunNode.
//   - The pod half (kubelet.go) keeps the pod manager, the PLEG and pod
//     cache, and the pod workers, driven by the sync loop: RunPods. Its
//     SyncPod says what it would do instead of starting containers; only
//     mirror pods and the final delete of a pod are real.
//
// Run runs both. Wiring:
//
//	kl, err := kubelet.New(kubelet.Config{
//		Client:   client,   // the node's own credentials
//		NodeName: nodeName,
//		Node:     &kubelet.NodeConfig{Setters: setters},                        // nil: no node half
//		Pods:     &kubelet.PodsConfig{Updates: podConfig.Updates(), Runtime: rt}, // nil: no pod half
//	})
//	if err != nil { … }
//	err = kl.Run(ctx) // returns when ctx ends
//
// Time: every part of mylib that waits or stamps times takes a clock from
// k8s.io/utils/clock, never time.Now or time.NewTicker: a constructor with
// a Config struct takes it as Config.Clock (nil means the real clock), one
// with positional arguments as its clock argument. Unit tests pass a fake
// clock and step it.
//
// Upstream: pkg/kubelet/kubelet.go (NewMainKubelet, Run, syncLoop,
// syncLoopIteration, HandlePodAdditions/Updates/Removes, SyncPod,
// SyncTerminatingPod, SyncTerminatedPod, HandlePodCleanups) and
// pkg/kubelet/kubelet_node_status.go.
package kubelet
