// Package kuberuntime is the kubelet's side of the CRI: a gRPC client of a
// container runtime (containerd, CRI-O, or mylib/fakeruntime) that answers
// in the runtime-neutral types of mylib/container. Named after upstream's
// pkg/kubelet/kuberuntime, whose kubeGenericRuntimeManager does the same
// (GetPods, GetPodStatus) over k8s.io/cri-client.
//
//	m, err := kuberuntime.Connect(ctx, "unix:///run/containerd/containerd.sock", clock.RealClock{})
//	defer m.Close()
//	pods, err := m.GetPods(ctx, true) // sandboxes and containers grouped by pod UID
package kuberuntime
