// Package allocation remembers, per pod, the resources the kubelet has
// allocated to it, and the resources it last actuated (applied to the
// runtime), as upstream's pkg/kubelet/allocation. With in-place resize a
// pod's spec may ask for more than the node granted so far: the allocation
// is what the kubelet admitted, and what it syncs the pod with
// (UpdatePodFromAllocation puts it in place of the spec's resources). Both
// survive a restart: each is a checkpoint file in the kubelet's root
// directory (allocated_pods_state, actuated_pods_state), written atomically
// with mode 0600 and a checksum that is checked when it is read back.
//
// Wiring:
//
//	m, err := allocation.NewManager(rootDir) // an error: a checkpoint is corrupt
//	pod, changed := m.UpdatePodFromAllocation(pod) // before syncing it
//	err = m.SetAllocatedResources(pod)             // once the pod (or its resize) is admitted
//	err = m.SetActuatedResources(pod, &container)  // once the runtime has applied it
//	err = m.SetActuatedPodLevelResources(pod)      // once the pod's cgroup and containers have its spec.resources
//	m.RemoveOrphanedPods(podUIDs)                  // at housekeeping
//
// Where it departs from upstream, and why (one line each):
//   - NewManager returns an error where upstream panics on a corrupt
//     checkpoint: library functions return errors here;
//   - one package: upstream's state sub-package (a memory cache, a
//     checkpoint, a no-op when the feature is off) is state.go here;
//   - the checkpoint is upstream's legacy (v1) layout, JSON entries by pod
//     UID, not its newer protobuf PodList; its checksum is FNV-32a of the
//     data's bytes, so the files are not interchangeable with upstream's;
//   - no emptyDir limits and no resize admission (handlers.go): only what
//     is recorded, not how the kubelet decides it.
package allocation
