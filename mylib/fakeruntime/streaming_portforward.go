package fakeruntime

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"mykubelet/mylib/fakeruntime/podnet"
)

// Port forwarding, as containerd serves it on its streaming server:
// PortForward answers a one-time URL (/portforward/<token>), the kubelet
// proxies the client's upgraded connection there, and the session speaks
// portforward.k8s.io. The client opens two streams per forwarded
// connection, "error" and "data"; once both are there, the server asks the
// runtime to connect that port of the sandbox (streamRuntime.PortForward),
// which copies bytes both ways. A failure (nothing listens on the port) is
// written on the error stream: "error forwarding port <port> to pod
// <sandbox ID>, uid : <why>".
//
// Where the runtime connects: to the sandbox's own IP (every sandbox shares
// the runtime's one network namespace, so "localhost", where containerd
// connects, would be any sandbox's), from inside the pod network
// (podnet.Network.Dial). Without the pod network (not root) no server
// command listens anywhere (shell_servers.go), so every port is refused,
// with the reason. It never connects to an address a pod spec chooses,
// nor from the host's namespace.
// A copy error after the connection was made is logged, not returned
// (kubectl ends its whole session on any error message).

// PortForward answers the URL of a port-forward session to a ready
// sandbox, on the streaming server. Which ports is the client's choice,
// made on the connection (the request's Port list is not checked, as in
// containerd).
func (r *Runtime) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	r.mu.Lock()
	s, err := r.findSandbox(req.GetPodSandboxId())
	if err != nil {
		r.mu.Unlock()
		return nil, err
	}
	id, st := s.id, s.state
	r.mu.Unlock()
	if st != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.FailedPrecondition, "PortForward: sandbox container %q is not running", id)
	}
	srv, err := r.streaming()
	if err != nil {
		return nil, err
	}
	return srv.GetPortForward(&runtimeapi.PortForwardRequest{PodSandboxId: id, Port: req.GetPort()}) // the whole ID: a prefix was enough here
}

// PortForward is one forwarded connection of a session: the stream to
// port, inside the pod network, until either side is done.
func (s streamRuntime) PortForward(ctx context.Context, id string, port int32, stream io.ReadWriteCloser) error {
	c, err := s.r.dialSandbox(ctx, id, port)
	if err != nil {
		return err
	}
	defer c.Close()
	copyBothWays(ctx, stream, c)
	return nil
}

// dialSandbox connects to port on the sandbox's IP, inside the pod
// network.
func (r *Runtime) dialSandbox(ctx context.Context, id string, port int32) (net.Conn, error) {
	r.mu.Lock()
	s := r.sandboxes[id]
	ip, ready := "", false
	if s != nil {
		ip, ready = s.ip, s.state == runtimeapi.PodSandboxState_SANDBOX_READY
	}
	network, netErr := r.net, r.netErr
	r.mu.Unlock()
	if !ready {
		return nil, fmt.Errorf("sandbox container %q is not running", id)
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(int(port)))
	if network == nil {
		return nil, fmt.Errorf("failed to connect to %s inside namespace %q: %w", addr, id, netErr)
	}
	c, err := network.Dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("failed to execute portforward in network namespace %q: failed to connect to %s inside namespace %q: %w",
			podnet.NetnsDir+"/"+network.Name(), addr, id, err)
	}
	return c, nil
}

// copyBothWays copies the stream to the connection and back. When the
// client has sent everything, the connection's write side is shut
// (the server sees the end of its input and still answers); the session
// ends when the server has sent everything, or at an error either way.
func copyBothWays(ctx context.Context, stream io.ReadWriter, c net.Conn) {
	toServer := make(chan error, 1)
	fromServer := make(chan error, 1)
	go func() {
		_, err := io.Copy(c, stream)
		if cw, ok := c.(interface{ CloseWrite() error }); ok && err == nil {
			_ = cw.CloseWrite()
		}
		toServer <- err
	}()
	go func() {
		_, err := io.Copy(stream, c)
		fromServer <- err
	}()
	select {
	case err := <-fromServer:
		if err != nil {
			klog.V(2).InfoS("Port-forward: copying from the server", "err", err)
		}
	case err := <-toServer:
		if err != nil {
			klog.V(2).InfoS("Port-forward: copying to the server", "err", err)
			break
		}
		select {
		case err := <-fromServer:
			if err != nil {
				klog.V(2).InfoS("Port-forward: copying from the server", "err", err)
			}
		case <-ctx.Done():
		}
	case <-ctx.Done():
	}
	_ = c.Close() // ends the copy still running, if any
}
