package status

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"

	kubecontainer "mykubelet/mylib/container"
	runtimeutil "mykubelet/mylib/kuberuntime/util"
)

// The reasons of the conditions the kubelet writes (upstream
// pkg/kubelet/status/generate.go).
const (
	UnknownContainerStatuses = "UnknownContainerStatuses"
	PodCompleted             = "PodCompleted"
	PodFailed                = "PodFailed"
	ContainersNotReady       = "ContainersNotReady"
	ContainersNotInitialized = "ContainersNotInitialized"
	ReadinessGatesNotReady   = "ReadinessGatesNotReady"
)

// PodConditionByKubelet tells whether the kubelet owns a pod condition type:
// it writes these and overwrites whatever else wrote them.
func PodConditionByKubelet(t v1.PodConditionType) bool {
	switch t {
	case v1.PodScheduled, v1.PodReady, v1.PodInitialized, v1.ContainersReady, v1.PodReadyToStartContainers,
		v1.PodResizePending, v1.PodResizeInProgress:
		return true
	}
	return false
}

// PodConditionSharedByKubelet tells whether the kubelet shares a pod
// condition type with others: DisruptionTarget, which the kubelet sets on
// a pod it evicts and the controllers on pods they preempt or delete.
func PodConditionSharedByKubelet(t v1.PodConditionType) bool {
	return t == v1.DisruptionTarget
}

func findContainerStatus(statuses []v1.ContainerStatus, name string) (v1.ContainerStatus, bool) {
	for _, s := range statuses {
		if s.Name == name {
			return s, true
		}
	}
	return v1.ContainerStatus{}, false
}

func unreadyMessage(unknown, unready []string, unreadyWord string) string {
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", unknown))
	}
	if len(unready) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with %s status: %s", unreadyWord, unready))
	}
	return strings.Join(msgs, ", ")
}

// GenerateContainersReadyCondition is True when every sidecar (restartable
// init container) and every regular container is ready; a pod that
// finished is never ready.
func GenerateContainersReadyCondition(pod *v1.Pod, containerStatuses []v1.ContainerStatus, podPhase v1.PodPhase) v1.PodCondition {
	if containerStatuses == nil {
		return v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: UnknownContainerStatuses}
	}
	var unknown, unready []string
	var counted []v1.Container
	for i := range pod.Spec.InitContainers {
		if kubecontainer.IsRestartableInitContainer(&pod.Spec.InitContainers[i]) {
			counted = append(counted, pod.Spec.InitContainers[i])
		}
	}
	for _, c := range append(counted, pod.Spec.Containers...) {
		s, ok := findContainerStatus(containerStatuses, c.Name)
		switch {
		case !ok:
			unknown = append(unknown, c.Name)
		case !s.Ready:
			unready = append(unready, c.Name)
		}
	}
	if podPhase == v1.PodSucceeded && len(unknown) == 0 {
		return v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: PodCompleted}
	}
	if podPhase == v1.PodFailed {
		return v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: PodFailed}
	}
	if msg := unreadyMessage(unknown, unready, "unready"); msg != "" {
		return v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: ContainersNotReady, Message: msg}
	}
	return v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionTrue}
}

// GeneratePodReadyCondition is ContainersReady and, on top, every readiness
// gate's condition True.
func GeneratePodReadyCondition(pod *v1.Pod, conditions []v1.PodCondition, containerStatuses []v1.ContainerStatus, podPhase v1.PodPhase) v1.PodCondition {
	cr := GenerateContainersReadyCondition(pod, containerStatuses, podPhase)
	if cr.Status != v1.ConditionTrue {
		return v1.PodCondition{Type: v1.PodReady, Status: cr.Status, Reason: cr.Reason, Message: cr.Message}
	}
	var msgs []string
	for _, gate := range pod.Spec.ReadinessGates {
		var found *v1.PodCondition
		for i := range conditions {
			if conditions[i].Type == gate.ConditionType {
				found = &conditions[i]
			}
		}
		switch {
		case found == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", gate.ConditionType))
		case found.Status != v1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", gate.ConditionType, found.Status))
		}
	}
	if len(msgs) > 0 {
		return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: ReadinessGatesNotReady, Message: strings.Join(msgs, ", ")}
	}
	return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}
}

// GeneratePodInitializedCondition is True once every init container
// completed (is ready) and every sidecar started, or once any regular
// container started.
func GeneratePodInitializedCondition(pod *v1.Pod, containerStatuses []v1.ContainerStatus, podPhase v1.PodPhase) v1.PodCondition {
	if containerStatuses == nil && len(pod.Spec.InitContainers) > 0 {
		return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionFalse, Reason: UnknownContainerStatuses}
	}
	var unknown, incomplete []string
	for _, c := range pod.Spec.InitContainers {
		s, ok := findContainerStatus(containerStatuses, c.Name)
		switch {
		case !ok:
			unknown = append(unknown, c.Name)
		case kubecontainer.IsRestartableInitContainer(&c):
			if s.Started == nil || !*s.Started {
				incomplete = append(incomplete, c.Name)
			}
		case !s.Ready:
			incomplete = append(incomplete, c.Name)
		}
	}
	if podPhase == v1.PodSucceeded && len(unknown) == 0 {
		return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue, Reason: PodCompleted}
	}
	for _, c := range pod.Spec.Containers {
		if s, ok := findContainerStatus(containerStatuses, c.Name); ok && (s.State.Running != nil || s.State.Terminated != nil) {
			return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
		}
	}
	if msg := unreadyMessage(unknown, incomplete, "incomplete"); msg != "" {
		return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionFalse, Reason: ContainersNotInitialized, Message: msg}
	}
	return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
}

// GeneratePodReadyToStartContainersCondition is True once the pod's
// sandbox is ready with its network: containers can be started.
func GeneratePodReadyToStartContainersCondition(pod *v1.Pod, podStatus *kubecontainer.PodStatus) v1.PodCondition {
	if changed, _, _ := runtimeutil.PodSandboxChanged(pod, podStatus); changed {
		return v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse}
	}
	return v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue}
}

// NeedToReconcilePodReadiness reports whether pod's Ready condition, as the
// API server has it, is no longer what its readiness gates and containers
// say: someone else (a controller, kubectl patch) set a gate's condition,
// which reaches the kubelet as a change of status alone (RECONCILE), and
// the kubelet syncs the pod to write Ready again.
func NeedToReconcilePodReadiness(pod *v1.Pod) bool {
	if len(pod.Spec.ReadinessGates) == 0 {
		return false
	}
	want := GeneratePodReadyCondition(pod, pod.Status.Conditions, pod.Status.ContainerStatuses, pod.Status.Phase)
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status != want.Status || c.Message != want.Message
		}
	}
	return false
}
