package fakeruntime

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/klog/v2"
	utilexec "k8s.io/utils/exec"

	"mykubelet/mylib/linger"
)

// The runtime's streaming server is upstream's (k8s.io/cri-streaming), the
// one containerd serves: the CRI's Exec, Attach and PortForward do not
// stream anything themselves; they answer a URL with a one-time token
// (good for a minute), the kubelet proxies the client's upgraded
// connection (SPDY or WebSocket) to it, and the session runs there. The
// server speaks the protocols; the runtime only says what a session does
// (streamRuntime: Exec runs a command, Attach joins the main process,
// PortForward connects to a port of the sandbox). It listens on 127.0.0.1,
// on a port picked when the first session needs it.

// streamServer is the runtime's streaming server; its zero value starts
// on first use.
type streamServer struct {
	mu     sync.Mutex
	srv    streaming.Server
	http   *http.Server
	closed bool
}

// streaming returns the server, started if need be.
func (r *Runtime) streaming() (streaming.Server, error) {
	s := &r.streams
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, status.Error(codes.Unavailable, "the runtime is shutting down")
	}
	if s.srv != nil {
		return s.srv, nil
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, status.Errorf(codes.Internal, "streaming server: %v", err)
	}
	cfg := streaming.DefaultConfig
	cfg.Addr = lis.Addr().String()
	cfg.BaseURL = &url.URL{Scheme: "http", Host: cfg.Addr}
	srv, err := streaming.NewServer(cfg, streamRuntime{r})
	if err != nil {
		_ = lis.Close()
		return nil, status.Errorf(codes.Internal, "streaming server: %v", err)
	}
	s.srv = srv
	s.http = &http.Server{Handler: endWithConnection(srv), ReadHeaderTimeout: 10 * time.Second}
	go func(h *http.Server) {
		if err := h.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "The mock runtime's streaming server stopped")
		}
	}(s.http)
	return srv, nil
}

// closeStreams stops the streaming server (Close), cutting the sessions.
func (r *Runtime) closeStreams() {
	s := &r.streams
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.http != nil {
		_ = s.http.Close() // its sessions' scripts end with their containers
	}
}

// endWithConnection gives each session a context that ends with its
// client's connection. A hijacked request's own context does not end
// (net/http stops watching the connection it hands over), and the server
// runs a session with that context: a client that went away would leave
// its command running until the container stops (as containerd does,
// unless a TTY's hangup ends it; the mock's busy loop would burn its CPU
// for good). The connection ends when a read from it fails (the client
// closed it) or the server closes it (the client said goodbye, SPDY's
// GOAWAY, and its streams are gone).
func endWithConnection(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithCancel(req.Context())
		defer cancel()
		h.ServeHTTP(watchedWriter{w, cancel}, req.WithContext(ctx))
	})
}

// watchedWriter is a ResponseWriter whose hijacked connection calls gone
// when it ends.
type watchedWriter struct {
	http.ResponseWriter
	gone func()
}

func (w watchedWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := linger.Writer{ResponseWriter: w.ResponseWriter}.Hijack()
	if err != nil {
		return nil, nil, err
	}
	wc := watchedConn{c, w.gone}
	ahead, _ := rw.Reader.Peek(rw.Reader.Buffered()) // read from the connection already
	r := bufio.NewReader(io.MultiReader(bytes.NewReader(bytes.Clone(ahead)), wc))
	return wc, bufio.NewReadWriter(r, rw.Writer), nil
}

type watchedConn struct {
	net.Conn
	gone func()
}

func (c watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.gone()
	}
	return n, err
}

// Close ends the session's connection with its last bytes delivered
// (c.Conn is a linger.Conn: its doc says why).
func (c watchedConn) Close() error {
	c.gone()
	return c.Conn.Close()
}

// checkRunning refuses a session on a container that is not running.
func (r *Runtime) checkRunning(call, id string) error {
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

// Exec prepares a command in a running container and answers the URL of
// its session: the command runs when the client connects there.
func (r *Runtime) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if len(req.GetCmd()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "Exec: cmd is empty")
	}
	if err := r.checkRunning("Exec", req.GetContainerId()); err != nil {
		return nil, err
	}
	srv, err := r.streaming()
	if err != nil {
		return nil, err
	}
	return srv.GetExec(req)
}

// Attach answers the URL of a session on the container's main process:
// its output from now on and, when the container has a stdin, its input
// (see streaming_attach.go for when the session ends).
func (r *Runtime) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if err := r.checkRunning("Attach", req.GetContainerId()); err != nil {
		return nil, err
	}
	srv, err := r.streaming()
	if err != nil {
		return nil, err
	}
	return srv.GetAttach(req)
}

// streamRuntime is what the streaming server asks of the runtime, once a
// session's streams are there. An absent stream is nil.
type streamRuntime struct{ r *Runtime }

func (s streamRuntime) Exec(ctx context.Context, id string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	go drain(resize) // the mock's terminals have no size
	code, err := s.r.execStreams(ctx, id, cmd, in, writerOrDiscard(out), writerOrDiscard(errw), tty)
	if err == nil && code != 0 {
		// The server writes it as kubectl reads it: "command terminated
		// with non-zero exit code: exit status N", and N is kubectl's code.
		err = utilexec.CodeExitError{Err: fmt.Errorf("exit status %d", code), Code: code}
	}
	return err
}

func (s streamRuntime) Attach(ctx context.Context, id string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	go drain(resize)
	return s.r.attachStreams(ctx, id, in, writerOrDiscard(out), writerOrDiscard(errw))
}

func drain(resize <-chan remotecommand.TerminalSize) {
	if resize == nil {
		return
	}
	for range resize {
	}
}

func writerOrDiscard(w io.WriteCloser) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
