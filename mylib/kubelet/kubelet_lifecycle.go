package kubelet

// What the Kubelet does about containers and pods that end, besides the
// restarts SyncPod makes (restart policy and CrashLoopBackOff live in
// mylib/kuberuntime). Each part is upstream's, switched on by a PodsConfig
// field so that a Kubelet without them behaves as before:
//
//   - PodsConfig.ContainerGC: the container garbage collector runs every
//     kuberuntime.ContainerGCPeriod (upstream StartGarbageCollection in
//     pkg/kubelet/kubelet.go); at each housekeeping, expired crash-loop
//     back-off entries are dropped (crashLoopBackOff.GC) and runtime pods
//     no pod wants are killed (HandlePodCleanups in kubelet_pods.go);
//   - PodsConfig.ActiveDeadline: a pod past spec.activeDeadlineSeconds is
//     failed with reason DeadlineExceeded (active_deadline.go), and the
//     sync tick syncs such a pod even with nothing new about it
//     (getPodsToSync in kubelet.go).
//
// Where it departs from upstream, and why (one line each):
//   - an orphaned runtime pod is killed at the second housekeeping that
//     finds it, not the first: the pod sources can be "ready" while the
//     update that names the pod is still on its way to the sync loop, and a
//     restarted kubelet must not kill what it is about to adopt;
//   - the collector's first run is one period after start (upstream runs
//     it at once, then every period).

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/podworkers"
)

// lifecycle is the Kubelet's state for PodsConfig.ContainerGC and
// ActiveDeadline; its zero value does nothing.
type lifecycle struct {
	containerGC         *kuberuntime.ContainerGC // nil without ContainerGC
	killOrphans         bool
	orphanSuspects      map[types.UID]bool // orphans found at the last housekeeping
	podSyncHandlers     []PodSyncHandler
	podSyncLoopHandlers []PodSyncLoopHandler
}

// newLifecycle sets up what cfg asks for; called by newPodHalf once the
// status manager, the pod workers and the runtime manager m exist.
func (kl *Kubelet) newLifecycle(cfg PodsConfig, m *kuberuntime.Manager) error {
	if cfg.ContainerGC != nil {
		psp, ok := kl.podWorkers.(kuberuntime.PodStateProvider)
		if !ok {
			return errors.New("kubelet: Config.Pods.ContainerGC needs pod workers that say which pods may be removed")
		}
		gc, err := kuberuntime.NewContainerGC(m, psp, *cfg.ContainerGC)
		if err != nil {
			return err
		}
		gc.Report = func(containers, sandboxes int) {
			kl.printf("container GC: removed %d dead container(s) and %d sandbox(es)", containers, sandboxes)
		}
		kl.lifecycle.containerGC = gc
		kl.lifecycle.killOrphans = true
		kl.lifecycle.orphanSuspects = map[types.UID]bool{}
	}
	if cfg.ActiveDeadline {
		h, err := newActiveDeadlineHandler(kl.statusManager, kl.recorder, kl.clock)
		if err != nil {
			return err
		}
		kl.lifecycle.podSyncHandlers = append(kl.lifecycle.podSyncHandlers, h)
		kl.lifecycle.podSyncLoopHandlers = append(kl.lifecycle.podSyncLoopHandlers, h)
	}
	return nil
}

// getPodsToSync returns the pods whose resync is due (the work queue) and
// those a sync loop handler wants synced now (a pod past its deadline).
func (kl *Kubelet) getPodsToSync() []*v1.Pod {
	due := map[types.UID]bool{}
	for _, uid := range kl.workQueue.GetWork() {
		due[uid] = true
	}
	var pods []*v1.Pod
	for _, pod := range kl.podManager.GetPods() {
		if due[pod.UID] {
			pods = append(pods, pod)
			continue
		}
		for _, h := range kl.lifecycle.podSyncLoopHandlers {
			if h.ShouldSync(pod) {
				pods = append(pods, pod)
				break
			}
		}
	}
	return pods
}

// cleanupEnded is housekeeping's part for what ended: expired back-off
// entries go, and runtime pods that no pod wants (twice in a row) are
// killed. pods are the desired pods, workers what SyncKnownPods returned.
func (kl *Kubelet) cleanupEnded(ctx context.Context, pods []*v1.Pod, workers map[types.UID]podworkers.PodWorkerSync) {
	if !kl.lifecycle.killOrphans {
		return
	}
	kl.backOff.GC()
	running, err := kl.containerRuntime.GetPods(ctx, false)
	if err != nil {
		klog.ErrorS(err, "Listing the runtime's pods for housekeeping failed; will retry")
		return
	}
	suspects := map[types.UID]bool{}
	var orphans []*kubecontainer.Pod
	for _, rp := range orphanedRuntimePods(running, pods, workers) {
		suspects[rp.ID] = true
		if kl.lifecycle.orphanSuspects[rp.ID] {
			orphans = append(orphans, rp)
		}
	}
	kl.lifecycle.orphanSuspects = suspects
	if len(orphans) == 0 {
		return
	}
	err = killOrphanedRuntimePods(ctx, kl.containerRuntime, orphans)
	for _, rp := range orphans {
		kl.printf("housekeeping: killing orphaned runtime pod %s/%s (uid %s): no pod wants it", rp.Namespace, rp.Name, rp.ID)
	}
	if err != nil {
		klog.ErrorS(err, "Killing orphaned runtime pods failed; will retry")
	}
}
