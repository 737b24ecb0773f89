// The container manager's side of the Kubelet (mylib/cm): it starts with
// Run, each pod's cgroup is made before its sandbox (SyncPod) and removed
// once its containers are gone (SyncTerminatedPod, and housekeeping's
// cleanupOrphanedPodCgroups), and the pod's cgroup is the sandbox's
// CgroupParent (GetPodCgroupParent). Upstream: the same functions in
// pkg/kubelet/kubelet.go and kubelet_pods.go.

package kubelet

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"mykubelet/mylib/cm"
	"mykubelet/mylib/events"
	"mykubelet/mylib/podworkers"
)

// cgroupsPerQOS: the Kubelet makes pod cgroups.
func (kl *Kubelet) cgroupsPerQOS() bool {
	return kl.containerManager != nil && kl.containerManager.CgroupsPerQOS()
}

// startContainerManager starts the container manager (upstream: in
// initializeRuntimeDependentModules): kubepods and the QoS cgroups, kept
// up to date with the active pods until ctx ends.
func (kl *Kubelet) startContainerManager(ctx context.Context) error {
	if kl.containerManager == nil {
		return nil
	}
	if err := kl.containerManager.Start(ctx, kl.activePods); err != nil {
		return fmt.Errorf("failed to start ContainerManager: %w", err)
	}
	return nil
}

// GetPodCgroupParent is the pod's cgroup as the runtime names it
// (/kubepods/burstable/pod<uid>), the sandbox's CgroupParent; "" without
// pod cgroups.
func (kl *Kubelet) GetPodCgroupParent(pod *v1.Pod) string {
	if !kl.cgroupsPerQOS() {
		return ""
	}
	_, parent := kl.containerManager.NewPodContainerManager().GetPodContainerName(pod)
	return parent
}

// ensurePodCgroup makes the pod's cgroup, with its limits, unless it
// exists, the QoS cgroups' weights updated first (upstream's SyncPod).
// Upstream also kills the containers of a pod that runs already without
// its cgroup (a kubelet restarted with cgroupsPerQOS on); this does not:
// another kubelet on the same machine may have removed it.
func (kl *Kubelet) ensurePodCgroup(pod *v1.Pod) error {
	if !kl.cgroupsPerQOS() {
		return nil
	}
	kl.ownPodCgroups.Store(pod.UID, true)
	pcm := kl.containerManager.NewPodContainerManager()
	if pcm.Exists(pod) {
		return nil
	}
	if err := kl.containerManager.UpdateQOSCgroups(); err != nil {
		klog.V(2).InfoS("Failed to update QoS cgroups while syncing pod", "pod", klog.KObj(pod), "err", err)
	}
	if err := pcm.EnsureExists(pod); err != nil {
		kl.recorder.Eventf(pod, v1.EventTypeWarning, events.FailedToCreatePodContainer, "unable to ensure pod container exists: %v", err)
		return fmt.Errorf("failed to ensure that the pod: %v cgroups exist and are correctly applied: %w", pod.UID, err)
	}
	return nil
}

// destroyPodCgroup removes a terminated pod's cgroup (upstream's
// SyncTerminatedPod).
func (kl *Kubelet) destroyPodCgroup(pod *v1.Pod) error {
	if !kl.cgroupsPerQOS() {
		return nil
	}
	pcm := kl.containerManager.NewPodContainerManager()
	name, _ := pcm.GetPodContainerName(pod)
	return pcm.Destroy(name)
}

// podCgroups are the pod cgroups on the node, by UID (read at the start
// of housekeeping, as upstream); nil without pod cgroups.
func (kl *Kubelet) podCgroups() map[types.UID]cm.CgroupName {
	if !kl.cgroupsPerQOS() {
		return nil
	}
	found, err := kl.containerManager.NewPodContainerManager().GetAllPodsFromCgroups()
	if err != nil {
		klog.ErrorS(err, "Failed to get list of pods that still exist on cgroup mounts")
		return nil
	}
	return found
}

// possiblyRunningPods are the pods whose workers sync or terminate them:
// their cgroups stay.
func possiblyRunningPods(workers map[types.UID]podworkers.PodWorkerSync) map[types.UID]bool {
	out := map[types.UID]bool{}
	for uid, w := range workers {
		if w.State == podworkers.SyncPod || w.State == podworkers.TerminatingPod {
			out[uid] = true
		}
	}
	return out
}

// cleanupOrphanedPodCgroups removes the cgroups of pods that may no longer
// run (upstream's): a pod whose volumes are still mounted keeps its cgroup
// with the least CPU weight until they are gone. As upstream, a failure
// is logged and housekeeping tries again. Unlike upstream, it removes only
// the cgroups this kubelet made: upstream's kubelet is alone on its
// machine, while this course's machine often runs several kubelets at
// once (chapter tests in parallel, two nodes on one machine), and one
// would remove another's pod cgroups between their making and the
// sandbox's start. The price: a pod deleted while its kubelet was down
// leaves its (empty) cgroup behind.
func (kl *Kubelet) cleanupOrphanedPodCgroups(cgroupPods map[types.UID]cm.CgroupName, possiblyRunning map[types.UID]bool) {
	if len(cgroupPods) == 0 {
		return
	}
	pcm := kl.containerManager.NewPodContainerManager()
	for uid, name := range cgroupPods {
		if _, own := kl.ownPodCgroups.Load(uid); !own || possiblyRunning[uid] {
			continue
		}
		if kl.volumes != nil && kl.volumes.manager.HasPossiblyMountedVolumesForPod(uid) {
			klog.V(3).InfoS("Orphaned pod found, but volumes not yet removed.  Reducing cpu to minimum", "podUID", uid)
			if err := pcm.ReduceCPULimits(name); err != nil {
				klog.InfoS("Failed to reduce cpu time for pod pending volume cleanup", "podUID", uid, "err", err)
			}
			continue
		}
		klog.V(3).InfoS("Orphaned pod found, removing pod cgroups", "podUID", uid)
		if err := pcm.Destroy(name); err != nil {
			klog.InfoS("Failed to destroy orphaned pod cgroup", "podUID", uid, "err", err)
			continue
		}
		kl.ownPodCgroups.Delete(uid)
	}
}

// removeOwnPodCgroups runs when the Kubelet stops: it removes the cgroups
// of the pods it made that are still there (pods still bound, or deleted
// while their worker stopped). Upstream leaves them: the next kubelet's
// cleanupOrphanedPodCgroups removes those of pods that are gone, and a
// restarted kubelet re-makes any that are missing. Here the next kubelet
// removes only its own (cleanupOrphanedPodCgroups says why), so nothing
// would: every test that ends with pods bound left their empty cgroups
// under kubepods. Only empty cgroups go: removing a cgroup that holds
// processes fails (EBUSY), and it is left as it is, never killed (a real
// runtime's containers run on without the kubelet; started again, it
// adopts them in their cgroups). A pod adopted later gets its cgroup
// again at its next sync (ensurePodCgroup).
func (kl *Kubelet) removeOwnPodCgroups() {
	if !kl.cgroupsPerQOS() {
		return
	}
	pcm := kl.containerManager.NewPodContainerManager()
	left := 0
	for uid, name := range kl.podCgroups() {
		if _, own := kl.ownPodCgroups.Load(uid); !own {
			continue
		}
		if err := pcm.RemoveIfEmpty(name); err != nil {
			left++
			klog.V(2).InfoS("Pod cgroup stays: processes still run in it", "podUID", uid, "err", err)
			continue
		}
		kl.ownPodCgroups.Delete(uid)
	}
	if left > 0 {
		klog.V(2).InfoS("Pod cgroups left in place at exit, with processes in them", "count", left)
	}
}
