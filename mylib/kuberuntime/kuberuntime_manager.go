package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"mykubelet/mylib/cadvisor"
	"mykubelet/mylib/cm"
	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/events"
	runtimeutil "mykubelet/mylib/kuberuntime/util"
	"mykubelet/mylib/lifecycle"
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

func (literalHelper) GenerateRunContainerOptions(_ context.Context, _ *v1.Pod, c *v1.Container, _ string, _ []string, _ kubecontainer.ImageVolumes) (*kubecontainer.RunContainerOptions, error) {
	opts := &kubecontainer.RunContainerOptions{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			opts.Envs = append(opts.Envs, kubecontainer.EnvVar{Name: e.Name, Value: e.Value})
		}
	}
	return opts, nil
}

func (literalHelper) GetPodDNS(*v1.Pod) (*runtimeapi.DNSConfig, error) { return nil, nil }

func (literalHelper) GetPodCgroupParent(*v1.Pod) string { return "" }

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
	// ContainersToUpdate are running containers resized in place, in
	// the spec's order (computePodResizeAction).
	ContainersToUpdate []containerToUpdateInfo
	// UpdatePodResources: a container is restarted to be resized (its
	// resizePolicy says RestartContainer), so the pod's cgroup is
	// resized, between the kill and the start.
	UpdatePodResources bool
	// UpdatePodLevelResources: the pod's allocated pod-level resources
	// (spec.resources) differ from those actuated, so the pod's cgroup
	// is resized and the new ones recorded as actuated
	// (computePodLevelResourcesResizeAction).
	UpdatePodLevelResources bool
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

// hasAnyRegularContainerCreated tells whether a regular container was ever
// created in the pod: then its init containers all did their part.
func hasAnyRegularContainerCreated(pod *v1.Pod, podStatus *kubecontainer.PodStatus) bool {
	for i := range pod.Spec.Containers {
		cs := podStatus.FindContainerStatusByName(pod.Spec.Containers[i].Name)
		if cs == nil {
			continue
		}
		switch cs.State {
		case kubecontainer.ContainerStateCreated, kubecontainer.ContainerStateRunning, kubecontainer.ContainerStateExited:
			return true
		}
	}
	return false
}

// sidecarStarted tells whether a running sidecar has started: it has no
// startup probe, or the probe succeeded. found is false while the probe
// has no result yet. A Manager without a startup results manager takes
// every running sidecar as started.
func (m *Manager) sidecarStarted(c *v1.Container, id kubecontainer.ContainerID) (result proberesults.Result, found bool) {
	if c.StartupProbe == nil || m.startupManager == nil {
		return proberesults.Success, true
	}
	return m.startupManager.Get(id)
}

// computeInitContainerActions fills changes with the init containers to
// start (and sidecars to kill) and tells whether the pod has initialized:
// its regular containers may run. As upstream, it walks the init
// containers from the last to the first, since the runtime may have
// forgotten the early ones: the last one with a status says where the pod
// is. A regular init container runs to completion before the next starts;
// a sidecar (restartPolicy Always) only has to start (its startup probe,
// if any, succeeded). Once a later init container has a status, the
// earlier regular ones need nothing more, but an earlier sidecar that
// exited (or vanished) is started again, whatever the pod's restartPolicy.
// Unlike upstream, a sidecar whose spec changed is not replaced.
func (m *Manager) computeInitContainerActions(pod *v1.Pod, podStatus *kubecontainer.PodStatus, changes *podActions) bool {
	inits := pod.Spec.InitContainers
	if len(inits) == 0 {
		return true
	}
	// A regular container created or running means initialization is over;
	// an exited one may belong to an earlier sandbox, so it does not count.
	podHasInitialized := false
	for i := range pod.Spec.Containers {
		if cs := podStatus.FindContainerStatusByName(pod.Spec.Containers[i].Name); cs != nil &&
			(cs.State == kubecontainer.ContainerStateCreated || cs.State == kubecontainer.ContainerStateRunning) {
			podHasInitialized = true
			break
		}
	}
	// isPreviouslyInitialized: an init container after the one at hand
	// has already run (or the pod has initialized).
	isPreviouslyInitialized := podHasInitialized
	restartOnFailure := shouldRestartOnFailure(pod)
	var toStart []int // collected last to first
	// kill kills a sidecar whose probe failed, within that probe's
	// terminationGracePeriodSeconds when it sets one (as for a regular
	// container).
	kill := func(c *v1.Container, cs *kubecontainer.Status, message string, probe *v1.Probe) {
		info := containerToKillInfo{container: &kubecontainer.Container{ID: cs.ID, Name: cs.Name}, name: c.Name, message: message}
		if probe != nil && probe.TerminationGracePeriodSeconds != nil && pod.DeletionGracePeriodSeconds == nil {
			info.gracePeriodOverride = probe.TerminationGracePeriodSeconds
		}
		changes.ContainersToKill[cs.ID] = info
	}

	for i := len(inits) - 1; i >= 0; i-- {
		c := &inits[i]
		sidecar := kubecontainer.IsRestartableInitContainer(c)
		cs := podStatus.FindContainerStatusByName(c.Name)
		if cs == nil {
			// Never ran, or the runtime removed it: only a sidecar past
			// which the pod went on must be running again.
			if isPreviouslyInitialized && sidecar {
				toStart = append(toStart, i)
			}
			continue
		}
		if isPreviouslyInitialized && !sidecar {
			continue // done its part
		}

		switch cs.State {
		case kubecontainer.ContainerStateCreated:
			// Created but never started (the start failed): start it.
			toStart = append(toStart, i)

		case kubecontainer.ContainerStateRunning:
			if !sidecar {
				break // wait for it to complete
			}
			result, found := m.sidecarStarted(c, cs.ID)
			if !found {
				break // its startup probe has not run yet: wait
			}
			if result != proberesults.Success {
				if result == proberesults.Failure {
					kill(c, cs, fmt.Sprintf("Init container %s failed startup probe", c.Name), c.StartupProbe)
					toStart = append(toStart, i)
				}
				break
			}
			// Started: the next init container (or the regular ones) may go.
			if i == len(inits)-1 {
				podHasInitialized = true
			} else if !isPreviouslyInitialized {
				toStart = append(toStart, i+1)
			}
			// Its liveness probe does not hold up the next container, but
			// a failed one restarts the sidecar.
			if c.LivenessProbe != nil && m.livenessManager != nil {
				if r, ok := m.livenessManager.Get(cs.ID); ok && r == proberesults.Failure {
					kill(c, cs, fmt.Sprintf("Init container %s failed liveness probe", c.Name), c.LivenessProbe)
					toStart = append(toStart, i)
					break
				}
			}
			// A resized sidecar, as a regular container.
			if !m.computePodResizeAction(pod, c, cs, changes) {
				toStart = append(toStart, i)
			}

		case kubecontainer.ContainerStateExited:
			if sidecar {
				toStart = append(toStart, i) // a sidecar always comes back
				break
			}
			if isInitContainerFailed(cs) {
				if !restartOnFailure {
					changes.KillPod = true
					changes.InitContainersToStart = nil
					return false
				}
				toStart = append(toStart, i)
				break
			}
			if i == len(inits)-1 {
				podHasInitialized = true
			} else {
				toStart = append(toStart, i+1)
			}

		default: // unknown: kill whatever is left of it and start again
			if !sidecar && !restartOnFailure {
				changes.KillPod = true
				changes.InitContainersToStart = nil
				return false
			}
			kill(c, cs, fmt.Sprintf("Init container is in %q state, try killing it before restart", cs.State), nil)
			toStart = append(toStart, i)
		}
		isPreviouslyInitialized = true
	}
	if !isPreviouslyInitialized {
		toStart = append(toStart, 0) // nothing ran yet: the first one
	}
	for j := len(toStart) - 1; j >= 0; j-- { // the spec's order
		changes.InitContainersToStart = append(changes.InitContainersToStart, toStart[j])
	}
	return podHasInitialized
}

// computePodActions compares the pod's spec with what the runtime runs.
// A running container whose liveness or startup probe failed is killed,
// and started again unless the restart policy is Never, as upstream.
// Sidecars (restartable init containers) keep running beside the regular
// containers and stop with them once those are done. A running regular
// container whose allocated CPU or memory differs from what was actuated
// is resized in place or restarted (computePodResizeAction), and so is
// a running sidecar (computeInitContainerActions).
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
			c := &pod.Spec.Containers[i]
			runOnce := pod.Spec.RestartPolicy == v1.RestartPolicyOnFailure
			if c.RestartPolicy != nil {
				runOnce = *c.RestartPolicy == v1.ContainerRestartPolicyOnFailure
			}
			if runOnce && containerSucceeded(c, podStatus) {
				continue
			}
			toStart = append(toStart, i)
		}
		if len(toStart) == 0 && hasAnyRegularContainerCreated(pod, podStatus) {
			changes.CreateSandbox = false // everything succeeded already
			return changes
		}
		if len(pod.Spec.InitContainers) != 0 {
			changes.InitContainersToStart = []int{0}
			return changes
		}
		changes.ContainersToStart = toStart
		return changes
	}

	if initialized := m.computeInitContainerActions(pod, podStatus, &changes); changes.KillPod || !initialized {
		return changes // an init container failed for good, or initialization goes on
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
			// A running container's own policy, not its rules (it has no
			// exit code), else the pod's, as upstream.
			restart := pod.Spec.RestartPolicy != v1.RestartPolicyNever
			if c.RestartPolicy != nil {
				restart = *c.RestartPolicy != v1.ContainerRestartPolicyNever
			}
			if restart {
				info.message += ", will be restarted"
				changes.ContainersToStart = append(changes.ContainersToStart, i)
			}
			changes.ContainersToKill[cs.ID] = info
			continue
		}
		if !m.computePodResizeAction(pod, c, cs, &changes) {
			changes.ContainersToStart = append(changes.ContainersToStart, i) // restarted with its new resources
			continue
		}
		keepCount++
	}
	if keepCount == 0 && len(changes.ContainersToStart) == 0 {
		// Nothing runs and nothing should: the regular containers are done,
		// so the sidecars are stopped too, not restarted.
		changes.KillPod = true
		changes.InitContainersToStart = nil
		return changes
	}
	changes.UpdatePodLevelResources = m.computePodLevelResourcesResizeAction(pod)
	return changes
}

// SyncPod brings the runtime to the pod's spec, in upstream's steps:
// compute the actions; kill the pod if its sandbox must go (or nothing
// should run), else stop containers to replace; resize running
// containers in place; make the sandbox; start
// the init containers due (a regular one is waited for by the next syncs,
// a sidecar only until it has started), then the regular containers that
// should run. pullSecrets are
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

	// Resize in place, before starting anything, as upstream (whose step
	// 7 comes after its init containers, which a running pod has no new
	// ones of).
	if len(changes.ContainersToUpdate) > 0 || changes.UpdatePodResources || changes.UpdatePodLevelResources {
		result.AddSyncResult(m.doPodResizeAction(ctx, pod, changes))
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
		// The new sandbox (and its pod cgroup, made before it) has the
		// pod's pod-level resources: they are actuated (upstream:
		// UpdateActuatedPodLevelResources, once the pod cgroup exists).
		m.setActuatedPodLevelResources(pod)
		resp, err := m.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podSandboxID})
		if err != nil || resp.GetStatus() == nil {
			if err == nil {
				err = errors.New("the runtime returned no status")
			}
			m.event(containerRef(pod, nil), v1.EventTypeWarning, events.FailedStatusPodSandBox, "Unable to get pod sandbox status: "+errMessage(err))
			result.Fail(err)
			return result
		}
		// A hostNetwork pod keeps podStatus's IPs: the runtime reports none
		// for it, and the kubelet gave it the node's (as upstream).
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

	var pulls imageVolumePulls // the pod's image volumes, pulled before the first start
	start := func(action kubecontainer.SyncAction, c *v1.Container) error {
		r := kubecontainer.NewSyncResult(action, c.Name)
		result.AddSyncResult(r)
		if inBackOff, msg, err := m.doBackOff(pod, c, podStatus, backOff); inBackOff {
			r.Fail(err, msg)
			return err
		}
		if pulls == nil {
			pulls = m.getImageVolumes(ctx, pod, sandboxConfig, pullSecrets)
		}
		imageVolumes, msg, err := m.toKubeContainerImageVolumes(pulls, c, pod)
		if err != nil {
			r.Fail(err, msg)
			return err
		}
		if msg, err := m.startContainer(ctx, podSandboxID, sandboxConfig, c, pod, podStatus, pullSecrets, podIP, podIPs, imageVolumes); err != nil {
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
	// Init containers in the spec's order: a sidecar that fails to start
	// does not stop the others; a regular one does (the next sync retries).
	for _, i := range changes.InitContainersToStart {
		c := &pod.Spec.InitContainers[i]
		if err := start(kubecontainer.InitContainer, c); err != nil && !kubecontainer.IsRestartableInitContainer(c) {
			return result
		}
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

// AllocationManager is what in-place pod resize needs of the allocation
// manager (mylib/allocation.Manager): the resources last actuated for
// each container, recorded when SyncPod creates one and when it resizes
// one.
type AllocationManager interface {
	GetActuatedResources(podUID types.UID, containerName string) (v1.ResourceRequirements, bool)
	SetActuatedResources(allocatedPod *v1.Pod, container *v1.Container) error
	GetActuatedPodLevelResources(podUID types.UID) (*v1.ResourceRequirements, bool)
	SetActuatedPodLevelResources(allocatedPod *v1.Pod) error
}

// ContainerManager is what in-place pod resize needs of the container
// manager (mylib/cm.ContainerManager): the pods' cgroups, to resize the
// pod's along with its containers, and the CFS quota configuration.
type ContainerManager interface {
	NewPodContainerManager() cm.PodContainerManager
	GetNodeConfig() cm.NodeConfig
}

// SetContainerManager lets in-place resize resize the pod's cgroup too
// (doPodResizeAction). Without one, or with one that makes no pod
// cgroups, only the containers are resized. Call it before the
// Manager's first use.
func (m *Manager) SetContainerManager(containerManager ContainerManager) {
	m.containerManager = containerManager
}

// SetMachineInfo tells the Manager the node's machine (upstream passes
// it to NewKubeGenericRuntimeManager): its memory capacity, the node
// status's, sets each Burstable container's OOM score adjustment. Without
// one, every Burstable container gets 999. Call it before the Manager's
// first use.
func (m *Manager) SetMachineInfo(info *cadvisor.MachineInfo) {
	m.machineInfo = info
}

// memoryCapacity is the node's memory in bytes; 0 without machine info.
func (m *Manager) memoryCapacity() int64 {
	if m.machineInfo == nil {
		return 0
	}
	return m.machineInfo.MemoryCapacity
}

// SetAllocationManager turns in-place pod resize on: SyncPod records what
// it creates containers with in am, and applies a running container's
// allocated CPU and memory when they differ from what am says it applies.
// Call it before the Manager's first use.
func (m *Manager) SetAllocationManager(am AllocationManager) {
	m.allocationManager = am
}

// setActuatedResources records container's resources as actuated, if it
// is one the allocation holds (a regular container or a sidecar). A
// failure is logged, as upstream: the next sync finds the record
// different and applies the resources again.
func (m *Manager) setActuatedResources(pod *v1.Pod, container *v1.Container) {
	if m.allocationManager == nil || !isResizable(pod, container.Name) {
		return
	}
	if err := m.allocationManager.SetActuatedResources(pod, container); err != nil {
		klog.ErrorS(err, "Failed to record the container's actuated resources", "pod", klog.KObj(pod), "container", container.Name)
	}
}

// isResizable: name is a regular container of pod or a sidecar.
func isResizable(pod *v1.Pod, name string) bool {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return true
		}
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.Name == name {
			return kubecontainer.IsRestartableInitContainer(c)
		}
	}
	return false
}

// containerResources are the CPU (millicores) and memory (bytes) of a
// container that a resize compares, as upstream's.
type containerResources struct {
	memoryLimit, memoryRequest int64
	cpuLimit, cpuRequest       int64
}

func containerResourcesOf(r v1.ResourceRequirements) containerResources {
	return containerResources{
		memoryLimit:   r.Limits.Memory().Value(),
		memoryRequest: r.Requests.Memory().Value(),
		cpuLimit:      r.Limits.Cpu().MilliValue(),
		cpuRequest:    r.Requests.Cpu().MilliValue(),
	}
}

// containerResourcesFromRequirements is containerResourcesOf with the
// limits the container gets: a CPU or memory limit it does not set is
// the pod's (podLevel, its spec.resources), as upstream's function of
// the same name. So a pod-level limit that changes resizes the
// containers that take it.
func containerResourcesFromRequirements(podLevel *v1.ResourceRequirements, r v1.ResourceRequirements) containerResources {
	return containerResourcesOf(v1.ResourceRequirements{Requests: r.Requests, Limits: lifecycle.ContainerLimits(podLevel, r)})
}

// actuatedPodLevelResources is what was last actuated of the pod's
// pod-level resources: nil if none is recorded.
func (m *Manager) actuatedPodLevelResources(uid types.UID) *v1.ResourceRequirements {
	r, _ := m.allocationManager.GetActuatedPodLevelResources(uid)
	return r
}

// computePodLevelResourcesResizeAction says whether the pod's allocated
// pod-level CPU and memory differ from those last actuated (upstream's
// function of the same name). A pod with pod-level resources and no
// record of them is compared with zero values, as upstream: one more
// (idempotent) resize of its cgroup.
func (m *Manager) computePodLevelResourcesResizeAction(pod *v1.Pod) bool {
	if m.allocationManager == nil || pod.Spec.Resources == nil {
		return false
	}
	desired := containerResourcesOf(*pod.Spec.Resources)
	var current containerResources
	if r := m.actuatedPodLevelResources(pod.UID); r != nil {
		current = containerResourcesOf(*r)
	}
	return desired != current
}

// containerToUpdateInfo is a running container whose resources
// UpdateContainerResources changes in place.
type containerToUpdateInfo struct {
	// container is the allocated pod's: its resources are the desired ones.
	container       *v1.Container
	kubeContainerID kubecontainer.ContainerID
}

// computePodResizeAction compares a running container's allocated CPU and
// memory (the pod is the allocated one; c is one of its regular
// containers or sidecars) with those last actuated, as upstream's
// function of the same name. Equal: nothing to do. Otherwise, if the
// resizePolicy of a changed resource is RestartContainer, the container
// is killed and computePodResizeAction returns false: it is not kept,
// and the caller starts it again (counted once); else (the default,
// NotRequired) it is queued for UpdateContainerResources. A
// container with no actuated record is compared as upstream does, with
// zero values: one more (idempotent) update. Unlike upstream, one update
// per container applies all its resources at once, not one per resource.
func (m *Manager) computePodResizeAction(pod *v1.Pod, c *v1.Container, cs *kubecontainer.Status, changes *podActions) (keepContainer bool) {
	if m.allocationManager == nil || cs.State != kubecontainer.ContainerStateRunning {
		return true
	}
	if cs.Resources == nil {
		// The runtime reports no resources: not enough to resize on, as upstream.
		return true
	}
	actuated, _ := m.allocationManager.GetActuatedResources(pod.UID, c.Name)
	desired := containerResourcesFromRequirements(pod.Spec.Resources, c.Resources)
	current := containerResourcesFromRequirements(m.actuatedPodLevelResources(pod.UID), actuated)
	if desired == current {
		return true
	}
	// restart: the resize policy of a changed resource says RestartContainer
	// (none set: NotRequired).
	restartFor := func(name v1.ResourceName) bool {
		for _, p := range c.ResizePolicy {
			if p.ResourceName == name {
				return p.RestartPolicy == v1.RestartContainer
			}
		}
		return false
	}
	memoryChanged := desired.memoryLimit != current.memoryLimit || desired.memoryRequest != current.memoryRequest
	cpuChanged := desired.cpuLimit != current.cpuLimit || desired.cpuRequest != current.cpuRequest
	if (memoryChanged && restartFor(v1.ResourceMemory)) || (cpuChanged && restartFor(v1.ResourceCPU)) {
		changes.ContainersToKill[cs.ID] = containerToKillInfo{
			container: &kubecontainer.Container{ID: cs.ID, Name: cs.Name},
			name:      c.Name,
			message:   fmt.Sprintf("Container %s resize requires restart", c.Name),
		}
		changes.UpdatePodResources = true
		return false
	}
	changes.ContainersToUpdate = append(changes.ContainersToUpdate, containerToUpdateInfo{container: c, kubeContainerID: cs.ID})
	return true
}

// doPodResizeAction applies the queued resizes, in upstream's order:
//
//  1. what grows in the pod's cgroup (its memory limit, CPU quota, CPU
//     shares) is set first, so that the containers' new limits fit in it;
//  2. each queued container gets its resources with
//     UpdateContainerResources and the Linux resources it would be
//     created with;
//  3. what shrinks in the pod's cgroup is set last, once the containers
//     are within it.
//
// A pod cgroup's memory limit is never lowered below what the pod uses
// now: the resize fails before anything is changed, as upstream (cgroup
// v1 would refuse it; v2 would OOM-kill). The first failure stops it:
// the resize stays in progress and the next sync tries again, as
// upstream. The containers are recorded as actuated only when every
// step succeeded, so a retry redoes them all (the updates are
// idempotent). Without a pod cgroup (no container manager, or one
// without pod cgroups) only step 2 is done. Unlike upstream, which
// resizes memory (pod, containers, pod) and then CPU the same way with
// one update per container and resource, each container gets one
// update for both, between the pod cgroup's two steps.
func (m *Manager) doPodResizeAction(ctx context.Context, pod *v1.Pod, changes podActions) *kubecontainer.SyncResult {
	r := kubecontainer.NewSyncResult(kubecontainer.ResizePodInPlace, pod.Namespace+"/"+pod.Name)
	fail := func(err error) *kubecontainer.SyncResult {
		r.Fail(kubecontainer.ErrResizePodInPlace, err.Error())
		return r
	}
	podCgroup, err := m.computePodCgroupResize(pod)
	if err != nil {
		return fail(err)
	}
	for _, cfg := range podCgroup.before {
		if err := m.setPodCgroupConfig(pod, cfg); err != nil {
			return fail(err)
		}
	}
	for _, u := range changes.ContainersToUpdate {
		if err := m.updateContainerResources(ctx, pod, u.container, u.kubeContainerID); err != nil {
			return fail(err)
		}
	}
	for _, cfg := range podCgroup.after {
		if err := m.setPodCgroupConfig(pod, cfg); err != nil {
			return fail(err)
		}
	}
	for _, u := range changes.ContainersToUpdate {
		m.setActuatedResources(pod, u.container)
	}
	if changes.UpdatePodLevelResources {
		m.setActuatedPodLevelResources(pod)
	}
	return r
}

// setActuatedPodLevelResources records the pod's pod-level resources as
// actuated. A failure is logged, as setActuatedResources does: the next
// sync resizes again.
func (m *Manager) setActuatedPodLevelResources(pod *v1.Pod) {
	if m.allocationManager == nil {
		return
	}
	if err := m.allocationManager.SetActuatedPodLevelResources(pod); err != nil {
		klog.ErrorS(err, "Failed to record the pod's actuated pod-level resources", "pod", klog.KObj(pod))
	}
}

// podCgroupResize is the pod cgroup's part of a resize: the configs to
// set before the containers are resized (what grows) and after (what
// shrinks), each with one resource's fields only.
type podCgroupResize struct {
	before, after []*cm.ResourceConfig
}

// add queues cfg before the containers if the value grows, after them
// if it shrinks, not at all if it is the same. Limits grow before
// requests and shrink after them (upstream: "requests <= limits"), so
// add the limit first: the shrinks are queued in reverse.
func (p *podCgroupResize) add(current, desired int64, cfg *cm.ResourceConfig) {
	switch {
	case desired > current:
		p.before = append(p.before, cfg)
	case desired < current:
		p.after = append([]*cm.ResourceConfig{cfg}, p.after...)
	}
}

// computePodCgroupResize compares the pod cgroup's CPU and memory now
// (GetPodCgroupConfig) with what the allocated pod should have
// (cm.ResourceConfigForPod, as when the cgroup was made). A limit the
// pod no longer declares is left as it is, as upstream (which cannot
// remove one either). Nothing to do without a pod cgroup.
func (m *Manager) computePodCgroupResize(pod *v1.Pod) (podCgroupResize, error) {
	var plan podCgroupResize
	if m.containerManager == nil {
		return plan, nil
	}
	pcm := m.containerManager.NewPodContainerManager()
	nc := m.containerManager.GetNodeConfig()
	podResources := cm.ResourceConfigForPod(pod, nc.EnforceCPULimits, uint64(nc.CPUCFSQuotaPeriod/time.Microsecond))

	currentMemory, err := pcm.GetPodCgroupConfig(pod, v1.ResourceMemory)
	if err != nil {
		return plan, err
	}
	if currentMemory == nil {
		return plan, nil // no pod cgroup
	}
	if podResources.Memory != nil {
		if *podResources.Memory < *currentMemory.Memory {
			usage, err := pcm.GetPodCgroupMemoryUsage(pod)
			if err != nil {
				return plan, err
			}
			if usage >= uint64(*podResources.Memory) {
				return plan, fmt.Errorf("attempting to set pod memory limit (%d) below current usage (%d)", *podResources.Memory, usage)
			}
		}
		plan.add(*currentMemory.Memory, *podResources.Memory, &cm.ResourceConfig{Memory: podResources.Memory})
	}

	currentCPU, err := pcm.GetPodCgroupConfig(pod, v1.ResourceCPU)
	if err != nil {
		return plan, err
	}
	if podResources.CPUQuota != nil {
		plan.add(quotaOrMax(*currentCPU.CPUQuota), quotaOrMax(*podResources.CPUQuota),
			&cm.ResourceConfig{CPUQuota: podResources.CPUQuota, CPUPeriod: podResources.CPUPeriod})
	}
	plan.add(int64(*currentCPU.CPUShares), int64(*podResources.CPUShares), &cm.ResourceConfig{CPUShares: podResources.CPUShares})
	return plan, nil
}

// quotaOrMax is a CFS quota to compare: -1 (none) is the most there is.
func quotaOrMax(quota int64) int64 {
	if quota < 0 {
		return math.MaxInt64
	}
	return quota
}

// setPodCgroupConfig sets part of the pod cgroup's resources.
func (m *Manager) setPodCgroupConfig(pod *v1.Pod, cfg *cm.ResourceConfig) error {
	if err := m.containerManager.NewPodContainerManager().SetPodCgroupConfig(pod, cfg); err != nil {
		return fmt.Errorf("resize the cgroup of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// updateContainerResources gives a running container its resources in
// place (upstream: in kuberuntime_container.go).
func (m *Manager) updateContainerResources(ctx context.Context, pod *v1.Pod, c *v1.Container, id kubecontainer.ContainerID) error {
	_, err := m.rs.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{
		ContainerId: id.ID,
		Linux:       generateLinuxContainerResources(pod, c, m.memoryCapacity()),
	})
	if err != nil {
		return fmt.Errorf("update resources of container %s of pod %s/%s: %w", c.Name, pod.Namespace, pod.Name, err)
	}
	return nil
}
