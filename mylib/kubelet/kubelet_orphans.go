package kubelet

// Housekeeping's last step, as upstream's HandlePodCleanups in
// pkg/kubelet/kubelet_pods.go: a pod the runtime runs that no pod in the
// pod manager wants, and that no pod worker is syncing or terminating, is
// an orphan (left behind by a kubelet restart during a delete, say). It is
// killed at once, with a one-second grace period, as upstream.
//
// Where it departs from upstream, and why (one line each):
//   - the orphan is killed by calling the runtime's KillPod directly, not
//     through a SyncPodKill of the pod workers: ours do not take runtime-only
//     pods (a pod with no API object);
//   - the running pods are passed in (upstream reads its runtime cache).

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/podworkers"
)

// orphanedPodGracePeriod is the grace period an orphaned runtime pod gets
// (upstream's "one" in HandlePodCleanups).
const orphanedPodGracePeriod int64 = 1

// RuntimePodKiller stops a pod's containers and sandboxes; pod may be nil
// for a pod the kubelet does not know (kuberuntime.Manager.KillPod).
type RuntimePodKiller interface {
	KillPod(ctx context.Context, pod *v1.Pod, runningPod kubecontainer.Pod, gracePeriodOverride *int64) error
}

// orphanedRuntimePods returns the running pods that no desired pod wants
// and that no pod worker is syncing or terminating. runningPods are the
// runtime's (GetPods(false): running containers, ready sandboxes);
// workers is what SyncKnownPods returned.
func orphanedRuntimePods(runningPods []*kubecontainer.Pod, desiredPods []*v1.Pod, workers map[types.UID]podworkers.PodWorkerSync) []*kubecontainer.Pod {
	desired := make(map[types.UID]bool, len(desiredPods))
	for _, p := range desiredPods {
		desired[p.UID] = true
	}
	var orphans []*kubecontainer.Pod
	for _, rp := range runningPods {
		if w, ok := workers[rp.ID]; ok && (w.State == podworkers.SyncPod || w.State == podworkers.TerminatingPod) {
			continue // a worker is in charge of it
		}
		if !desired[rp.ID] {
			orphans = append(orphans, rp)
		}
	}
	return orphans
}

// killOrphanedRuntimePods kills every orphan with orphanedPodGracePeriod
// and returns the errors joined (each wrapped with the pod's UID).
func killOrphanedRuntimePods(ctx context.Context, killer RuntimePodKiller, orphans []*kubecontainer.Pod) error {
	var errs []error
	for _, rp := range orphans {
		klog.V(3).InfoS("Clean up orphaned pod containers", "podUID", rp.ID)
		grace := orphanedPodGracePeriod
		if err := killer.KillPod(ctx, nil, *rp, &grace); err != nil {
			errs = append(errs, fmt.Errorf("kill orphaned pod %s/%s (uid %s): %w", rp.Namespace, rp.Name, rp.ID, err))
		}
	}
	return errors.Join(errs...)
}
