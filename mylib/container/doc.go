// Package container holds the runtime-neutral view of pods and containers
// that the kubelet's managers share, named after upstream's
// pkg/kubelet/container ("kubecontainer"):
//
//   - Pod and Container: what the runtime is running, grouped by pod UID
//     (the answer of Runtime.GetPods);
//   - PodStatus and Status: the detailed status of one pod's sandboxes and
//     containers (the answer of Runtime.GetPodStatus);
//   - Cache: the latest PodStatus of every pod, with timestamps, filled by the
//     PLEG and read by the pod workers. Cache.GetNewerThan blocks until the
//     cache holds a status newer than a given time, which is how a pod worker
//     waits for the PLEG to see the effects of its last sync.
//
// Nothing here talks to a runtime: mylib/kuberuntime turns CRI answers into
// these types.
package container
