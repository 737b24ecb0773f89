package fakeruntime

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

// The runtime's streaming server, as containerd and CRI-O run one: the
// CRI's Exec and Attach do not stream anything themselves; they answer a
// URL with a one-time token, the kubelet proxies the client's upgraded
// connection (SPDY) to it, and the session runs there. It listens on
// 127.0.0.1, on a port picked when the first Exec or Attach needs it, and
// speaks the remote command protocol v4.channel.k8s.io (streams stdin,
// stdout, stderr, resize and error; the exit code in the error stream's
// final Status), on k8s.io/streaming's SPDY connection. Where it departs
// from upstream's k8s.io/cri-streaming server, and why: v4 only (every
// client since Kubernetes 1.4 speaks it; v5 is WebSocket, which the API
// server translates to SPDY for us), no WebSocket; port forwarding
// (portforward.k8s.io over SPDY) is in streaming_portforward.go.

const (
	// StreamTokenTTL is how long a URL from Exec or Attach may wait for
	// its connection (upstream's cache TTL: one minute).
	StreamTokenTTL = time.Minute
	// streamCreationTimeout bounds the wait for the client's streams.
	streamCreationTimeout = remotecommand.DefaultStreamCreationTimeout
)

// StreamOptions are the streams of one session.
type StreamOptions struct {
	Stdin, Stdout, Stderr, TTY bool
}

// pendingStream is an Exec or Attach waiting for its connection.
type pendingStream struct {
	attach      bool
	containerID string
	cmd         []string
	opts        StreamOptions
	expires     time.Time
}

// streamServer is the runtime's streaming server; its zero value starts
// on first use.
type streamServer struct {
	mu      sync.Mutex
	srv     *http.Server
	addr    string
	pending map[string]pendingStream
	closed  bool
}

// add starts the server if needed and returns the URL of a new session.
func (r *Runtime) addStream(p pendingStream) (string, error) {
	s := &r.streams
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", status.Error(codes.Unavailable, "the runtime is shutting down")
	}
	if s.srv == nil {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", status.Errorf(codes.Internal, "streaming server: %v", err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/exec/{token}", r.serveStream)
		mux.HandleFunc("/attach/{token}", r.serveStream)
		mux.HandleFunc("/portforward/{token}", r.servePortForward) // port-forward sessions (streaming_portforward.go)
		s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		s.addr = lis.Addr().String()
		s.pending = map[string]pendingStream{}
		srv := s.srv
		go func() {
			if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.ErrorS(err, "The mock runtime's streaming server stopped")
			}
		}()
	}
	now := r.clock.Now()
	for t, q := range s.pending {
		if now.After(q.expires) {
			delete(s.pending, t)
		}
	}
	if len(s.pending) >= 1000 {
		return "", status.Error(codes.ResourceExhausted, "maximum number of in-flight streaming requests exceeded")
	}
	b := make([]byte, 18)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	token := base64.RawURLEncoding.EncodeToString(b)
	p.expires = now.Add(StreamTokenTTL)
	s.pending[token] = p
	kind := "exec"
	if p.attach {
		kind = "attach"
	}
	return "http://" + s.addr + "/" + kind + "/" + token, nil
}

func (r *Runtime) takeStream(token string) (pendingStream, bool) {
	s := &r.streams
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pending[token]
	delete(s.pending, token)
	if ok && r.clock.Now().After(p.expires) {
		return p, false
	}
	return p, ok
}

// closeStreams stops the streaming server (Close), cutting the sessions.
func (r *Runtime) closeStreams() {
	s := &r.streams
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.srv != nil {
		_ = s.srv.Close() // its sessions' scripts end with their containers
	}
}

// checkStreamRequest is the common part of Exec and Attach.
func (r *Runtime) checkStreamRequest(call, id string, o StreamOptions) error {
	if !o.Stdin && !o.Stdout && !o.Stderr {
		return status.Errorf(codes.InvalidArgument, "%s: one of stdin, stdout, or stderr must be set", call)
	}
	if o.TTY && o.Stderr {
		return status.Errorf(codes.InvalidArgument, "%s: tty and stderr cannot both be true", call)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.findContainer(id)
	if err != nil {
		return err
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING || c.fs == nil {
		return status.Errorf(codes.FailedPrecondition, "%s %s: container is %s, not running", call, short(c.id), c.state)
	}
	return nil
}

// Exec prepares a command in a running container, with the streams the
// request asks for, and answers the URL of the session on the streaming
// server: the command runs when the client connects there.
func (r *Runtime) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if len(req.GetCmd()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "Exec: cmd is empty")
	}
	o := StreamOptions{Stdin: req.GetStdin(), Stdout: req.GetStdout(), Stderr: req.GetStderr(), TTY: req.GetTty()}
	if err := r.checkStreamRequest("Exec", req.GetContainerId(), o); err != nil {
		return nil, err
	}
	u, err := r.addStream(pendingStream{containerID: req.GetContainerId(), cmd: req.GetCmd(), opts: o})
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ExecResponse{Url: u}, nil
}

// Attach answers the URL of a session on the container's main process:
// its output from now on and, when the container has a stdin, its input
// (see streaming_attach.go for when the session ends).
func (r *Runtime) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	o := StreamOptions{Stdin: req.GetStdin(), Stdout: req.GetStdout(), Stderr: req.GetStderr(), TTY: req.GetTty()}
	if err := r.checkStreamRequest("Attach", req.GetContainerId(), o); err != nil {
		return nil, err
	}
	u, err := r.addStream(pendingStream{attach: true, containerID: req.GetContainerId(), opts: o})
	if err != nil {
		return nil, err
	}
	return &runtimeapi.AttachResponse{Url: u}, nil
}

// clientStream is a stream the client opened, with the channel closed
// once the runtime's reply to it is sent (nothing may be written before).
type clientStream struct {
	s         httpstream.Stream
	replySent <-chan struct{}
}

// upgradeSPDY answers the handshake for protocol and upgrades the
// connection to SPDY; each stream the client opens (and check, if set,
// accepts) comes on the channel, until gone is closed. The connection is
// nil when the handshake or the upgrade failed: the client was answered.
func upgradeSPDY(w http.ResponseWriter, req *http.Request, protocol string, check func(http.Header) error, gone <-chan struct{}) (httpstream.Connection, <-chan clientStream) {
	if _, err := httpstream.Handshake(req, w, []string{protocol}); err != nil {
		return nil, nil // Handshake answered 403 with the protocols it supports
	}
	streamCh := make(chan clientStream)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, req, func(s httpstream.Stream, replySent <-chan struct{}) error {
		if check != nil {
			if err := check(s.Headers()); err != nil {
				return err // the stream is refused
			}
		}
		select {
		case streamCh <- clientStream{s, replySent}:
			return nil
		case <-gone:
			return errors.New("the session is over")
		}
	})
	if conn == nil {
		return nil, nil
	}
	conn.SetIdleTimeout(4 * time.Hour) // as upstream's default StreamIdleTimeout
	return conn, streamCh
}

// streams are a session's streams, by their streamType header.
type streams struct {
	errorStream, stdin, stdout, stderr, resize httpstream.Stream
}

// serveStream upgrades the connection of a pending session and runs it.
func (r *Runtime) serveStream(w http.ResponseWriter, req *http.Request) {
	p, ok := r.takeStream(req.PathValue("token"))
	if !ok {
		http.NotFound(w, req)
		return
	}
	gone := make(chan struct{})
	defer close(gone)
	conn, streamCh := upgradeSPDY(w, req, remotecommand.StreamProtocolV4Name, nil, gone)
	if conn == nil {
		return // the handshake or the upgrade failed and was answered
	}
	defer conn.Close()

	want := 1 // the error stream
	for _, b := range []bool{p.opts.Stdin, p.opts.Stdout, p.opts.Stderr, p.opts.TTY} {
		if b {
			want++
		}
	}
	var ss streams
	var replies []<-chan struct{}
	timeout := time.NewTimer(streamCreationTimeout)
	defer timeout.Stop()
	for got := 0; got < want; got++ {
		select {
		case sr := <-streamCh:
			replies = append(replies, sr.replySent)
			switch t := sr.s.Headers().Get("streamType"); t {
			case "error":
				ss.errorStream = sr.s
			case "stdin":
				ss.stdin = sr.s
			case "stdout":
				ss.stdout = sr.s
			case "stderr":
				ss.stderr = sr.s
			case "resize":
				ss.resize = sr.s
			default:
				klog.V(2).InfoS("Unknown stream type in a streaming session", "type", t)
				got--
			}
		case <-timeout.C:
			klog.V(2).InfoS("A streaming session's client did not open its streams in time", "timeout", streamCreationTimeout)
			return
		}
	}
	for _, rs := range replies {
		<-rs
	}
	if ss.resize != nil {
		go func() { _, _ = io.Copy(io.Discard, ss.resize) }() // terminal sizes: the mock's TTY has no size
	}
	var stdin io.Reader
	if ss.stdin != nil {
		stdin = ss.stdin
	}
	stdout, stderr := writerOrDiscard(ss.stdout), writerOrDiscard(ss.stderr)
	// The session ends with its connection: a hijacked request's context
	// is not cancelled when its client goes, so a closed connection (the
	// client killed, its network gone) cancels it here, which ends an
	// exec's run as containerd kills an exec whose stream is gone (and
	// ends an attach, leaving the container be).
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	go func() {
		select {
		case <-conn.CloseChan():
			cancel()
		case <-ctx.Done():
		}
	}()
	var code int
	var err error
	if p.attach {
		err = r.attachStreams(ctx, p.containerID, stdin, stdout, stderr)
	} else {
		code, err = r.execStreams(ctx, p.containerID, p.cmd, stdin, stdout, stderr, p.opts.TTY)
	}
	for _, s := range []httpstream.Stream{ss.stdout, ss.stderr} {
		if s != nil {
			_ = s.Close()
		}
	}
	if ss.errorStream != nil {
		doing := "executing command in"
		if p.attach {
			doing = "attaching to"
		}
		_ = json.NewEncoder(ss.errorStream).Encode(streamExitStatus(code, err, doing))
		_ = ss.errorStream.Close()
	}
}

func writerOrDiscard(s httpstream.Stream) io.Writer {
	if s == nil {
		return io.Discard
	}
	return s
}

// streamExitStatus is the Status written to the error stream at the end, as
// upstream's writeStatus: Success; or Failure with reason NonZeroExitCode
// and the code as the cause ExitCode, which kubectl turns into its own
// exit code; or an internal error, "error executing command in container:
// ERR" (doing: "executing command in", or "attaching to") as upstream's
// streaming server words it, which kubectl prints as "error: Internal
// error occurred: …" and exits 1.
func streamExitStatus(code int, err error, doing string) metav1.Status {
	switch {
	case err != nil:
		err = fmt.Errorf("error %s container: %w", doing, err)
		return metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonInternalError, Message: "Internal error occurred: " + err.Error(),
			Code: http.StatusInternalServerError, Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Message: err.Error()}}}}
	case code != 0:
		return metav1.Status{Status: metav1.StatusFailure, Reason: remotecommand.NonZeroExitCodeReason,
			Message: fmt.Sprintf("command terminated with non-zero exit code: exit status %d", code),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: remotecommand.ExitCodeCauseType, Message: strconv.Itoa(code)}}}}
	}
	return metav1.Status{Status: metav1.StatusSuccess}
}
