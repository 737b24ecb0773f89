// Package kubelet is the one Kubelet: a much smaller twin of upstream's
// pkg/kubelet, in two halves that can run alone or together.
//
//   - The node half (kubelet_node_status.go) registers the Node, keeps its
//     status with the nodestatus setters and renews its Lease: RunNode.
//   - The pod half (kubelet.go) keeps the pod manager, the PLEG and pod
//     cache, and the pod workers, driven by the sync loop: RunPods. With
//     PodsConfig.RunContainers (kubelet_sync.go), SyncPod runs the pod
//     through the CRI (mylib/kuberuntime), its status goes to the API
//     server through the status manager (mylib/status, from
//     generateAPIPodStatus in kubelet_pods.go) and events are recorded;
//     without it, SyncPod only says what it would do, and only mirror pods
//     and the final delete of a pod are real.
//   - With PodsConfig.Admit (kubelet_admission.go), each new pod is checked
//     by mylib/lifecycle's admit handlers first, and a pod that does not
//     fit (maxPods, requests, node selector/affinity) is failed with the
//     reason instead of run: upstream's canAdmitPod and rejectPod.
//   - The runtime's health (runtime.go: CRI Status every 5 s, the PLEG's
//     health) decides the node's Ready condition when both halves run.
//   - What ends (kubelet_lifecycle.go), with RunContainers:
//     PodsConfig.ContainerGC collects dead containers and sandboxes every
//     minute, and expired back-offs and orphaned runtime pods at
//     housekeeping; PodsConfig.ActiveDeadline fails pods past
//     activeDeadlineSeconds.
//   - PodsConfig.ContainerLogs rotates the running containers' log files
//     over containerLogMaxSize (mylib/logs, upstream's container log
//     manager).
//   - PodsConfig.Volumes (kubelet_volumes.go), with RunContainers: the
//     volume manager (mylib/volumemanager) mounts each pod's volumes under
//     RootDirectory/pods/<uid> before its containers start, and tears
//     them down once it terminated; housekeeping removes the directories
//     of pods that are gone.
//   - PodsConfig.Metrics (kubelet_metrics.go): the kubelet's series
//     (mylib/metrics) for /metrics and /metrics/probes: the CRI calls, the
//     PLEG's relists, the pod workers' syncs, the probes, the sandboxes and
//     containers started, and the pod start SLI.
//   - PodsConfig.Eviction (kubelet_eviction.go), with RunContainers and
//     Admit: the eviction manager (mylib/eviction) sets the node's
//     MemoryPressure, DiskPressure and PIDPressure conditions, refuses
//     pods under pressure and evicts one pod at a time through the pod
//     workers (killPodNow: the pod ends Failed, reason Evicted); the image
//     GC manager (mylib/images) deletes unused images.
//
// Run runs both. Wiring:
//
//	kl, err := kubelet.New(kubelet.Config{
//		Client:   client,   // the node's own credentials
//		NodeName: nodeName,
//		Node:     &kubelet.NodeConfig{Status: &kubelet.NodeStatusOptions{RootDir: dir}}, // nil: no node half
//		Pods: &kubelet.PodsConfig{Updates: podConfig.Updates(), // nil: no pod half
//			RemoteRuntimeService: rt.RuntimeService(), RemoteImageService: rt.ImageService(), // rt from kuberuntime.Connect
//			RunContainers: true, Recorder: recorder},
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
// syncLoopIteration, HandlePodAdditions/Updates/Removes/Reconcile/Syncs,
// handleMirrorPod, SyncPod, SyncTerminatingPod, SyncTerminatedPod,
// HandlePodCleanups,
// updateRuntimeUp), pkg/kubelet/runtime.go (runtimeState),
// pkg/kubelet/volume_host.go and kubelet_volumes.go (the volumes),
// pkg/kubelet/pod_workers.go (killPodNow),
// pkg/kubelet/kubelet_node_status.go and cmd/kubelet/app/server.go (the
// clients and their rates).
//
// Where the real SyncPod departs from upstream, and why: once it started
// containers it reads the runtime again and hands that status over at
// once, instead of waiting up to a relist period for the PLEG (upstream's
// Evented PLEG has the same effect); a terminating pod's status is read
// from the runtime directly after KillPod, keeping the pod's IP as the
// PLEG's cache does; a sync that could not start a container hands its
// status (the waiting reason, e.g. CrashLoopBackOff) over at once, where
// upstream shows it from the next sync.
package kubelet
