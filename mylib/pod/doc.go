// Package pod keeps the kubelet's view of its pods (Manager) and the API
// server's copies of its static pods (MirrorClient).
//
// A static pod comes from a manifest file, so the API server has never heard
// of it. The kubelet creates a mirror pod for it: a pod with the same name
// and namespace, the annotation kubernetes.io/config.mirror = the static
// pod's hash, and an owner reference to the Node. The NodeRestriction
// admission plugin lets a node create exactly such pods, bound to itself.
// The mirror pod's UID is the API server's; the two are matched by full name
// (name_namespace).
//
// Upstream: pkg/kubelet/pod (pod_manager.go, mirror_client.go) and the
// static-pod part of Kubelet.SyncPod in pkg/kubelet/kubelet.go.
//
// Where it departs from upstream, and why (one line each):
//   - the mirror pod sync is a function (SyncMirrorPod, SyncMirrorPods) as
//     well as a step of the Kubelet's SyncPod, so that a kubelet without
//     pod workers can keep its mirror pods;
//   - CreateMirrorPod returns ErrMirrorPodExists for a mirror pod already
//     there with the same hash (upstream returns nil), so that a sync
//     reports only real changes;
//   - without a NodeGetter the Node is read from the API server at each
//     mirror pod creation (upstream reads an informer's lister);
//   - the Manager's lists are sorted by namespace and name (upstream's
//     follow a map), so that output and tests repeat.
package pod
