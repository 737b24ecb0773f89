package kuberuntime

// Container lifecycle hooks: postStart after StartContainer, preStop
// before StopContainer, as upstream's kuberuntime_container.go
// (startContainer step 4, killContainer, executePreStopHook) with the
// handler runner of pkg/kubelet/lifecycle/handlers.go.
//
// An httpGet hook sends its GET to the hook's host, or the pod's IP, with
// the client SetLifecycleHTTPDial gives (the probes' guarded dial): any
// answer, even a 500, is success, only a request that fails is not, as
// upstream's runHTTPHandler.
//
// Where it departs from upstream, and why (one line each):
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
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/events"
	"mykubelet/mylib/prober"
)

// ErrPostStartHook is the sync error of a container whose postStart hook
// failed; its text is the reason the container then waits with, as upstream.
var ErrPostStartHook = errors.New("PostStartHookError")

// lifecycleUserAgent is the User-Agent of an httpGet hook's request,
// upstream's "kube-lifecycle/<major>.<minor>".
const lifecycleUserAgent = "kube-lifecycle/1.37"

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
		if err := m.runHTTPHandler(ctx, pod, container, handler.HTTPGet); err != nil {
			return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v",
				handler.HTTPGet.Path, container.Name, podDesc(pod), err), err
		}
		return "", nil
	}
	err := fmt.Errorf("invalid handler: %v", handler)
	return "Cannot run handler: " + err.Error(), err
}

// runHTTPHandler sends an httpGet hook's request: to its host, else to
// the pod's first IP as the runtime reports it. An https hook answered in
// plain HTTP is sent again over http, with a LifecycleHTTPFallback
// event, as upstream.
func (m *Manager) runHTTPHandler(ctx context.Context, pod *v1.Pod, container *v1.Container, g *v1.HTTPGetAction) error {
	host := g.Host
	if host == "" {
		rp, err := m.GetPod(ctx, pod.UID)
		if err != nil {
			return fmt.Errorf("unable to get pod, event handlers may be invalid: %w", err)
		}
		st, err := m.GetPodStatus(ctx, rp)
		if err != nil {
			return fmt.Errorf("unable to get pod status, event handlers may be invalid: %w", err)
		}
		if len(st.IPs) == 0 {
			return fmt.Errorf("failed to find networking container: the pod has no IP")
		}
		host = st.IPs[0]
	}
	port, err := prober.ResolvePort(g.Port, container)
	if err != nil {
		return err
	}
	req, err := prober.NewHTTPRequest(ctx, g, host, port)
	if err != nil {
		return err
	}
	if !hasHeader(g.HTTPHeaders, "User-Agent") {
		req.Header.Set("User-Agent", lifecycleUserAgent)
	}
	client := m.hookHTTP
	if client == nil {
		client = prober.NewHTTPClient(0)
	}
	resp, err := client.Do(req)
	drain(resp)
	var uerr *url.Error
	if err != nil && errors.As(err, &uerr) && strings.Contains(uerr.Err.Error(), "server gave HTTP response to HTTPS client") {
		req = req.Clone(ctx)
		req.URL.Scheme = "http"
		req.Header.Del("Authorization")
		resp, herr := client.Do(req)
		drain(resp)
		if herr == nil {
			m.event(&v1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}, v1.EventTypeWarning, "LifecycleHTTPFallback",
				fmt.Sprintf("request to HTTPS lifecycle hook %s got HTTP response, retry with HTTP succeeded", req.URL.Host))
			err = nil
		}
	}
	return err
}

// SetLifecycleHTTPDial makes httpGet hooks open their connections with
// dial (the probes' guarded dial, prober.GuardedDialer); call it before
// the first SyncPod. Without it they dial any address.
func (m *Manager) SetLifecycleHTTPDial(dial prober.DialFunc) {
	m.hookHTTP = prober.NewHTTPClientWithDial(0, dial)
}

func hasHeader(hs []v1.HTTPHeader, name string) bool {
	for _, h := range hs {
		if strings.EqualFold(h.Name, name) {
			return true
		}
	}
	return false
}

// drain reads and closes a response's body (at most 10 KiB, as upstream).
func drain(resp *http.Response) {
	if resp == nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
	resp.Body.Close()
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
