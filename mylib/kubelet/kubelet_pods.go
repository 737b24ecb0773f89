package kubelet

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/status"
)

// The waiting reasons of a container not started yet (upstream
// pkg/kubelet/kubelet_pods.go).
const (
	ContainerCreating = "ContainerCreating"
	PodInitializing   = "PodInitializing"
)

// generateAPIPodStatus turns what the runtime says of a pod into the
// pod's API status: phase (getPhase), the conditions the kubelet owns,
// host and pod IPs, QoS class, and one status per container. podIsTerminal
// says the pod's workers are done with it: a pod whose containers all
// stopped is then Succeeded or Failed even under restartPolicy Always.
func (kl *Kubelet) generateAPIPodStatus(pod *v1.Pod, podStatus *kubecontainer.PodStatus, podIsTerminal bool) v1.PodStatus {
	old := pod.Status
	if cached, ok := kl.statusManager.GetPodStatus(pod.UID); ok {
		old = cached
	}
	s := v1.PodStatus{QOSClass: getPodQOS(pod), ObservedGeneration: pod.Generation}
	s.InitContainerStatuses = kl.convertToAPIContainerStatuses(pod, podStatus, pod.Spec.InitContainers, old.InitContainerStatuses, true)
	s.ContainerStatuses = kl.convertToAPIContainerStatuses(pod, podStatus, pod.Spec.Containers, old.ContainerStatuses, false)
	s.Phase = getPhase(pod, append(append([]v1.ContainerStatus{}, s.InitContainerStatuses...), s.ContainerStatuses...), podIsTerminal)
	if old.Phase == v1.PodSucceeded || old.Phase == v1.PodFailed {
		s.Phase = old.Phase // a terminal phase never goes back
	}
	s.StartTime = old.StartTime

	all := append(append([]v1.ContainerStatus{}, s.InitContainerStatuses...), s.ContainerStatuses...)
	s.Conditions = append(s.Conditions,
		status.GeneratePodReadyToStartContainersCondition(pod, podStatus),
		status.GeneratePodInitializedCondition(pod, all, s.Phase),
		status.GeneratePodReadyCondition(pod, old.Conditions, s.ContainerStatuses, s.Phase),
		status.GenerateContainersReadyCondition(pod, s.ContainerStatuses, s.Phase),
		v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue},
	)
	for _, c := range old.Conditions { // conditions others own (readiness gates) are kept
		if !status.PodConditionByKubelet(c.Type) {
			s.Conditions = append(s.Conditions, c)
		}
	}

	hostIPs := kl.getHostIPs()
	if len(hostIPs) > 0 {
		s.HostIP = hostIPs[0]
		for _, ip := range hostIPs {
			s.HostIPs = append(s.HostIPs, v1.HostIP{IP: ip})
		}
	}
	podIPs := podStatus.IPs
	if kubecontainer.IsHostNetworkPod(pod) {
		podIPs = hostIPs
	}
	if len(podIPs) == 0 && podIsTerminal {
		for _, ip := range old.PodIPs { // a stopped sandbox has no IP; keep the one it had
			podIPs = append(podIPs, ip.IP)
		}
	}
	if len(podIPs) > 0 {
		s.PodIP = podIPs[0]
		for _, ip := range podIPs {
			s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
		}
	}
	return s
}

// convertToAPIContainerStatuses is one status per container of specs, from
// the runtime's newest status of it.
func (kl *Kubelet) convertToAPIContainerStatuses(pod *v1.Pod, podStatus *kubecontainer.PodStatus, specs []v1.Container, old []v1.ContainerStatus, isInit bool) []v1.ContainerStatus {
	if len(specs) == 0 {
		return nil
	}
	initDone := true
	for _, c := range pod.Spec.InitContainers {
		if cs := podStatus.FindContainerStatusByName(c.Name); cs == nil || cs.State != kubecontainer.ContainerStateExited || cs.ExitCode != 0 {
			initDone = false
		}
	}
	out := make([]v1.ContainerStatus, 0, len(specs))
	for i := range specs {
		spec := &specs[i]
		s := v1.ContainerStatus{Name: spec.Name, Image: spec.Image}
		waiting := ContainerCreating
		if !isInit && !initDone {
			waiting = PodInitializing
		}
		var newest, previous *kubecontainer.Status
		for _, cs := range podStatus.ContainerStatuses { // newest first
			if cs.Name != spec.Name {
				continue
			}
			if newest == nil {
				newest = cs
			} else if previous == nil {
				previous = cs
			}
		}
		if newest == nil {
			s.State.Waiting = &v1.ContainerStateWaiting{Reason: waiting}
			for _, o := range old { // what the kubelet knew (e.g. after a restart) stays
				if o.Name == spec.Name && o.State.Terminated != nil {
					s.State, s.RestartCount = o.State, o.RestartCount
				}
			}
		} else {
			s.ContainerID = newest.ID.String()
			s.ImageID = newest.ImageRef
			if newest.Image != "" {
				s.Image = newest.Image
			}
			s.RestartCount = int32(newest.RestartCount)
			switch newest.State {
			case kubecontainer.ContainerStateRunning:
				s.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(newest.StartedAt)}
				s.Started = ptr(true)
				s.Ready = !isInit // no readiness probes: a running container is ready
			case kubecontainer.ContainerStateExited:
				s.State.Terminated = terminatedState(newest)
				s.Started = ptr(false)
				s.Ready = isInit && newest.ExitCode == 0
			default:
				s.State.Waiting = &v1.ContainerStateWaiting{Reason: ContainerCreating}
				s.Started = ptr(false)
			}
			if previous != nil && previous.State == kubecontainer.ContainerStateExited {
				s.LastTerminationState.Terminated = terminatedState(previous)
			}
		}
		// A container that failed to start, or waits to restart, shows why.
		if r, ok := kl.reasonCache.Get(pod.UID, spec.Name); ok && s.State.Running == nil {
			if s.State.Terminated != nil && kubecontainer.ShouldContainerBeRestarted(spec, pod, podStatus) {
				s.LastTerminationState = s.State
			}
			if s.State.Terminated == nil || kubecontainer.ShouldContainerBeRestarted(spec, pod, podStatus) {
				s.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: r.Err.Error(), Message: r.Message}}
			}
		}
		out = append(out, s)
	}
	return out
}

func terminatedState(cs *kubecontainer.Status) *v1.ContainerStateTerminated {
	reason := cs.Reason
	if reason == "" {
		reason = "Error"
		if cs.ExitCode == 0 {
			reason = "Completed"
		}
	}
	return &v1.ContainerStateTerminated{
		ExitCode: int32(cs.ExitCode), Reason: reason, Message: cs.Message,
		StartedAt: metav1.NewTime(cs.StartedAt), FinishedAt: metav1.NewTime(cs.FinishedAt), ContainerID: cs.ID.String(),
	}
}

// getPhase is the pod's phase from its containers' statuses (upstream
// getPhase, without sidecar init containers): Pending while an init
// container has not succeeded or a container waits; Running while one
// runs; Succeeded or Failed once all stopped for good.
func getPhase(pod *v1.Pod, statuses []v1.ContainerStatus, podIsTerminal bool) v1.PodPhase {
	find := func(name string) *v1.ContainerStatus {
		for i := range statuses {
			if statuses[i].Name == name {
				return &statuses[i]
			}
		}
		return nil
	}
	pendingInit, failedInit := 0, 0
	for _, c := range pod.Spec.InitContainers {
		s := find(c.Name)
		switch {
		case s == nil, s.State.Running != nil:
			pendingInit++
		case s.State.Terminated != nil && s.State.Terminated.ExitCode == 0:
		case s.State.Terminated != nil:
			failedInit++
		case s.LastTerminationState.Terminated != nil && s.LastTerminationState.Terminated.ExitCode != 0:
			failedInit++
		default:
			pendingInit++
		}
	}
	unknown, running, waiting, stopped, succeeded := 0, 0, 0, 0, 0
	for _, c := range pod.Spec.Containers {
		s := find(c.Name)
		switch {
		case s == nil:
			unknown++
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil:
			stopped++
			if s.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case s.LastTerminationState.Terminated != nil:
			stopped++
		default:
			waiting++
		}
	}
	if failedInit > 0 && pod.Spec.RestartPolicy == v1.RestartPolicyNever {
		return v1.PodFailed
	}
	switch {
	case pendingInit > 0, failedInit > 0:
		if podIsTerminal {
			return v1.PodFailed
		}
		return v1.PodPending
	case waiting > 0:
		return v1.PodPending
	case running > 0 && unknown == 0:
		return v1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if podIsTerminal {
			if stopped == succeeded {
				return v1.PodSucceeded
			}
			return v1.PodFailed
		}
		switch {
		case pod.Spec.RestartPolicy == v1.RestartPolicyAlways:
			return v1.PodRunning // it will be restarted
		case stopped == succeeded:
			return v1.PodSucceeded
		case pod.Spec.RestartPolicy == v1.RestartPolicyNever:
			return v1.PodFailed
		}
		return v1.PodRunning // OnFailure: the failed ones restart
	}
	return v1.PodPending
}

// getPodQOS is the pod's QoS class: Guaranteed when every container has
// equal cpu and memory requests and limits, BestEffort when none has any,
// Burstable otherwise (upstream pkg/apis/core/v1/helper/qos).
func getPodQOS(pod *v1.Pod) v1.PodQOSClass {
	any, guaranteed := false, true
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
				req, hasReq := c.Resources.Requests[name]
				lim, hasLim := c.Resources.Limits[name]
				if (hasReq && !req.IsZero()) || (hasLim && !lim.IsZero()) {
					any = true
				}
				if !hasLim || lim.IsZero() || (hasReq && req.Cmp(lim) != 0) {
					guaranteed = false
				}
			}
		}
	}
	switch {
	case !any:
		return v1.PodQOSBestEffort
	case guaranteed:
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

func ptr[T any](v T) *T { return &v }
