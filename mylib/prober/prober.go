package prober

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/events"
	"mykubelet/mylib/prober/results"
)

// maxProbeRetries is how many times a probe that cannot be run at all (an
// error, not a failure) is tried before its error counts.
const maxProbeRetries = 3

// probeType is the kind of a probe; its String is the word upstream's
// events use ("Readiness probe failed: …").
type probeType int

const (
	liveness probeType = iota
	readiness
	startup
)

func (t probeType) String() string {
	switch t {
	case readiness:
		return "Readiness"
	case liveness:
		return "Liveness"
	case startup:
		return "Startup"
	}
	return "UNKNOWN"
}

// prober runs one probe of a container with the right handler and records
// the Unhealthy and ProbeWarning events.
type prober struct {
	runtime  runtimeapi.RuntimeServiceClient
	recorder record.EventRecorder
	dial     DialFunc // nil: net.Dialer
}

// probe runs the container's probe of type t once: Success (a Warning
// too) or Failure, with an event for anything but a plain success. An
// error means the probe could not be run; the worker then keeps its last
// result.
func (pb *prober) probe(ctx context.Context, t probeType, pod *v1.Pod, status v1.PodStatus, container v1.Container, containerID kubecontainer.ContainerID) (results.Result, error) {
	var p *v1.Probe
	switch t {
	case readiness:
		p = container.ReadinessProbe
	case liveness:
		p = container.LivenessProbe
	case startup:
		p = container.StartupProbe
	}
	if p == nil {
		return results.Success, nil // no probe: as upstream, the container counts as passing
	}
	var (
		result Result
		output string
		err    error
	)
	for range maxProbeRetries {
		if result, output, err = pb.runProbe(ctx, p, status, &container, containerID); err == nil {
			break
		}
	}
	switch {
	case err != nil:
		klog.V(1).ErrorS(err, "Probe errored", "probeType", t, "pod", klog.KObj(pod), "containerName", container.Name)
		pb.event(pod, &container, v1.EventTypeWarning, events.ContainerUnhealthy, fmt.Sprintf("%s probe errored and resulted in %s state: %s", t, result, err))
		return results.Failure, err
	case result == Warning:
		pb.event(pod, &container, v1.EventTypeWarning, events.ContainerProbeWarning, fmt.Sprintf("%s probe warning: %s", t, output))
		return results.Success, nil
	case result != Success:
		klog.V(1).InfoS("Probe failed", "probeType", t, "pod", klog.KObj(pod), "containerName", container.Name, "probeResult", result, "output", output)
		pb.event(pod, &container, v1.EventTypeWarning, events.ContainerUnhealthy, fmt.Sprintf("%s probe failed: %s", t, output))
		return results.Failure, nil
	}
	return results.Success, nil
}

// runProbe picks the handler. Unlike upstream, which fills in the
// defaults the API server already set, a zero timeout here means 1 s.
func (pb *prober) runProbe(ctx context.Context, p *v1.Probe, status v1.PodStatus, c *v1.Container, id kubecontainer.ContainerID) (Result, string, error) {
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = time.Second
	}
	switch {
	case p.Exec != nil:
		if pb.runtime == nil {
			return Unknown, "", fmt.Errorf("no container runtime to exec in")
		}
		return ExecProbe(ctx, pb.runtime, id.ID, p.Exec.Command, timeout)
	case p.HTTPGet != nil:
		port, err := ResolvePort(p.HTTPGet.Port, c)
		if err != nil {
			return Unknown, "", err
		}
		req, err := NewHTTPRequest(ctx, p.HTTPGet, status.PodIP, port)
		if err != nil {
			return Unknown, "", err
		}
		return HTTPProbe(req, newHTTPClient(timeout, pb.dial))
	case p.TCPSocket != nil:
		port, err := ResolvePort(p.TCPSocket.Port, c)
		if err != nil {
			return Unknown, "", err
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = status.PodIP
		}
		return tcpProbe(ctx, host, port, timeout, pb.dial)
	case p.GRPC != nil:
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		return grpcProbe(ctx, status.PodIP, int(p.GRPC.Port), service, timeout, pb.dial)
	}
	return Unknown, "", fmt.Errorf("missing probe handler for container %s", c.Name)
}

// event records an event on the container, as the kubelet refers to one
// (fieldPath spec.containers{name}).
func (pb *prober) event(pod *v1.Pod, c *v1.Container, eventType, reason, message string) {
	if pb.recorder == nil {
		return
	}
	ref := &v1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		APIVersion: "v1", ResourceVersion: pod.ResourceVersion, FieldPath: fmt.Sprintf("spec.containers{%s}", c.Name)}
	pb.recorder.Event(ref, eventType, reason, message)
}
