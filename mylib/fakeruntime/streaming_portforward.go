package fakeruntime

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/portforward"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/utils/clock"

	"mykubelet/mylib/fakeruntime/podnet"
)

// Port forwarding, as containerd serves it on its streaming server:
// PortForward answers a one-time URL (/portforward/<token>), the kubelet
// proxies the client's upgraded connection there, and the session speaks
// portforward.k8s.io over SPDY. The client opens two streams per
// forwarded connection, "error" and "data", both with the headers port and
// requestID; once both are there, the runtime connects to that port of the
// sandbox and copies bytes both ways; a failure (nothing listens on the
// port) is written on the error stream as upstream's kubelet writes it: a
// JSON {"closeConnection", "message"} whose message starts "error
// forwarding port <port> to pod <sandbox ID>, uid :".
//
// Where the runtime connects: to the sandbox's own IP (every sandbox shares
// the runtime's one network namespace, so "localhost", where containerd
// connects, would be any sandbox's), from inside the pod network
// (podnet.Network.Dial). Without the pod network (not root) no server
// command listens anywhere (shell_servers.go), so every port is refused,
// with the reason. It never connects to an address a pod spec chooses,
// nor from the host's namespace.
//
// Where it departs from upstream's k8s.io/streaming server, and why: the
// portforward package is not part of the k8s.io/streaming release this
// module builds with (only httpstream), so the stream pairing is written
// here on its spdy package; SPDY only: kubectl's WebSocket port-forward
// ends at the API server, which speaks SPDY to the kubelet (the node does
// not declare ExtendWebSocketsToKubelet), and the kubelet proxies that to
// the runtime unchanged; a copy error after the connection was made is
// logged, not written on the error stream (kubectl closes its whole
// session on any error message).

// portForwardCmd marks a pending session as a port-forward one: its
// containerID is the sandbox's ID. No Exec has it (an argv element cannot
// hold a NUL byte).
const portForwardCmd = "\x00portforward"

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
	u, err := r.addStream(pendingStream{containerID: id, cmd: []string{portForwardCmd}})
	if err != nil {
		return nil, err
	}
	// addStream names every session /exec/ or /attach/; a port-forward
	// one is served at /portforward/ (the token is the same).
	return &runtimeapi.PortForwardResponse{Url: strings.Replace(u, "/exec/", "/portforward/", 1)}, nil
}

// servePortForward serves the connection of a pending port-forward
// session (the route /portforward/{token} of the streaming server).
func (r *Runtime) servePortForward(w http.ResponseWriter, req *http.Request) {
	p, ok := r.takeStream(req.PathValue("token"))
	if !ok || len(p.cmd) != 1 || p.cmd[0] != portForwardCmd {
		http.NotFound(w, req)
		return
	}
	id := p.containerID
	servePortForwardStreams(w, req, id, r.clock.NewTimer, func(ctx context.Context, port int32) (net.Conn, error) {
		return r.dialSandbox(ctx, id, port)
	})
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

// timerFunc makes a timer (the runtime's clock's NewTimer).
type timerFunc func(time.Duration) clock.Timer

// portForwardDialer connects a forwarded stream to its port.
type portForwardDialer func(ctx context.Context, port int32) (net.Conn, error)

// pfPair is one forwarded connection's streams.
type pfPair struct {
	requestID   string
	data, error *clientStream
	done        chan struct{} // closed when both are there
}

// servePortForwardStreams upgrades the connection and forwards each pair
// of streams until the client closes it. pod names the sandbox in error
// messages; dial connects a pair to its port.
func servePortForwardStreams(w http.ResponseWriter, req *http.Request, pod string, newTimer timerFunc, dial portForwardDialer) {
	gone := make(chan struct{})
	defer close(gone)
	conn, streamCh := upgradeSPDY(w, req, portforward.PortForwardV1Name, checkPortForwardHeaders, gone)
	if conn == nil {
		return // the handshake or the upgrade failed and was answered
	}
	defer conn.Close()

	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	var mu sync.Mutex
	pairs := map[string]*pfPair{}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for {
		select {
		case <-conn.CloseChan():
			return
		case s := <-streamCh:
			h := s.s.Headers()
			rid := h.Get(v1.PortForwardRequestIDHeader)
			if rid == "" {
				// A client older than request IDs: its two streams have
				// consecutive odd IDs, error first (as upstream guesses).
				id := int(s.s.Identifier())
				if h.Get(v1.StreamType) == v1.StreamTypeData {
					id -= 2
				}
				rid = strconv.Itoa(id)
			}
			mu.Lock()
			p, ok := pairs[rid]
			if !ok {
				p = &pfPair{requestID: rid, done: make(chan struct{})}
				pairs[rid] = p
				wg.Go(func() { waitForPair(ctx, conn, p, newTimer, &mu, pairs) })
			}
			slot := &p.data
			if h.Get(v1.StreamType) == v1.StreamTypeError {
				slot = &p.error
			}
			if *slot != nil {
				mu.Unlock()
				msg := fmt.Sprintf("error processing stream for request %s: %s stream already assigned", rid, h.Get(v1.StreamType))
				klog.V(2).InfoS("Port-forward stream refused", "message", msg)
				_ = s.s.Reset()
				continue
			}
			*slot = &s
			complete := p.data != nil && p.error != nil
			if complete {
				close(p.done)
			}
			mu.Unlock()
			if complete {
				wg.Go(func() { forwardPair(ctx, pod, p, dial) })
			}
		}
	}
}

// checkPortForwardHeaders refuses a stream without a port in 1..65535 or
// a streamType of error or data (upstream's messages).
func checkPortForwardHeaders(h http.Header) error {
	ps := h.Get(v1.PortHeader)
	if ps == "" {
		return fmt.Errorf("%q header is required", v1.PortHeader)
	}
	port, err := strconv.ParseUint(ps, 10, 16)
	if err != nil {
		return fmt.Errorf("unable to parse %q as a port: %v", ps, err)
	}
	if port < 1 {
		return fmt.Errorf("port %q must be > 0", ps)
	}
	switch t := h.Get(v1.StreamType); t {
	case v1.StreamTypeError, v1.StreamTypeData:
	case "":
		return fmt.Errorf("%q header is required", v1.StreamType)
	default:
		return fmt.Errorf("invalid stream type %q", t)
	}
	return nil
}

// waitForPair forgets the pair once it is complete, or after the stream
// creation timeout, telling the client on the error stream if it has one.
func waitForPair(ctx context.Context, conn httpstream.Connection, p *pfPair, newTimer timerFunc, mu *sync.Mutex, pairs map[string]*pfPair) {
	t := newTimer(streamCreationTimeout)
	defer t.Stop()
	select {
	case <-p.done:
	case <-ctx.Done():
	case <-t.C():
		mu.Lock()
		e := p.error
		mu.Unlock()
		if e != nil {
			<-e.replySent
			fmt.Fprintf(e.s, "(conn=%p) timed out waiting for streams of request %s", conn, p.requestID)
			_ = e.s.Close()
		}
	}
	mu.Lock()
	delete(pairs, p.requestID)
	mu.Unlock()
}

// portForwardErrResponse is what upstream writes on the error stream: the
// message, and whether the client should close the whole session.
type portForwardErrResponse struct {
	CloseConnection bool   `json:"closeConnection,omitempty"`
	Message         string `json:"message,omitempty"`
}

// forwardPair connects the pair's data stream to its port and copies
// until either side is done; a connection that fails is reported on the
// error stream.
func forwardPair(ctx context.Context, pod string, p *pfPair, dial portForwardDialer) {
	<-p.data.replySent
	<-p.error.replySent
	data, errStream := p.data.s, p.error.s
	defer func() { _ = data.Close() }()
	defer func() { _ = errStream.Close() }()
	port, _ := strconv.ParseInt(data.Headers().Get(v1.PortHeader), 10, 32) // checked on arrival
	c, err := dial(ctx, int32(port))
	if err != nil {
		msg := fmt.Errorf("error forwarding port %d to pod %s, uid %v: %w", port, pod, "", err)
		klog.V(2).InfoS("Port-forward failed", "err", msg)
		_ = json.NewEncoder(errStream).Encode(portForwardErrResponse{CloseConnection: true, Message: msg.Error()})
		return
	}
	defer c.Close()
	copyBothWays(ctx, data, c)
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
