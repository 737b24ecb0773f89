// Package status is the kubelet's status manager, as upstream's
// pkg/kubelet/status (status_manager.go, generate.go): the pod workers put
// each pod's latest status here (SetPodStatus); Run writes it to the API
// server with the node's credentials, at once when it changed (a poke on a
// channel) and every SyncPeriod for all pods, as a strategic merge patch of
// pods/status that carries the pod's UID, so a pod recreated under the same
// name is never written over. A static pod's status goes to its mirror pod.
// A pod being deleted is deleted for good (grace period 0, UID
// precondition) only after TerminatePod and once its terminal phase is in
// the API: canBeDeleted.
//
// Wiring:
//
//	sm, err := status.NewManager(status.Config{Client: client, PodManager: podManager, Clock: clock.RealClock{}})
//	go sm.Run(ctx)
//	sm.SetPodStatus(pod, apiPodStatus) // from generateAPIPodStatus, in the pod worker
//
// Where it departs from upstream, and why (one line each):
//   - no SetContainerReadiness or SetContainerStartup: a probe result
//     reaches the status through the pod sync it triggers
//     (generateAPIPodStatus asks the prober), not written here directly;
//   - the resize conditions (resize.go) carry no observedGeneration of
//     their own: the kubelet stamps the pod's generation on them, as on
//     its other conditions, when it builds the status;
//   - the DisruptionTarget condition of an evicted pod is written with
//     the terminal phase and a fresh transition time, not first kept in
//     the cached status (upstream's updateStatusInternal) as well;
//   - versions are kept by the UID of the pod written (the mirror pod's for
//     a static pod) everywhere; upstream mixes in the static pod's UID in
//     needsUpdate;
//   - a 404 on the pod leaves its status for RemoveOrphanedStatuses to drop,
//     as upstream, but without its log throttling;
//   - no GET before every patch: the patch is made against what our last
//     patch of that pod returned (the first one, a pod the full sync found
//     changed by someone else, and a refused patch read the API, as
//     upstream always does): half the requests under a burst of pods;
//   - a batch writes each pod's newest status, not the one it saw when it
//     began: under a burst of pods the loop is behind, and a pod whose
//     Running status came meanwhile gets one write instead of two;
//   - with Config.CreatingStatusDelay (the mykubelet binary sets it; 0,
//     the default, is upstream's behaviour), a pod's first status is held
//     back while it only says ContainerCreating, so that a pod started
//     within the delay gets one write, not two: under a burst each
//     ContainerCreating write is one request more at kubeAPIQPS ahead of
//     the Running ones. What the pod shows in the end is the same.
package status
