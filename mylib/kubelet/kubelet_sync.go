// The pod half's real work, when Config.Pods.RunContainers is set: SyncPod
// makes the pod run through the CRI and hands its API status to the status
// manager; SyncTerminatingPod stops it within its grace period;
// SyncTerminatedPod hands over its terminal status, and the status manager
// deletes the pod once that status is in the API (upstream: SyncPod,
// SyncTerminatingPod and SyncTerminatedPod in pkg/kubelet/kubelet.go).

package kubelet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/events"
	"mykubelet/mylib/kubetypes"
	kubepod "mykubelet/mylib/pod"
	"mykubelet/mylib/podworkers"
)

// syncPod is SyncPod for real: the pod's API status first (so a pod that
// finished says so, and a new one shows ContainerCreating), then its mirror
// pod if static, then the runtime brought to the pod's spec.
func (kl *Kubelet) syncPod(ctx context.Context, updateType kubetypes.SyncPodType, pod, mirrorPod *v1.Pod, podStatus *kubecontainer.PodStatus) (bool, error) {
	apiPodStatus := kl.apiPodStatus(pod, podStatus, false)
	isTerminal := apiPodStatus.Phase == v1.PodSucceeded || apiPodStatus.Phase == v1.PodFailed
	kl.setPodStatus(pod, apiPodStatus)
	if isTerminal {
		return true, nil // the pod workers now terminate it
	}
	// The runtime reports no IP for a hostNetwork pod; its status has the
	// node's. The containers' status.podIP(s) and /etc/hosts take those, as
	// upstream's SyncPod does (on a copy: the cache's status is shared).
	if ips := statusPodIPs(apiPodStatus); len(ips) > 0 && !slices.Equal(ips, podStatus.IPs) {
		withIPs := *podStatus
		withIPs.IPs = ips
		podStatus = &withIPs
	}
	if err := kl.runtimeState.networkErrors(); err != nil && !kubecontainer.IsHostNetworkPod(pod) {
		kl.recorder.Eventf(pod, v1.EventTypeWarning, events.NetworkNotReady, "network is not ready: %v", err)
		return false, fmt.Errorf("network is not ready: %w", err)
	}
	if err := kl.ensurePodCgroup(pod); err != nil { // before the sandbox, which gets it as CgroupParent (kubelet_cm.go)
		return false, err
	}
	if kubetypes.IsStaticPod(pod) {
		action, err := kubepod.SyncMirrorPod(ctx, kl.mirrorPodClient, pod, mirrorPod)
		if err != nil {
			return false, err
		}
		if action != kubepod.MirrorUnchanged {
			kl.printf("mirror pod %s/%s %s", pod.Namespace, pod.Name, action)
		}
	}
	if err := kl.waitForVolumes(ctx, pod); err != nil {
		return false, err // the pod stays ContainerCreating; its worker tries again
	}
	if kl.allocationManager != nil {
		// The runtime gets what was allocated, not what the spec asks: a
		// resize not yet allocated is not applied (kubelet_resize.go).
		pod, _ = kl.allocationManager.UpdatePodFromAllocation(pod)
	}
	result := kl.containerRuntime.SyncPod(ctx, pod, podStatus, kl.getPullSecretsForPod(ctx, pod), kl.backOff)
	kl.recordStarted(result)
	kl.reasonCache.Update(pod.UID, result)
	if done := syncSummary(result); done != "" {
		kl.printf("syncPod %s %s/%s: %s", updateType, pod.Namespace, pod.Name, done)
	}
	// A pod being resized (kubelet_resize.go) is looked at again after
	// each sync: once what was allocated is what the runtime applies, it
	// is no longer PodResizeInProgress.
	resizing := kl.allocationManager != nil && (resized(result) || kl.isResizeInProgressCondition(pod.UID))
	if result.Error() == nil && (startedSomething(result) || resizing) {
		// Unlike upstream, which waits for the next relist (up to a second)
		// to see what it started, read the runtime again and hand the new
		// status over now. (Upstream's Evented PLEG gets the same effect.)
		if now, err := kl.runtimePodStatus(ctx, pod, podStatus); err == nil {
			if resizing {
				kl.setResizeInProgress(pod, now)
			}
			kl.setPodStatus(pod, kl.apiPodStatus(pod, now, false))
		}
		if resizing {
			// A resize changes no container's state, so no relist puts the
			// new resources in the pod cache, and the next sync would
			// write the old ones back: read the pod into the cache now,
			// as upstream's SyncPod does (pleg.UpdateCache).
			if err := kl.pleg.UpdateCache(ctx, pod.UID); err != nil {
				return false, fmt.Errorf("pod %s/%s: the pod cache after a resize: %w", pod.Namespace, pod.Name, err)
			}
		}
	} else if startFailed(result) {
		// A container that could not start (in CrashLoopBackOff, say)
		// waits with that reason from now on. Unlike upstream, which shows
		// it from the next sync: ours may come only when the back-off is
		// over, and start the container at once.
		if now, err := kl.runtimePodStatus(ctx, pod, podStatus); err == nil {
			kl.setPodStatus(pod, kl.apiPodStatus(pod, now, false))
		}
	}
	if failed := resizeError(result); failed != nil && kl.allocationManager != nil {
		// The resize failed (a memory limit below what the pod uses, say):
		// still in progress, with the error as its reason, until a sync
		// applies it or a new resize replaces it, as upstream's SyncPod.
		// The status says so from the next sync on.
		kl.statusManager.SetPodResizeInProgressCondition(pod.UID, v1.PodReasonError, failed.Message)
	}
	return false, result.Error()
}

// startFailed: the sync could not start a container.
func startFailed(r kubecontainer.PodSyncResult) bool {
	for _, sr := range r.SyncResults {
		if (sr.Action == kubecontainer.StartContainer || sr.Action == kubecontainer.InitContainer) && sr.Error != nil {
			return true
		}
	}
	return false
}

// resizeError is the sync's failed in-place resize, if any.
func resizeError(r kubecontainer.PodSyncResult) *kubecontainer.SyncResult {
	for _, sr := range r.SyncResults {
		if sr.Action == kubecontainer.ResizePodInPlace && sr.Error != nil {
			return sr
		}
	}
	return nil
}

// resized: the sync resized a container in place.
func resized(r kubecontainer.PodSyncResult) bool {
	for _, sr := range r.SyncResults {
		if sr.Action == kubecontainer.ResizePodInPlace {
			return true
		}
	}
	return false
}

// startedSomething: the sync made a sandbox or started a container.
func startedSomething(r kubecontainer.PodSyncResult) bool {
	for _, sr := range r.SyncResults {
		switch sr.Action {
		case kubecontainer.CreatePodSandbox, kubecontainer.StartContainer, kubecontainer.InitContainer:
			return true
		}
	}
	return false
}

// setPodStatus hands a status to the status manager and says when the
// pod's phase changes.
func (kl *Kubelet) setPodStatus(pod *v1.Pod, s v1.PodStatus) {
	old, ok := kl.statusManager.GetPodStatus(pod.UID)
	if !ok {
		old = pod.Status
	}
	kl.statusManager.SetPodStatus(pod, s)
	kl.recordPodStarted(pod, old, s)
	if old.Phase != s.Phase {
		ip := ""
		if s.PodIP != "" {
			ip = " (pod IP " + s.PodIP + ")"
		}
		from := old.Phase
		if from == "" {
			from = "-"
		}
		kl.printf("pod %s/%s: phase %s -> %s%s", pod.Namespace, pod.Name, from, s.Phase, ip)
	}
}

// syncSummary is one line of what a sync did, or "" if it did nothing.
func syncSummary(r kubecontainer.PodSyncResult) string {
	var parts []string
	for _, sr := range r.SyncResults {
		what := ""
		switch sr.Action {
		case kubecontainer.CreatePodSandbox:
			what = "created sandbox"
		case kubecontainer.StartContainer, kubecontainer.InitContainer:
			what = fmt.Sprintf("started %s", sr.Target)
			if sr.Action == kubecontainer.InitContainer {
				what = fmt.Sprintf("started init container %s", sr.Target)
			}
		case kubecontainer.KillContainer:
			what = fmt.Sprintf("stopped %s", sr.Target)
		case kubecontainer.KillPodSandbox:
			what = "stopped sandbox"
		default:
			continue
		}
		if sr.Error != nil {
			what = fmt.Sprintf("%s failed: %v", strings.Replace(what, "started", "start", 1), sr.Error)
		}
		parts = append(parts, what)
	}
	return strings.Join(parts, ", ")
}

// getPullSecretsForPod reads the pod's imagePullSecrets with the node's
// credentials (the Node authorizer lets a node read the secrets its pods
// reference). One that cannot be read is skipped with a warning event, as
// upstream.
func (kl *Kubelet) getPullSecretsForPod(ctx context.Context, pod *v1.Pod) []v1.Secret {
	var secrets []v1.Secret
	for _, ref := range pod.Spec.ImagePullSecrets {
		if ref.Name == "" {
			continue
		}
		s, err := kl.client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			kl.recorder.Eventf(pod, v1.EventTypeWarning, events.FailedToRetrieveImagePullSecret,
				"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", ref.Name)
			continue
		}
		secrets = append(secrets, *s)
	}
	return secrets
}

// syncTerminatingPod is SyncTerminatingPod for real: write the status the
// pod has while it stops (changed by podStatusFn, if any: an evicted pod's
// phase Failed, reason Evicted, DisruptionTarget condition), stop every
// container and the sandbox within gracePeriod seconds, check that nothing
// runs, and write the status of the stopped pod (which keeps the evicted
// phase, reason and condition: apiPodStatus starts from the status
// manager's).
func (kl *Kubelet) syncTerminatingPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus, gracePeriod *int64, podStatusFn podworkers.PodStatusFunc) error {
	if kl.probeManager != nil {
		kl.probeManager.StopLivenessAndStartup(pod) // its containers stop anyway
	}
	apiPodStatus := kl.apiPodStatus(pod, podStatus, false)
	if podStatusFn != nil {
		podStatusFn(&apiPodStatus)
	}
	kl.setPodStatus(pod, apiPodStatus)
	running := kubecontainer.ConvertPodStatusToRunningPod(kl.containerRuntime.Type(), podStatus)
	if err := kl.containerRuntime.KillPod(ctx, pod, running, gracePeriod); err != nil {
		return fmt.Errorf("kill pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	stopped, err := kl.runtimePodStatus(ctx, pod, podStatus)
	if err != nil {
		return err
	}
	var still []string
	for _, cs := range stopped.ContainerStatuses {
		if cs.State == kubecontainer.ContainerStateRunning {
			still = append(still, cs.Name)
		}
	}
	if len(still) > 0 {
		return fmt.Errorf("pod %s/%s: containers %v still run after KillPod", pod.Namespace, pod.Name, still)
	}
	kl.printf("syncTerminatingPod %s/%s: stopped %d container(s) and the sandbox (grace period %ds)",
		pod.Namespace, pod.Name, len(running.Containers), *gracePeriod)
	kl.setPodStatus(pod, kl.apiPodStatus(pod, stopped, true))
	return nil
}

// runtimePodStatus asks the runtime, now, for the pod's sandboxes and
// containers (all of them, stopped ones too). A stopped sandbox has no IP
// any more: the pod keeps the one it had in prev, as the PLEG's pod cache
// does (upstream GenericPLEG.getPodIPs).
func (kl *Kubelet) runtimePodStatus(ctx context.Context, pod *v1.Pod, prev *kubecontainer.PodStatus) (*kubecontainer.PodStatus, error) {
	rp, err := kl.containerRuntime.GetPod(ctx, pod.UID)
	if err != nil {
		return nil, err
	}
	rp.Name, rp.Namespace = pod.Name, pod.Namespace
	st, err := kl.containerRuntime.GetPodStatus(ctx, rp)
	if err == nil && len(st.IPs) == 0 && prev != nil {
		st.IPs = prev.IPs
	}
	return st, err
}

// syncTerminatedPod is SyncTerminatedPod for real: nothing runs; with
// Volumes, the pod's volumes are torn down first; the pod's terminal
// status goes to the status manager, which deletes the pod from the API
// server (grace period 0) once that status is written.
func (kl *Kubelet) syncTerminatedPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus) error {
	s := kl.apiPodStatus(pod, podStatus, true)
	kl.setPodStatus(pod, s)
	if kl.probeManager != nil {
		kl.probeManager.RemovePod(pod)
	}
	if err := kl.releaseVolumes(ctx, pod); err != nil {
		return fmt.Errorf("pod %s/%s: volumes not unmounted: %w", pod.Namespace, pod.Name, err)
	}
	if err := kl.destroyPodCgroup(pod); err != nil { // its containers are gone (kubelet_cm.go)
		return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	kl.statusManager.TerminatePod(pod)
	final, _ := kl.statusManager.GetPodStatus(pod.UID)
	next := "its status stays"
	switch {
	case kubetypes.IsStaticPod(pod):
		next = "its mirror pod goes with the manifest"
	case pod.DeletionTimestamp != nil:
		next = "the status manager deletes it once that is written"
	}
	kl.printf("syncTerminatedPod %s/%s: phase %s; %s", pod.Namespace, pod.Name, final.Phase, next)
	return nil
}

// apiPodStatus is generateAPIPodStatus with what the Kubelet knows: the
// last status it computed (the status manager's, else the pod's own), the
// node's addresses, and the containers' last start failures.
func (kl *Kubelet) apiPodStatus(pod *v1.Pod, podStatus *kubecontainer.PodStatus, podIsTerminal bool) v1.PodStatus {
	old, ok := kl.statusManager.GetPodStatus(pod.UID)
	if !ok {
		old = pod.Status
	}
	// A copy: the new status shares nothing with the status manager's
	// cached one, whose readers (its sync loop, the prober's workers) run
	// while SetPodStatus normalizes the new one in place.
	old = *old.DeepCopy()
	var probes podStatusProber // a nil interface, not a nil *Manager, without probes
	if kl.probeManager != nil {
		probes = kl.probeManager
	}
	s := generateAPIPodStatusProbed(pod, podStatus, old, podIsTerminal, kl.getHostIPs(), kl.reasonCache, probes, kl.allocations())
	applyPodSyncHandlers(kl.lifecycle.podSyncHandlers, pod, &s)
	kl.withResizeConditions(pod, &s)
	kl.setPodLevelResourcesStatus(pod, &s, old)
	return s
}

// runtimeHelper answers the runtime manager's questions about a pod with
// PodRuntimeHelper, given the node's addresses once they are known.
type runtimeHelper struct{ kl *Kubelet }

func (h runtimeHelper) helper() *PodRuntimeHelper {
	p := &PodRuntimeHelper{Client: h.kl.client, NodeName: h.kl.nodeName, HostIPs: h.kl.getHostIPs(), Services: h.kl.serviceLister}
	if i := h.kl.serviceInformer; i != nil {
		p.ServicesSynced = i.HasSynced
	}
	if v := h.kl.volumes; v != nil { // the mounts, /etc/hosts and DNS
		p.PodDir, p.Volumes, p.DNS, p.ClusterDomain = h.kl.getPodDir, h.kl.mountedVolumes, v.dns, v.clusterDomain
		p.NodeHostsFile = v.nodeHostsFile
		// env and envFrom read the watched copies, as upstream: the pod's
		// references were registered before its containers start.
		if v.configMapManager != nil {
			p.ConfigMaps = v.configMapManager.GetConfigMap
		}
		if v.secretManager != nil {
			p.Secrets = v.secretManager.GetSecret
		}
	}
	return p
}

func (h runtimeHelper) GenerateRunContainerOptions(ctx context.Context, pod *v1.Pod, c *v1.Container, podIP string, podIPs []string, imageVolumes kubecontainer.ImageVolumes) (*kubecontainer.RunContainerOptions, error) {
	return h.helper().GenerateRunContainerOptions(ctx, pod, c, podIP, podIPs, imageVolumes)
}

func (h runtimeHelper) GetPodDNS(pod *v1.Pod) (*runtimeapi.DNSConfig, error) {
	return h.helper().GetPodDNS(pod)
}

func (h runtimeHelper) GeneratePodHostNameAndDomain(pod *v1.Pod) (string, string, error) {
	return h.helper().GeneratePodHostNameAndDomain(pod)
}

func (h runtimeHelper) GetPodCgroupParent(pod *v1.Pod) string { return h.kl.GetPodCgroupParent(pod) }

// PodCouldHaveRunningContainers is false once the pod's worker finished
// stopping it: only then may a terminal phase be written.
func (kl *Kubelet) PodCouldHaveRunningContainers(pod *v1.Pod) bool {
	if kl.wasRejected(pod.UID) {
		return false // never given to a pod worker
	}
	return !kl.podWorkers.IsPodKnownTerminated(pod.UID)
}

// getHostIPs are the node's addresses for status.hostIP(s): its
// InternalIPs, read from the API server once.
func (kl *Kubelet) getHostIPs() []string {
	kl.hostIPsMu.Lock()
	defer kl.hostIPsMu.Unlock()
	if kl.hostIPs != nil {
		return kl.hostIPs
	}
	ctx, cancel := context.WithTimeout(context.Background(), runtimeStatusTimeout)
	defer cancel()
	node, err := kl.client.CoreV1().Nodes().Get(ctx, kl.nodeName, metav1.GetOptions{})
	if err != nil {
		klog.V(2).InfoS("Cannot read the node's addresses yet", "node", kl.nodeName, "err", err)
		return nil
	}
	for _, a := range node.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			kl.hostIPs = append(kl.hostIPs, a.Address)
		}
	}
	return kl.hostIPs
}

var errNeedsContainerRuntime = errors.New("kubelet: Config.Pods.RunContainers needs the CRI (RemoteRuntimeService, RemoteImageService), from which the kubelet builds its runtime manager")

// statusPodIPs are status.podIPs, else status.podIP.
func statusPodIPs(s v1.PodStatus) []string {
	ips := make([]string, 0, len(s.PodIPs))
	for _, ip := range s.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 && s.PodIP != "" {
		ips = append(ips, s.PodIP)
	}
	return ips
}
