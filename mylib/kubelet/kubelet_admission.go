package kubelet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"mykubelet/mylib/kubetypes"
	kubelifecycle "mykubelet/mylib/lifecycle"
	"mykubelet/mylib/sysctl"
)

// AdmissionNodeCacheTTL is how long admission trusts its copy of the Node
// before reading it again (upstream watches it with an informer instead).
const AdmissionNodeCacheTTL = 10 * time.Second

// admission is the pod half's gate (PodsConfig.Admit): upstream's
// HandlePodAdditions → canAdmitPod → rejectPod. A rejected pod never gets
// a pod worker; it is failed through the status manager and forgotten
// when it is removed.
type admission struct {
	handlers kubelifecycle.PodAdmitHandlers

	mu       sync.Mutex
	rejected map[types.UID]bool
	node     *v1.Node
	nodeAt   time.Time
}

var errAdmitNeedsRunContainers = errors.New("kubelet: Config.Pods.Admit needs RunContainers (a rejected pod is failed through the status manager)")

// newAdmission sets up the admit handlers, in upstream's order: the
// sysctls (the safe ones and allowedUnsafeSysctls), then the predicates
// (the eviction manager's goes first, kubelet_eviction.go).
func (kl *Kubelet) newAdmission(allowedUnsafeSysctls []string) error {
	if kl.statusManager == nil {
		return errAdmitNeedsRunContainers
	}
	// Safe sysctls can always be used as unsafe ones in the spec: one
	// list, as upstream's NewMainKubelet.
	sysctls, err := sysctl.NewAllowlist(append(sysctl.SafeSysctlAllowlist(), allowedUnsafeSysctls...))
	if err != nil {
		return fmt.Errorf("kubelet: allowedUnsafeSysctls: %w", err)
	}
	a := &admission{rejected: map[types.UID]bool{}}
	a.handlers = kubelifecycle.PodAdmitHandlers{sysctls, kubelifecycle.NewPredicateAdmitHandler(kl.getNodeAnyWay)}
	kl.admission = a
	return nil
}

// getNodeAnyWay returns the Node from the API server, a copy at most
// AdmissionNodeCacheTTL old when useCache.
func (kl *Kubelet) getNodeAnyWay(ctx context.Context, useCache bool) (*v1.Node, error) {
	a := kl.admission
	a.mu.Lock()
	if useCache && a.node != nil && kl.clock.Since(a.nodeAt) < AdmissionNodeCacheTTL {
		n := a.node
		a.mu.Unlock()
		return n, nil
	}
	a.mu.Unlock()
	n, err := kl.client.CoreV1().Nodes().Get(ctx, kl.nodeName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.node, a.nodeAt = n, kl.clock.Now()
	a.mu.Unlock()
	return n, nil
}

// inAdmissionOrder returns u's pods oldest first when admission is on, so
// that the pods admitted first are those created first (upstream sorts
// HandlePodAdditions' pods by creation time); otherwise as they came.
func (kl *Kubelet) inAdmissionOrder(pods []*v1.Pod) []*v1.Pod {
	if kl.admission == nil {
		return pods
	}
	pods = slices.Clone(pods)
	slices.SortStableFunc(pods, func(a, b *v1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return pods
}

// admit reports whether pod (already in the pod manager) goes to a pod
// worker. A new pod is checked by the admit handlers against the pods
// admitted before it and, if refused, rejected; a rejected pod stays
// rejected for every later update, and is forgotten when removed.
func (kl *Kubelet) admit(ctx context.Context, op kubetypes.PodOperation, pod *v1.Pod) bool {
	a := kl.admission
	if a == nil {
		return true
	}
	a.mu.Lock()
	rejected := a.rejected[pod.UID]
	if op == kubetypes.REMOVE {
		delete(a.rejected, pod.UID)
	}
	a.mu.Unlock()
	if rejected {
		return false
	}
	if op != kubetypes.ADD || isTerminalPhase(pod.Status.Phase) || kl.podWorkers.IsPodTerminationRequested(pod.UID) {
		return true
	}
	// Each pod counts with what was allocated to it, if anything was,
	// not with what its spec asks now: after a restart, a resize the node
	// had deferred must not take the room (upstream's AddPod).
	others := slices.DeleteFunc(kl.activePods(), func(p *v1.Pod) bool { return p.UID == pod.UID })
	if kl.allocationManager != nil {
		pod, _ = kl.allocationManager.UpdatePodFromAllocation(pod)
		for i, p := range others {
			others[i], _ = kl.allocationManager.UpdatePodFromAllocation(p)
		}
	}
	result := a.handlers.Admit(ctx, &kubelifecycle.PodAdmitAttributes{Pod: pod, OtherPods: others})
	if result.Admit {
		return true
	}
	klog.FromContext(ctx).Info("Pod admission denied", "pod", klog.KObj(pod), "podUID", pod.UID, "reason", result.Reason, "message", result.Message)
	a.mu.Lock()
	a.rejected[pod.UID] = true
	a.mu.Unlock()
	kl.rejectPod(pod, result.Reason, result.Message)
	return false
}

// rejectPod fails the pod with the reason, as upstream: a Warning event,
// and phase Failed through the status manager.
func (kl *Kubelet) rejectPod(pod *v1.Pod, reason, message string) {
	kl.printf("pod %s/%s rejected: %s: %s", pod.Namespace, pod.Name, reason, message)
	kl.recorder.Eventf(pod, v1.EventTypeWarning, reason, "%s", message)
	kl.statusManager.SetPodStatus(pod, v1.PodStatus{
		QOSClass: GetPodQOS(pod),
		Phase:    v1.PodFailed,
		Reason:   reason,
		Message:  "Pod was rejected: " + message,
	})
}

// wasRejected: a rejected pod never ran, so it has no containers.
func (kl *Kubelet) wasRejected(uid types.UID) bool {
	if kl.admission == nil {
		return false
	}
	kl.admission.mu.Lock()
	defer kl.admission.mu.Unlock()
	return kl.admission.rejected[uid]
}

// activePods are the pod manager's pods that hold resources: not
// rejected, not known terminated, and not in a terminal phase (the API's
// or the status manager's) unless still terminating (upstream:
// GetActivePods, filterOutInactivePods).
func (kl *Kubelet) activePods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range kl.podManager.GetPods() {
		if kl.wasRejected(p.UID) || kl.podWorkers.IsPodKnownTerminated(p.UID) {
			continue
		}
		terminal := isTerminalPhase(p.Status.Phase)
		if st, ok := kl.statusManager.GetPodStatus(p.UID); ok && isTerminalPhase(st.Phase) {
			terminal = true
		}
		if terminal && (!kl.podWorkers.IsPodTerminationRequested(p.UID) || !kl.runsInRuntime(p.UID)) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// runsInRuntime reports whether the pod cache shows anything of the pod
// still running: a running container or a ready sandbox. A pod terminal in
// the API with nothing running is inactive even while its worker finishes
// it: after a kubelet restart every terminal pod gets a worker again, and
// must not count against the pods admitted beside it. Upstream marks such
// a pod terminated on first sight in its pod workers
// (isPodStatusCacheTerminal, kubernetes issue 105523); here admission, the
// only reader of active pods, checks the cache itself, which changes
// nothing for a kubelet without admission.
func (kl *Kubelet) runsInRuntime(uid types.UID) bool {
	st, err := kl.podCache.Get(uid)
	if err != nil {
		return true // unknown: count it, as upstream does
	}
	if len(st.GetRunningContainerStatuses()) > 0 {
		return true
	}
	for _, sb := range st.SandboxStatuses {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			return true
		}
	}
	return false
}
