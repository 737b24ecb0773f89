package podworkers

import "k8s.io/apimachinery/pkg/types"

// The pod workers answer the garbage collector's questions about a pod
// (kuberuntime.PodStateProvider), as upstream's podWorkers do: they are
// the one place that knows whether a pod is still wanted, terminating or
// done. A pod no worker knows is unwanted only once SyncKnownPods has run
// (upstream's podsSynced): before that it may just not have arrived yet.

// ShouldPodContentBeRemoved tells whether everything a pod left (dead
// containers, sandboxes, logs) may go: it was evicted, or it was deleted
// and has terminated.
func (p *podWorkers) ShouldPodContentBeRemoved(uid types.UID) bool {
	p.podLock.Lock()
	defer p.podLock.Unlock()
	if s, ok := p.podSyncStatuses[uid]; ok {
		return s.evicted || (s.deleted && s.IsTerminated())
	}
	return p.podsSynced
}

// ShouldPodRuntimeBeRemoved tells whether a pod's runtime leftovers may go:
// it has terminated (it may not be deleted yet).
func (p *podWorkers) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	p.podLock.Lock()
	defer p.podLock.Unlock()
	if s, ok := p.podSyncStatuses[uid]; ok {
		return s.IsTerminated()
	}
	return p.podsSynced
}

// ShouldPodBeFinished tells whether the pod's worker is done with it
// (SyncTerminatedPod succeeded): the eviction manager waits for this
// before it evicts again (upstream's ShouldPodBeFinished, the Kubelet's
// PodIsFinished).
func (p *podWorkers) ShouldPodBeFinished(uid types.UID) bool {
	p.podLock.Lock()
	defer p.podLock.Unlock()
	if s, ok := p.podSyncStatuses[uid]; ok {
		return s.finished
	}
	return p.podsSynced
}
