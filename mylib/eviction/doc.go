// Package eviction is the kubelet's eviction manager: upstream's
// pkg/kubelet/eviction (eviction_manager.go, helpers.go, api/types.go),
// much smaller.
//
// Every MonitoringInterval the manager reads the stats summary and turns it
// into signals (memory.available, nodefs.available, nodefs.inodesFree,
// imagefs.available, imagefs.inodesFree, pid.available). A threshold
// (evictionHard, or evictionSoft after its evictionSoftGracePeriod) that
// the signal falls under sets the node's MemoryPressure, DiskPressure or
// PIDPressure condition, which stays for evictionPressureTransitionPeriod
// after the last sighting. For a disk signal the manager first deletes
// dead containers and unused images and looks again; if the node is still
// short, it ranks the active pods (usage above requests, then priority,
// then usage) and evicts the first one that is not critical, one pod per
// pass: a Warning "Evicted" event, and the pod killed with phase Failed,
// reason Evicted, upstream's message and the DisruptionTarget condition.
// While a condition holds, Admit refuses new pods as upstream does.
//
// Where it departs from upstream, and why:
//   - No allocatableMemory.available, containerfs.* or swap signals, no
//     memcg threshold notifier, no per-pod/container/emptyDir ephemeral
//     storage limit eviction: the course's node has no cgroups to watch.
//   - One reclaim order for every disk signal (dead containers, then
//     images) and one ranking measuring writable layers, logs and local
//     volumes: upstream's single-filesystem case, without its probe for a
//     dedicated image filesystem (the mock machine's are figures, not
//     devices).
//   - A pod's request ignores pod overhead (pod-level resources count,
//     as upstream), and local volumes are emptyDir (on disk), hostPath,
//     configMap and gitRepo.
//   - The kill goes through a KillPodFunc with a status function (the
//     kubelet's killPodNow) rather than upstream's PodTerminator; Run
//     blocks until its context ends instead of starting a goroutine.
//   - Upstream's eviction metrics (evictions per signal, stats age) are
//     not recorded.
//   - A signal the summary lacks is logged at level 2, not 0.
//
// Wiring, as the kubelet does it:
//
//	thresholds, err := eviction.ParseThresholdConfig(cfg.EvictionHard, cfg.EvictionSoft,
//		cfg.EvictionSoftGracePeriod, cfg.EvictionMinimumReclaim)
//	m, admit, err := eviction.NewManager(statsProvider, eviction.Config{
//		PressureTransitionPeriod: 5 * time.Minute, MaxPodGracePeriodSeconds: 0, Thresholds: thresholds,
//	}, killPodNow, imageGC, containerGC, recorder, nodeRef, clock.RealClock{})
//	admitHandlers = append(admitHandlers, admit) // refuses pods under pressure
//	go m.Run(ctx, activePods, podCleanedUp, eviction.MonitoringInterval)
//	// node status: m.IsUnderMemoryPressure(), IsUnderDiskPressure(), IsUnderPIDPressure()
package eviction
