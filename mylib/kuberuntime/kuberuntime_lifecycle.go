package kuberuntime

// Container lifecycle hooks: postStart after StartContainer, preStop
// before StopContainer, as upstream's kuberuntime_container.go
// (startContainer step 4, killContainer, executePreStopHook) with the
// handler runner of pkg/kubelet/lifecycle/handlers.go.
//
// Where it departs from upstream, and why (one line each):
//   - exec and sleep handlers only; an httpGet hook fails with
//     errHTTPHookUnsupported (upstream's handler runner has an HTTP client
//     for it, the kubelet's insecureContainerLifecycleHTTPClient; ours has none);
//   - the preStop wait and the time it took are read from the Manager's
//     clock, not time.After and metav1.Now, so tests drive them;
//   - a container whose pod object is gone gets no preStop hook: the
//     handler is not written to (nor restored from) the container's
//     annotations;
//   - no termination ordering of sidecars (waitForTurn).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/events"
)

// ErrPostStartHook is the sync error of a container whose postStart hook
// failed; its text is the reason the container then waits with, as upstream.
var ErrPostStartHook = errors.New("PostStartHookError")

// errHTTPHookUnsupported is the error of an httpGet hook.
var errHTTPHookUnsupported = errors.New("httpGet lifecycle hooks are not supported by this kubelet")

// reasonFailedPostStartHook is the message of the Killing event of a
// container killed because its postStart hook failed (upstream passes the
// same word as the kill message).
const reasonFailedPostStartHook = "FailedPostStartHook"

// runLifecycleHandler runs one hook in the container and returns, on
// failure, upstream's message for people and the error.
func (m *Manager) runLifecycleHandler(ctx context.Context, containerID kubecontainer.ContainerID, pod *v1.Pod, container *v1.Container, handler *v1.LifecycleHandler) (string, error) {
	switch {
	case handler.Exec != nil:
		output, err := m.runInContainer(ctx, containerID, handler.Exec.Command)
		if err != nil {
			return fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q",
				handler.Exec.Command, container.Name, podDesc(pod), err, string(output)), err
		}
		return "", nil
	case handler.Sleep != nil:
		select {
		case <-ctx.Done():
			return "", errors.New("container terminated before sleep hook finished")
		case <-m.clock.After(time.Duration(handler.Sleep.Seconds) * time.Second):
			return "", nil
		}
	case handler.HTTPGet != nil:
		return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v",
			handler.HTTPGet.Path, container.Name, podDesc(pod), errHTTPHookUnsupported), errHTTPHookUnsupported
	}
	err := fmt.Errorf("invalid handler: %v", handler)
	return "Cannot run handler: " + err.Error(), err
}

// runInContainer runs cmd in the container with CRI ExecSync (no timeout,
// as upstream's hooks) and returns stdout then stderr; a non-zero exit
// code is an error.
func (m *Manager) runInContainer(ctx context.Context, id kubecontainer.ContainerID, cmd []string) ([]byte, error) {
	resp, err := m.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id.ID, Cmd: cmd})
	if err != nil {
		return nil, errors.New(errMessage(err))
	}
	output := append(append([]byte{}, resp.Stdout...), resp.Stderr...)
	if resp.ExitCode != 0 {
		return output, fmt.Errorf("command '%s' exited with %d: %s", strings.Join(cmd, " "), resp.ExitCode, resp.Stderr)
	}
	return output, nil
}

// runPostStartHook runs the container's postStart hook, if any, right
// after it started. If the hook fails the container is killed, with a
// FailedPostStartHook event (whose message leaves out the hook's output,
// which may hold secrets, as upstream), and ErrPostStartHook is returned.
func (m *Manager) runPostStartHook(ctx context.Context, pod *v1.Pod, container *v1.Container, containerID string) (string, error) {
	if container.Lifecycle == nil || container.Lifecycle.PostStart == nil {
		return "", nil
	}
	id := kubecontainer.ContainerID{Type: m.runtimeName, ID: containerID}
	msg, err := m.runLifecycleHandler(ctx, id, pod, container, container.Lifecycle.PostStart)
	if err == nil {
		return "", nil
	}
	klog.ErrorS(err, "Failed to execute PostStartHook", "pod", klog.KObj(pod), "containerName", container.Name, "containerID", containerID)
	m.event(containerRef(pod, container), v1.EventTypeWarning, events.FailedPostStartHook, "PostStartHook failed")
	if kerr := m.killContainer(ctx, pod, &kubecontainer.Container{ID: id, Name: container.Name}, reasonFailedPostStartHook, nil); kerr != nil {
		klog.ErrorS(kerr, "Failed to kill container", "pod", klog.KObj(pod), "containerName", container.Name)
	}
	return msg, ErrPostStartHook
}

// executePreStopHook runs the container's preStop hook and waits for it at
// most gracePeriod seconds; it returns the whole seconds it waited, which
// killContainer takes off the grace period left for StopContainer. A hook
// still running when the grace period ends is left to finish on its own,
// as upstream.
func (m *Manager) executePreStopHook(ctx context.Context, pod *v1.Pod, containerID kubecontainer.ContainerID, container *v1.Container, gracePeriod int64) int64 {
	klog.V(3).InfoS("Running preStop hook", "pod", klog.KObj(pod), "containerName", container.Name, "containerID", containerID)
	start := m.clock.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := m.runLifecycleHandler(ctx, containerID, pod, container, container.Lifecycle.PreStop); err != nil {
			klog.ErrorS(err, "PreStop hook failed", "pod", klog.KObj(pod), "containerName", container.Name, "containerID", containerID)
			// The message leaves out the hook's output, which may hold secrets.
			m.event(containerRef(pod, container), v1.EventTypeWarning, events.FailedPreStopHook, "PreStopHook failed")
		}
	}()
	select {
	case <-m.clock.After(time.Duration(gracePeriod) * time.Second):
		klog.V(2).InfoS("PreStop hook not completed in grace period", "pod", klog.KObj(pod), "containerName", container.Name, "gracePeriod", gracePeriod)
	case <-done:
	}
	return int64(m.clock.Since(start).Seconds())
}

// podDesc is a pod as upstream's format.Pod writes it: name_namespace(uid).
func podDesc(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}
