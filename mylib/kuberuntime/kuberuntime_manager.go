package kuberuntime

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/events"
	runtimeutil "mykubelet/mylib/kuberuntime/util"
	proberesults "mykubelet/mylib/prober/results"
)

// ProbeResults is what computePodActions reads of the prober's results
// (mylib/prober/results.Manager).
type ProbeResults interface {
	Get(kubecontainer.ContainerID) (proberesults.Result, bool)
}

// probeFailed says whether the container's liveness or startup probe has
// failed, with upstream's message and the probe, whose
// terminationGracePeriodSeconds then applies.
func (m *Manager) probeFailed(c *v1.Container, id kubecontainer.ContainerID) (string, *v1.Probe, bool) {
	if m.livenessManager != nil {
		if r, ok := m.livenessManager.Get(id); ok && r == proberesults.Failure {
			return fmt.Sprintf("Container %s failed liveness probe", c.Name), c.LivenessProbe, true
		}
	}
	if m.startupManager != nil {
		if r, ok := m.startupManager.Get(id); ok && r == proberesults.Failure {
			return fmt.Sprintf("Container %s failed startup probe", c.Name), c.StartupProbe, true
		}
	}
	return "", nil, false
}

var _ kubecontainer.Runtime = (*Manager)(nil)

// literalHelper is the RuntimeHelper of a Manager given none: env values as
// written (no valueFrom, no $(VAR) expansion), hostname the pod's.
type literalHelper struct{}

func (literalHelper) GenerateRunContainerOptions(_ context.Context, _ *v1.Pod, c *v1.Container, _ string, _ []string) (*kubecontainer.RunContainerOptions, error) {
	opts := &kubecontainer.RunContainerOptions{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			opts.Envs = append(opts.Envs, kubecontainer.EnvVar{Name: e.Name, Value: e.Value})
		}
	}
	return opts, nil
}

func (literalHelper) GetPodDNS(*v1.Pod) (*runtimeapi.DNSConfig, error) { return nil, nil }

func (literalHelper) GeneratePodHostNameAndDomain(pod *v1.Pod) (string, string, error) {
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname, "", nil
	}
	return pod.Name, "", nil
}

// containerToKillInfo says why a running container is stopped.
type containerToKillInfo struct {
	container *kubecontainer.Container
	name      string
	message   string
	// gracePeriodOverride is the failed probe's
	// terminationGracePeriodSeconds, if it has one.
	gracePeriodOverride *int64
}

// podActions is what SyncPod must do to bring the runtime to the pod's spec.
type podActions struct {
	// KillPod stops every container and the sandbox (before making a
	// new sandbox, or because nothing should run any more).
	KillPod bool
	// CreateSandbox makes a new sandbox, with attempt number Attempt.
	CreateSandbox bool
	// SandboxID is the sandbox in use, or the one being replaced.
	SandboxID string
	Attempt   uint32
	// InitContainersToStart are indexes into pod.Spec.InitContainers. Init
	// containers run one at a time, so it holds at most one.
	InitContainersToStart []int
	// ContainersToStart are indexes into pod.Spec.Containers.
	ContainersToStart []int
	// EphemeralContainersToStart are indexes into
	// pod.Spec.EphemeralContainers: each starts once and never again.
	EphemeralContainersToStart []int
	// ContainersToKill are running containers to stop, by ID.
	ContainersToKill map[kubecontainer.ContainerID]containerToKillInfo
}

// shouldRestartOnFailure tells whether failed containers are started again.
func shouldRestartOnFailure(pod *v1.Pod) bool {
	return pod.Spec.RestartPolicy != v1.RestartPolicyNever
}

func containerSucceeded(c *v1.Container, podStatus *kubecontainer.PodStatus) bool {
	cs := podStatus.FindContainerStatusByName(c.Name)
	return cs != nil && cs.State == kubecontainer.ContainerStateExited && cs.ExitCode == 0
}

func isInitContainerFailed(s *kubecontainer.Status) bool {
	return s.State == kubecontainer.ContainerStateUnknown || (s.State == kubecontainer.ContainerStateExited && s.ExitCode != 0)
}

// findNextInitContainerToRun returns the status of the last failed init
// container if any, the next init container to run, and whether all init
// containers completed. A running regular container means they all did.
func findNextInitContainerToRun(pod *v1.Pod, podStatus *kubecontainer.PodStatus) (failed *kubecontainer.Status, next int, done bool) {
	inits := pod.Spec.InitContainers
	if len(inits) == 0 {
		return nil, -1, true
	}
	for i := range pod.Spec.Containers {
		if cs := podStatus.FindContainerStatusByName(pod.Spec.Containers[i].Name); cs != nil && cs.State == kubecontainer.ContainerStateRunning {
			return nil, -1, true
		}
	}
	for i := len(inits) - 1; i >= 0; i-- {
		if cs := podStatus.FindContainerStatusByName(inits[i].Name); cs != nil && isInitContainerFailed(cs) {
			return cs, i, false
		}
	}
	for i := len(inits) - 1; i >= 0; i-- {
		cs := podStatus.FindContainerStatusByName(inits[i].Name)
		switch {
		case cs == nil:
			continue
		case cs.State == kubecontainer.ContainerStateExited:
			if i == len(inits)-1 {
				return nil, -1, true // all succeeded
			}
			return nil, i + 1, false
		default:
			return nil, -1, false // still running (or created): wait for it
		}
	}
	return nil, 0, false
}

// computePodActions compares the pod's spec with what the runtime runs.
// A running container whose liveness or startup probe failed is killed,
// and started again unless the restart policy is Never, as upstream.
// Unlike upstream: no sidecar (restartable) init containers, no ephemeral
// containers, no in-place resize.
func (m *Manager) computePodActions(pod *v1.Pod, podStatus *kubecontainer.PodStatus) podActions {
	createPodSandbox, attempt, sandboxID := runtimeutil.PodSandboxChanged(pod, podStatus)
	changes := podActions{
		KillPod:          createPodSandbox,
		CreateSandbox:    createPodSandbox,
		SandboxID:        sandboxID,
		Attempt:          attempt,
		ContainersToKill: map[kubecontainer.ContainerID]containerToKillInfo{},
	}

	if createPodSandbox {
		// A pod that ran to completion and must not restart gets no new
		// sandbox: it is done.
		if !shouldRestartOnFailure(pod) && attempt != 0 && len(podStatus.ContainerStatuses) != 0 {
			changes.CreateSandbox = false
			return changes
		}
		var toStart []int
		for i := range pod.Spec.Containers {
			if pod.Spec.RestartPolicy == v1.RestartPolicyOnFailure && containerSucceeded(&pod.Spec.Containers[i], podStatus) {
				continue
			}
			toStart = append(toStart, i)
		}
		if len(toStart) == 0 {
			if _, _, done := findNextInitContainerToRun(pod, podStatus); done {
				changes.CreateSandbox = false // everything succeeded already
				return changes
			}
		}
		if len(pod.Spec.InitContainers) != 0 {
			changes.InitContainersToStart = []int{0}
			return changes
		}
		changes.ContainersToStart = toStart
		return changes
	}

	failed, next, done := findNextInitContainerToRun(pod, podStatus)
	if !done {
		if next >= 0 {
			if failed != nil && !shouldRestartOnFailure(pod) {
				changes.KillPod = true // an init container failed for good
			} else {
				changes.InitContainersToStart = []int{next}
			}
		}
		return changes
	}

	keepCount := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := podStatus.FindContainerStatusByName(c.Name)
		if cs == nil || cs.State != kubecontainer.ContainerStateRunning {
			if kubecontainer.ShouldContainerBeRestarted(c, pod, podStatus) {
				changes.ContainersToStart = append(changes.ContainersToStart, i)
			}
			continue
		}
		if cs.Hash != 0 && cs.Hash != kubecontainer.HashContainer(c) {
			// The spec changed (e.g. a new image): replace the container.
			changes.ContainersToStart = append(changes.ContainersToStart, i)
			changes.ContainersToKill[cs.ID] = containerToKillInfo{
				container: &kubecontainer.Container{ID: cs.ID, Name: cs.Name},
				name:      c.Name,
				message:   fmt.Sprintf("Container %s definition changed, will be restarted", c.Name),
			}
			continue
		}
		if msg, probe, failed := m.probeFailed(c, cs.ID); failed {
			info := containerToKillInfo{container: &kubecontainer.Container{ID: cs.ID, Name: cs.Name}, name: c.Name, message: msg}
			if probe != nil && probe.TerminationGracePeriodSeconds != nil && pod.DeletionGracePeriodSeconds == nil {
				info.gracePeriodOverride = probe.TerminationGracePeriodSeconds
			}
			if pod.Spec.RestartPolicy != v1.RestartPolicyNever {
				info.message += ", will be restarted"
				changes.ContainersToStart = append(changes.ContainersToStart, i)
			}
			changes.ContainersToKill[cs.ID] = info
			continue
		}
		keepCount++
	}
	if keepCount == 0 && len(changes.ContainersToStart) == 0 {
		changes.KillPod = true // nothing runs and nothing should
	}
	return changes
}

// SyncPod brings the runtime to the pod's spec, in upstream's steps:
// compute the actions; kill the pod if its sandbox must go (or nothing
// should run), else stop containers to replace; make the sandbox; start
// the next init container and wait for it to finish (the next sync goes
// on); else start the regular containers that should run. pullSecrets are
// the pod's imagePullSecrets, read by the caller; backOff may be nil (no
// CrashLoopBackOff).
func (m *Manager) SyncPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus, pullSecrets []v1.Secret, backOff *flowcontrol.Backoff) (result kubecontainer.PodSyncResult) {
	if podStatus == nil { // nothing known yet: as a pod the runtime has never seen
		podStatus = &kubecontainer.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	changes := m.computePodActions(pod, podStatus)
	changes.EphemeralContainersToStart = ephemeralContainersToStart(pod, podStatus, changes)
	klog.V(3).InfoS("computePodActions got for pod", "pod", klog.KObj(pod), "killPod", changes.KillPod,
		"createSandbox", changes.CreateSandbox, "init", changes.InitContainersToStart, "start", changes.ContainersToStart)
	if changes.CreateSandbox && changes.SandboxID != "" {
		m.event(containerRef(pod, nil), v1.EventTypeNormal, events.SandboxChanged, "Pod sandbox changed, it will be killed and re-created.")
	}

	if changes.KillPod {
		killResult := m.killPodWithSyncResult(ctx, pod, kubecontainer.ConvertPodStatusToRunningPod(m.runtimeName, podStatus), nil)
		result.AddPodSyncResult(killResult)
		if killResult.Error() != nil {
			return result
		}
	} else {
		for _, info := range changes.ContainersToKill {
			r := kubecontainer.NewSyncResult(kubecontainer.KillContainer, info.name)
			result.AddSyncResult(r)
			if err := m.killContainer(ctx, pod, info.container, info.message, info.gracePeriodOverride); err != nil {
				r.Fail(kubecontainer.ErrKillContainer, err.Error())
				return result
			}
		}
	}

	podSandboxID := changes.SandboxID
	podIPs := podStatus.IPs
	if changes.CreateSandbox {
		r := kubecontainer.NewSyncResult(kubecontainer.CreatePodSandbox, pod.Namespace+"/"+pod.Name)
		result.AddSyncResult(r)
		var msg string
		var err error
		podSandboxID, msg, err = m.createPodSandbox(ctx, pod, changes.Attempt)
		if err != nil {
			r.Fail(kubecontainer.ErrCreatePodSandbox, msg)
			m.event(containerRef(pod, nil), v1.EventTypeWarning, events.FailedCreatePodSandBox, "Failed to create pod sandbox: "+errMessage(err))
			return result
		}
		resp, err := m.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podSandboxID})
		if err != nil || resp.GetStatus() == nil {
			if err == nil {
				err = errors.New("the runtime returned no status")
			}
			m.event(containerRef(pod, nil), v1.EventTypeWarning, events.FailedStatusPodSandBox, "Unable to get pod sandbox status: "+errMessage(err))
			result.Fail(err)
			return result
		}
		podIPs = nil
		if !kubecontainer.IsHostNetworkPod(pod) {
			podIPs = determinePodSandboxIPs(resp.Status)
		}
	}
	if len(changes.InitContainersToStart) == 0 && len(changes.ContainersToStart) == 0 && len(changes.EphemeralContainersToStart) == 0 {
		return result
	}
	podIP := ""
	if len(podIPs) > 0 {
		podIP = podIPs[0]
	}

	configResult := kubecontainer.NewSyncResult(kubecontainer.ConfigPodSandbox, podSandboxID)
	result.AddSyncResult(configResult)
	sandboxConfig, err := m.generatePodSandboxConfig(pod, changes.Attempt)
	if err != nil {
		configResult.Fail(kubecontainer.ErrConfigPodSandbox, err.Error())
		return result
	}

	start := func(action kubecontainer.SyncAction, c *v1.Container) error {
		r := kubecontainer.NewSyncResult(action, c.Name)
		result.AddSyncResult(r)
		if inBackOff, msg, err := m.doBackOff(pod, c, podStatus, backOff); inBackOff {
			r.Fail(err, msg)
			return err
		}
		if msg, err := m.startContainer(ctx, podSandboxID, sandboxConfig, c, pod, podStatus, pullSecrets, podIP, podIPs); err != nil {
			r.Fail(err, msg)
			return err
		}
		return nil
	}
	// Ephemeral containers first, as upstream: a debugging container must
	// not wait for init containers that may never finish.
	for _, i := range changes.EphemeralContainersToStart {
		c := v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		_ = start(kubecontainer.StartContainer, &c) // recorded in result
	}
	for _, i := range changes.InitContainersToStart {
		if err := start(kubecontainer.InitContainer, &pod.Spec.InitContainers[i]); err != nil {
			return result
		}
		return result // started: the next sync sees whether it completed
	}
	for _, i := range changes.ContainersToStart {
		_ = start(kubecontainer.StartContainer, &pod.Spec.Containers[i]) // recorded in result; the others still start
	}
	return result
}

// KillPod stops the pod's running containers (in parallel, each within its
// grace period; gracePeriodOverride, if set, for all), then its sandboxes.
// pod may be nil for a pod the kubelet no longer knows.
func (m *Manager) KillPod(ctx context.Context, pod *v1.Pod, runningPod kubecontainer.Pod, gracePeriodOverride *int64) error {
	result := m.killPodWithSyncResult(ctx, pod, runningPod, gracePeriodOverride)
	return result.Error()
}

func (m *Manager) killPodWithSyncResult(ctx context.Context, pod *v1.Pod, runningPod kubecontainer.Pod, gracePeriodOverride *int64) (result kubecontainer.PodSyncResult) {
	killResults := m.killContainersWithSyncResult(ctx, pod, runningPod, gracePeriodOverride)
	result.AddSyncResult(killResults...)
	for _, r := range killResults {
		if r.Error != nil {
			return result // upstream leaves the sandbox while a container may still run
		}
	}
	for _, s := range runningPod.Sandboxes {
		r := kubecontainer.NewSyncResult(kubecontainer.KillPodSandbox, runningPod.ID)
		result.AddSyncResult(r)
		if _, err := m.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.ID.ID}); err != nil {
			r.Fail(kubecontainer.ErrKillPodSandbox, err.Error())
			if pod != nil {
				m.event(containerRef(pod, nil), v1.EventTypeWarning, events.FailedToKillPod, "error killing pod: "+errMessage(err))
			}
		}
	}
	return result
}
