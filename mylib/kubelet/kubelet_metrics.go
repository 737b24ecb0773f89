// The Kubelet's side of its metrics (mylib/metrics), when
// Config.Pods.Metrics is set: the CRI clients are wrapped to count each
// operation (kuberuntime.NewInstrumentedRuntimeService), the PLEG, the pod
// workers, the status manager and the prober record into the same Metrics,
// and the sync loop adds what only it sees: each pod the API server's watch
// delivers (the pod start SLI's ObservedPodOnWatch, as upstream's
// config.PodConfig does), the time from a pod first seen to its phase
// Running (kubelet_pod_start_duration_seconds, as upstream's SyncPod) and
// the sandboxes and containers each sync started (upstream counts them in
// kuberuntime's SyncPod; here the sync's result says it).

package kubelet

import (
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/metrics"
)

// instrumentCRI wraps the CRI clients of cfg to count their operations in
// cfg.Metrics (nil: they stay as they are).
func instrumentCRI(cfg *PodsConfig) {
	cfg.RemoteRuntimeService = kuberuntime.NewInstrumentedRuntimeService(cfg.RemoteRuntimeService, cfg.Metrics)
	cfg.RemoteImageService = kuberuntime.NewInstrumentedImageService(cfg.RemoteImageService, cfg.Metrics)
}

// observePodsOnWatch hands the pods of an update from the API server to
// the pod start SLI (static pods have no creation by the API server to
// measure from). Upstream does it as the update is merged; here as the
// sync loop receives it, a channel later. A pod removed is forgotten. Without
// a status manager (no RunContainers) no status is written, so no SLI can
// be observed: nothing is tracked.
func (kl *Kubelet) observePodsOnWatch(u kubetypes.PodUpdate) {
	if kl.metrics == nil || kl.statusManager == nil || u.Source != kubetypes.ApiserverSource {
		return
	}
	now := kl.clock.Now()
	for _, pod := range u.Pods {
		if u.Op == kubetypes.REMOVE {
			kl.metrics.DeletePodStartupState(pod.UID)
			continue
		}
		kl.metrics.ObservedPodOnWatch(pod, now)
	}
}

// recordPodStarted observes kubelet_pod_start_duration_seconds when a
// pod's status goes from Pending to Running: the time since the kubelet
// first saw it (its config.seen annotation).
func (kl *Kubelet) recordPodStarted(pod *v1.Pod, old, s v1.PodStatus) {
	if kl.metrics == nil || s.Phase != v1.PodRunning || (old.Phase != v1.PodPending && old.Phase != "") {
		return
	}
	seen, err := time.Parse(time.RFC3339Nano, pod.Annotations[kubetypes.ConfigFirstSeenAnnotationKey])
	if err != nil {
		return // not seen through a pod config (a test's pod): nothing to measure from
	}
	kl.metrics.ObservePodStartDuration(kl.clock.Since(seen))
}

// recordStarted counts the sandbox and the containers a sync tried to
// start (kubelet_started_pods_total, kubelet_started_containers_total and
// their errors). A container held back by its CrashLoopBackOff was not
// tried, as upstream.
func (kl *Kubelet) recordStarted(result kubecontainer.PodSyncResult) {
	if kl.metrics == nil {
		return
	}
	for _, r := range result.SyncResults {
		switch r.Action {
		case kubecontainer.CreatePodSandbox:
			kl.metrics.StartedPod(r.Error)
		case kubecontainer.StartContainer, kubecontainer.InitContainer:
			if errors.Is(r.Error, kubecontainer.ErrCrashLoopBackOff) {
				continue
			}
			typ := metrics.Container
			if r.Action == kubecontainer.InitContainer {
				typ = metrics.InitContainer
			}
			kl.metrics.StartedContainer(typ, r.Error)
		}
	}
}
