package kuberuntime

import (
	"context"
	"fmt"
	"k8s.io/client-go/util/flowcontrol"
	"os"
	"sync"

	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/events"
)

const (
	// minimumGracePeriodInSeconds is the least time a container gets to
	// stop, as upstream.
	minimumGracePeriodInSeconds = 2
	// defaultTerminationGracePeriod is the API's default, for a pod that
	// skipped defaulting.
	defaultTerminationGracePeriod = 30
)

// containerRef is the object an event about a container is recorded on:
// the pod, with the field path of the container in its spec.
func containerRef(pod *v1.Pod, container *v1.Container) *v1.ObjectReference {
	ref := &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
		UID: pod.UID, ResourceVersion: pod.ResourceVersion}
	if container == nil {
		return ref
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == container.Name {
			ref.FieldPath = fmt.Sprintf("spec.initContainers{%s}", container.Name)
			return ref
		}
	}
	ref.FieldPath = fmt.Sprintf("spec.containers{%s}", container.Name)
	return ref
}

// event records an event if the Manager has a recorder.
func (m *Manager) event(ref *v1.ObjectReference, eventType, reason, message string) {
	if m.recorder != nil && ref != nil {
		m.recorder.Event(ref, eventType, reason, message)
	}
}

// errMessage is the message of a gRPC error, without the "rpc error: code = …" prefix.
func errMessage(err error) string {
	if s, ok := grpcstatus.FromError(err); ok {
		return s.Message()
	}
	return err.Error()
}

// generateContainerConfig builds the container's CRI config: its command
// and args with $(VAR) expanded, environment, working directory, labels,
// annotations, log path <container>/<attempt>.log and resources (memory
// limit, CPU shares and quota). Unlike upstream there are no mounts,
// devices or security context.
func (m *Manager) generateContainerConfig(ctx context.Context, container *v1.Container, pod *v1.Pod, restartCount int, podIP, imageRef string, podIPs []string) (*runtimeapi.ContainerConfig, error) {
	opts, err := m.helper.GenerateRunContainerOptions(ctx, pod, container, podIP, podIPs)
	if err != nil {
		return nil, err
	}
	logDir := BuildContainerLogsDirectory(m.podLogsDirectory, pod.Namespace, pod.Name, pod.UID, container.Name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("create container log directory: %w", err)
	}
	command, args := kubecontainer.ExpandContainerCommandAndArgs(container, opts.Envs)
	config := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: container.Name, Attempt: uint32(restartCount)},
		Image:       &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: container.Image},
		Command:     command,
		Args:        args,
		WorkingDir:  container.WorkingDir,
		Labels:      newContainerLabels(container, pod),
		Annotations: newContainerAnnotations(container, pod, restartCount),
		LogPath:     buildContainerLogsPath(container.Name, restartCount),
		Stdin:       container.Stdin,
		StdinOnce:   container.StdinOnce,
		Tty:         container.TTY,
		Linux:       &runtimeapi.LinuxContainerConfig{Resources: generateLinuxContainerResources(container)},
	}
	for _, e := range opts.Envs {
		config.Envs = append(config.Envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
	}
	return config, nil
}

// startContainer pulls the image, creates the container and starts it,
// recording events. Its attempt number is one more than the restart count
// of the container it replaces. It returns a message and one of the Err
// values (or an image error).
func (m *Manager) startContainer(ctx context.Context, podSandboxID string, sandboxConfig *runtimeapi.PodSandboxConfig, container *v1.Container,
	pod *v1.Pod, podStatus *kubecontainer.PodStatus, pullSecrets []v1.Secret, podIP string, podIPs []string) (string, error) {
	ref := containerRef(pod, container)
	imageRef, msg, err := m.EnsureImageExists(ctx, ref, container, pullSecrets, sandboxConfig)
	if err != nil {
		m.event(ref, v1.EventTypeWarning, events.FailedToCreateContainer, "Error: "+err.Error())
		return msg, err
	}

	restartCount := 0
	if cs := podStatus.FindContainerStatusByName(container.Name); cs != nil {
		restartCount = cs.RestartCount + 1
	}
	config, err := m.generateContainerConfig(ctx, container, pod, restartCount, podIP, imageRef, podIPs)
	if err != nil {
		m.event(ref, v1.EventTypeWarning, events.FailedToCreateContainer, "Error: "+err.Error())
		return err.Error(), kubecontainer.ErrCreateContainerConfig
	}
	created, err := m.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podSandboxID, Config: config, SandboxConfig: sandboxConfig})
	if err != nil {
		m.event(ref, v1.EventTypeWarning, events.FailedToCreateContainer, "Error: "+errMessage(err))
		return errMessage(err), kubecontainer.ErrCreateContainer
	}
	m.event(ref, v1.EventTypeNormal, events.CreatedContainer, "Created container: "+container.Name)

	if _, err := m.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: created.ContainerId}); err != nil {
		m.event(ref, v1.EventTypeWarning, events.FailedToStartContainer, "Error: "+errMessage(err))
		return errMessage(err), kubecontainer.ErrRunContainer
	}
	m.event(ref, v1.EventTypeNormal, events.StartedContainer, "Started container "+container.Name)
	return m.runPostStartHook(ctx, pod, container, created.ContainerId)
}

// killContainer stops one container within the grace period: the
// override if given, else the pod's deletion grace period, else its
// terminationGracePeriodSeconds. As upstream, the preStop hook runs first
// within it and StopContainer gets what is left, but never less than
// minimumGracePeriodInSeconds. pod may be nil for a
// container whose pod the kubelet no longer knows; its annotations then say.
func (m *Manager) killContainer(ctx context.Context, pod *v1.Pod, c *kubecontainer.Container, message string, gracePeriodOverride *int64) error {
	gracePeriod := int64(defaultTerminationGracePeriod)
	var spec *v1.Container
	switch {
	case pod != nil:
		for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
			for i := range list {
				if list[i].Name == c.Name {
					spec = &list[i]
				}
			}
		}
		if pod.DeletionGracePeriodSeconds != nil {
			gracePeriod = *pod.DeletionGracePeriodSeconds
		} else if pod.Spec.TerminationGracePeriodSeconds != nil {
			gracePeriod = *pod.Spec.TerminationGracePeriodSeconds
		}
	default:
		resp, err := m.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.ID.ID})
		if err == nil {
			if g, ok := podTerminationGracePeriodFromAnnotations(resp.GetStatus().GetAnnotations()); ok {
				gracePeriod = g
			}
		}
	}
	if message == "" {
		message = "Stopping container " + c.Name
	}
	if pod != nil {
		ref := containerRef(pod, spec)
		if spec == nil {
			ref.FieldPath = fmt.Sprintf("spec.containers{%s}", c.Name)
		}
		m.event(ref, v1.EventTypeNormal, events.KillingContainer, message)
	}
	if gracePeriodOverride != nil {
		gracePeriod = *gracePeriodOverride
	}
	// The preStop hook runs first, within the grace period, and the time
	// it took is taken off what StopContainer gets.
	if spec != nil && spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil && gracePeriod > 0 {
		gracePeriod -= m.executePreStopHook(ctx, pod, c.ID, spec, gracePeriod)
	}
	if gracePeriod < minimumGracePeriodInSeconds {
		gracePeriod = minimumGracePeriodInSeconds
	}
	klog.V(3).InfoS("Killing container with a grace period", "containerName", c.Name, "containerID", c.ID, "gracePeriod", gracePeriod)
	_, err := m.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.ID.ID, Timeout: gracePeriod})
	if err != nil {
		return fmt.Errorf("stop container %q (%s): %w", c.Name, c.ID.ID, err)
	}
	return nil
}

// killContainersWithSyncResult stops the running pod's containers in
// parallel, one result each.
func (m *Manager) killContainersWithSyncResult(ctx context.Context, pod *v1.Pod, runningPod kubecontainer.Pod, gracePeriodOverride *int64) []*kubecontainer.SyncResult {
	results := make([]*kubecontainer.SyncResult, len(runningPod.Containers))
	var wg sync.WaitGroup
	for i, c := range runningPod.Containers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := kubecontainer.NewSyncResult(kubecontainer.KillContainer, c.Name)
			if err := m.killContainer(ctx, pod, c, "", gracePeriodOverride); err != nil {
				r.Fail(kubecontainer.ErrKillContainer, err.Error())
			}
			results[i] = r
		}()
	}
	wg.Wait()
	return results
}

// doBackOff tells whether a container that exited must wait before it is
// started again (CrashLoopBackOff), counted from when it finished, keyed by
// GetStableKey; see kuberuntime_backoff.go for the figures. In back-off it
// records a BackOff event and returns upstream's message and a
// BackoffError that ends when the back-off does.
func (m *Manager) doBackOff(pod *v1.Pod, container *v1.Container, podStatus *kubecontainer.PodStatus, backOff *flowcontrol.Backoff) (bool, string, error) {
	if backOff == nil {
		return false, "", nil
	}
	var cs *kubecontainer.Status
	for _, s := range podStatus.ContainerStatuses { // newest first: the last one that exited
		if s.Name == container.Name && s.State == kubecontainer.ContainerStateExited {
			cs = s
			break
		}
	}
	if cs == nil {
		return false, "", nil
	}
	key := GetStableKey(pod, container)
	if backOff.IsInBackOffSince(key, cs.FinishedAt) {
		m.event(containerRef(pod, container), v1.EventTypeWarning, events.BackOffStartContainer,
			fmt.Sprintf("Back-off restarting failed container %s in pod %s", container.Name, podDesc(pod)))
		backoff := backOff.Get(key)
		msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", backoff, container.Name, podDesc(pod))
		// The error says when the back-off ends, so the pod worker comes
		// back then (MinBackoffExpiration).
		return true, msg, kubecontainer.NewBackoffError(kubecontainer.ErrCrashLoopBackOff, cs.FinishedAt.Add(backoff))
	}
	backOff.Next(key, cs.FinishedAt)
	return false, "", nil
}
