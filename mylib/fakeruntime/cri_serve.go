package fakeruntime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// MaxSocketPath is the longest unix socket path Linux accepts (sun_path is
// 108 bytes with the final NUL).
const MaxSocketPath = 107

// ListenUnix listens on a unix socket at path, creating its directory with
// mode 0700. A socket file left behind by a runtime that died is removed; a
// socket someone still listens on is an error.
func ListenUnix(path string) (net.Listener, error) {
	return listenUnix("runtime socket", path)
}

// listenUnix is ListenUnix; what names the socket in errors.
func listenUnix(what, path string) (*net.UnixListener, error) {
	if len(path) > MaxSocketPath {
		return nil, fmt.Errorf("%s %s is %d bytes long; unix socket paths are limited to %d: use a shorter --state-dir", what, path, len(path), MaxSocketPath)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if fi, err := os.Stat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s %s: the path exists and is not a socket", what, path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s %s: another runtime is already listening there", what, path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("%s %s: remove the stale socket: %w", what, path, err)
		}
	}
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return lis, nil
}

// NewGRPCServer returns a gRPC server with r registered as the CRI runtime
// and image services.
func NewGRPCServer(r *Runtime) *grpc.Server {
	s := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(s, r)
	runtimeapi.RegisterImageServiceServer(s, r)
	return s
}

// Serve serves the CRI on lis until ctx ends, then stops: it lets calls in
// flight finish for up to Config.ShutdownGrace, then cuts them, closes lis
// (which removes a unix socket file) and closes the runtime (Close): the
// containers' scripts end with it. It returns nil after a shutdown asked
// for by ctx.
func (r *Runtime) Serve(ctx context.Context, lis net.Listener) error {
	s := NewGRPCServer(r)
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		r.mu.Lock()
		r.stopContainerEvents() // they would hold GracefulStop up: they never end on their own
		r.mu.Unlock()
		stopped := make(chan struct{})
		go func() { s.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(r.shutdownGrace): // a StopContainer waiting out a long timeout
			s.Stop() // cancels the calls in flight and does not wait for them
		}
		_ = r.Close() // a state directory that cannot be removed is left in the temporary directory
	}()
	err := s.Serve(lis)
	if ctx.Err() != nil {
		<-done
		return nil
	}
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	return err
}
