package kuberuntime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

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
	ref.FieldPath = containerFieldPath(pod, container.Name) // kuberuntime_ephemeral.go: spec.ephemeralContainers{…} too
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
// and args with $(VAR) expanded, environment, mounts (with the
// termination-message file), working directory, labels, annotations, log
// path <container>/<attempt>.log, resources (memory limit, CPU shares
// and quota) and the pod's namespaces (runtimeutil.NamespacesForPod, as
// upstream's determineEffectiveSecurityContext) with the rest of the
// security context (security_context.go). A container that asks
// runAsNonRoot but would run as root is refused here, as upstream's
// verifyRunAsNonRoot. Unlike upstream there are no devices.
func (m *Manager) generateContainerConfig(ctx context.Context, container *v1.Container, pod *v1.Pod, restartCount int, podIP, imageRef string, podIPs []string, imageVolumes kubecontainer.ImageVolumes) (*runtimeapi.ContainerConfig, error) {
	var uid *int64
	var username string
	if needsImageUser(pod, container) {
		var err error
		if uid, username, err = m.getImageUser(ctx, imageRef); err != nil {
			return nil, err
		}
	}
	if err := verifyRunAsNonRoot(pod, container, uid, username); err != nil {
		return nil, err
	}
	sc, err := m.determineEffectiveSecurityContext(pod, container, uid, username)
	if err != nil {
		return nil, err
	}
	opts, err := m.helper.GenerateRunContainerOptions(ctx, pod, container, podIP, podIPs, imageVolumes)
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
		Linux:       &runtimeapi.LinuxContainerConfig{Resources: generateLinuxContainerResources(pod, container, m.memoryCapacity()), SecurityContext: sc},
	}
	for _, e := range opts.Envs {
		config.Envs = append(config.Envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
	}
	config.Mounts = makeMounts(opts, container)
	if err := m.applyEphemeralTarget(ctx, config, container, pod); err != nil { // kuberuntime_ephemeral.go
		return nil, err
	}
	return config, nil
}

// makeMounts turns the kubelet's mounts into CRI mounts and, when the
// kubelet gave the container a directory (opts.PodContainerDir), adds the
// termination-message file: a new empty file there, mode 0666 so that
// whatever user the container runs as may write it, mounted at
// terminationMessagePath. The runtime manager makes it, not the kubelet,
// as upstream: each start gets its own file, named at random.
func makeMounts(opts *kubecontainer.RunContainerOptions, container *v1.Container) []*runtimeapi.Mount {
	var mounts []*runtimeapi.Mount
	for _, m := range opts.Mounts {
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: m.ContainerPath, HostPath: m.HostPath, Readonly: m.ReadOnly,
			Image: m.Image, ImageSubPath: m.ImageSubPath})
	}
	if opts.PodContainerDir == "" || container.TerminationMessagePath == "" {
		return mounts
	}
	path := filepath.Join(opts.PodContainerDir, fmt.Sprintf("%08x", rand.Uint32()))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
	if err != nil {
		// As upstream: the container runs without it.
		klog.ErrorS(err, "Error on creating termination-log file", "path", path)
		return mounts
	}
	f.Close()
	if err := os.Chmod(path, 0o666); err != nil { // past the umask
		klog.ErrorS(err, "Unable to set termination-log file permissions", "path", path)
	}
	containerPath := container.TerminationMessagePath
	if !filepath.IsAbs(containerPath) {
		containerPath = "/" + containerPath
	}
	return append(mounts, &runtimeapi.Mount{ContainerPath: containerPath, HostPath: path})
}

// startContainer pulls the image, creates the container (with the pod's
// pulled imageVolumes it mounts) and starts it, recording events. Its
// attempt number is one more than the restart count of the container it
// replaces. It returns a message and one of the Err values (or an image
// error).
func (m *Manager) startContainer(ctx context.Context, podSandboxID string, sandboxConfig *runtimeapi.PodSandboxConfig, container *v1.Container,
	pod *v1.Pod, podStatus *kubecontainer.PodStatus, pullSecrets []v1.Secret, podIP string, podIPs []string, imageVolumes kubecontainer.ImageVolumes) (string, error) {
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
	config, err := m.generateContainerConfig(ctx, container, pod, restartCount, podIP, imageRef, podIPs, imageVolumes)
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
	m.setActuatedResources(pod, container) // what it was created with

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
	return m.killContainerInOrder(ctx, pod, c, message, gracePeriodOverride, nil)
}

// killContainerInOrder is killContainer that, given an ordering, waits
// after the preStop hook for the container's turn (a sidecar's: the
// regular containers and the later sidecars stopped) and gives
// StopContainer what is left of the grace period, as upstream.
func (m *Manager) killContainerInOrder(ctx context.Context, pod *v1.Pod, c *kubecontainer.Container, message string, gracePeriodOverride *int64, ordering *terminationOrdering) error {
	if ordering != nil {
		defer ordering.containerTerminated(c.Name) // stopped or not, the next one goes on
	}
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
	if ordering != nil && gracePeriod > 0 {
		// Whole seconds: the time waited is rounded down.
		gracePeriod -= int64(ordering.waitForTurn(c.Name, gracePeriod))
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
// parallel, one result each. With the pod's spec known, its sidecars stop
// last, in reverse order (terminationOrdering).
func (m *Manager) killContainersWithSyncResult(ctx context.Context, pod *v1.Pod, runningPod kubecontainer.Pod, gracePeriodOverride *int64) []*kubecontainer.SyncResult {
	results := make([]*kubecontainer.SyncResult, len(runningPod.Containers))
	var ordering *terminationOrdering
	if pod != nil {
		names := make([]string, 0, len(runningPod.Containers))
		for _, c := range runningPod.Containers {
			names = append(names, c.Name)
		}
		clk := m.clock
		if clk == nil {
			clk = clock.RealClock{}
		}
		ordering = newTerminationOrdering(clk, pod, names)
	}
	var wg sync.WaitGroup
	for i, c := range runningPod.Containers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := kubecontainer.NewSyncResult(kubecontainer.KillContainer, c.Name)
			if err := m.killContainerInOrder(ctx, pod, c, "", gracePeriodOverride, ordering); err != nil {
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

// getTerminationMessage reads the container's termination-message file:
// the host side of its mount at terminationMessagePath (the last such
// mount: the kubelet adds it after the volumes), at most its last
// MaxContainerTerminationMessageLength bytes. checkLogs says the log's
// tail is to be used instead: fallbackToLogs and no file, or an empty one.
func getTerminationMessage(status *runtimeapi.ContainerStatus, terminationMessagePath string, fallbackToLogs bool) (message string, checkLogs bool) {
	if terminationMessagePath == "" {
		return "", fallbackToLogs
	}
	if !filepath.IsAbs(terminationMessagePath) {
		terminationMessagePath = "/" + terminationMessagePath
	}
	mounts := status.GetMounts()
	for i := len(mounts) - 1; i >= 0; i-- {
		if mounts[i].GetContainerPath() != terminationMessagePath {
			continue
		}
		path := mounts[i].GetHostPath()
		data, err := readFileTail(path, kubecontainer.MaxContainerTerminationMessageLength)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return "", fallbackToLogs
			}
			return fmt.Sprintf("Error on reading termination log %s: %v", path, err), false
		}
		return string(data), fallbackToLogs && len(data) == 0
	}
	return "", fallbackToLogs
}

// readFileTail is the last limit bytes of the regular file at path. It
// follows no symlink and opens nothing but a regular file: the file is
// the container's to write, and the kubelet reads it as root.
func readFileTail(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	offset := max(fi.Size()-limit, 0)
	return io.ReadAll(io.NewSectionReader(f, offset, limit))
}

// maxLogTailRead bounds how far back readLastStringFromContainerLogs
// looks for its lines: 80 CRI log lines of at most 16 KiB of text each.
const maxLogTailRead = kubecontainer.MaxContainerTerminationMessageLogLines * (16*1024 + 64)

// readLastStringFromContainerLogs is the text of the last
// MaxContainerTerminationMessageLogLines lines of the container's CRI log
// at path (stdout and stderr alike), at most its last
// MaxContainerTerminationMessageLogLength bytes, as upstream.
func readLastStringFromContainerLogs(path string) string {
	lines, err := tailFileLines(path, kubecontainer.MaxContainerTerminationMessageLogLines, maxLogTailRead)
	if err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	var text []byte
	for _, l := range lines {
		// <RFC3339Nano time> <stdout|stderr> <F|P> <text>; a line that
		// does not parse is skipped, as upstream's log reader does.
		parts := bytes.SplitN(l, []byte{' '}, 4)
		if len(parts) < 3 || len(parts[2]) == 0 {
			continue
		}
		if len(parts) == 4 {
			text = append(text, parts[3]...)
		}
		if parts[2][0] != 'P' { // a full line; a partial one continues on the next
			text = append(text, '\n')
		}
	}
	if n := len(text) - kubecontainer.MaxContainerTerminationMessageLogLength; n > 0 {
		text = text[n:]
	}
	return string(text)
}

// tailFileLines is the last n lines of the file at path (without their
// newlines), reading backwards no further than limit bytes.
func tailFileLines(path string, n int, limit int64) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	const block = 4096
	var data []byte
	off := fi.Size()
	for off > 0 && fi.Size()-off < limit && bytes.Count(data, []byte{'\n'}) <= n {
		step := min(int64(block), off)
		off -= step
		chunk := make([]byte, step, step+int64(len(data)))
		if _, err := f.ReadAt(chunk, off); err != nil && err != io.EOF {
			return nil, err
		}
		data = append(chunk, data...)
	}
	if off > 0 { // the first line read may be the end of a longer one
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	data = bytes.TrimSuffix(data, []byte{'\n'})
	if len(data) == 0 {
		return nil, nil
	}
	lines := bytes.Split(data, []byte{'\n'})
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines, nil
}
