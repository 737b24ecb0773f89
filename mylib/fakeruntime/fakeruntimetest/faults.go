package fakeruntimetest

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/fakeruntime"
)

// Faulty serves a fake runtime on a unix socket that a test can break, to
// see what a CRI client does when the runtime goes away or stops answering:
//
//   - Down: every open connection is closed and every new one is closed at
//     once, as when the runtime's process is gone and its socket refuses
//     (each such try is counted: Attempts, WaitForAttempts). Up ends it.
//   - Hang(true): calls are accepted and never answered until Hang(false),
//     or until their caller gives up, as when the runtime is stopped
//     (SIGSTOP) or stuck.
type Faulty struct {
	sock string

	mu       sync.Mutex
	down     bool
	attempts int           // connections refused during the current Down
	tried    chan struct{} // closed and replaced at each refused connection
	release  chan struct{} // non-nil while hanging; closed by Hang(false)
	conns    map[net.Conn]bool
}

// ServeFaulty serves rt on a unix socket until tb ends, healthy at first.
func ServeFaulty(tb testing.TB, rt *fakeruntime.Runtime) *Faulty {
	tb.Helper()
	dir, err := os.MkdirTemp("", "crt")
	if err != nil {
		tb.Fatal(err)
	}
	f := &Faulty{sock: filepath.Join(dir, "rt.sock"), tried: make(chan struct{}), conns: map[net.Conn]bool{}}
	lis, err := fakeruntime.ListenUnix(f.sock)
	if err != nil {
		os.RemoveAll(dir)
		tb.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(f.intercept))
	runtimeapi.RegisterRuntimeServiceServer(srv, rt)
	runtimeapi.RegisterImageServiceServer(srv, rt)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(&faultyListener{Listener: lis, f: f}) }()
	tb.Cleanup(func() {
		f.Hang(false)
		srv.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			tb.Errorf("faulty runtime: Serve: %v", err)
		}
		os.RemoveAll(dir)
	})
	return f
}

// Socket is the path of the runtime's unix socket.
func (f *Faulty) Socket() string { return f.sock }

// Down closes every connection and refuses new ones until Up.
func (f *Faulty) Down() {
	f.mu.Lock()
	f.down, f.attempts = true, 0
	open := make([]net.Conn, 0, len(f.conns))
	for c := range f.conns {
		open = append(open, c)
	}
	f.mu.Unlock()
	for _, c := range open {
		c.Close() // takes f.mu to forget itself
	}
}

// Up serves again on the same socket.
func (f *Faulty) Up() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = false
}

// Attempts is how many connections were refused since Down.
func (f *Faulty) Attempts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts
}

// WaitForAttempts waits until n connections were refused since Down.
func (f *Faulty) WaitForAttempts(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		got, tried := f.attempts, f.tried
		f.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-tried:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Hang makes calls wait (true) or answers them again (false), the waiting
// ones included.
func (f *Faulty) Hang(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case on && f.release == nil:
		f.release = make(chan struct{})
	case !on && f.release != nil:
		close(f.release)
		f.release = nil
	}
}

func (f *Faulty) intercept(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	f.mu.Lock()
	release := f.release
	f.mu.Unlock()
	if release != nil {
		select {
		case <-release:
		case <-ctx.Done(): // the caller gave up (its deadline passed)
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	return handler(ctx, req)
}

// faultyListener refuses connections while the runtime is down and keeps
// track of the open ones so Down can close them.
type faultyListener struct {
	net.Listener
	f *Faulty
}

func (l *faultyListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		f := l.f
		f.mu.Lock()
		if f.down {
			f.attempts++
			close(f.tried)
			f.tried = make(chan struct{})
			f.mu.Unlock()
			c.Close()
			continue
		}
		tc := &trackedConn{Conn: c, f: f}
		f.conns[tc] = true
		f.mu.Unlock()
		return tc, nil
	}
}

type trackedConn struct {
	net.Conn
	f    *Faulty
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.f.mu.Lock()
		delete(c.f.conns, c)
		c.f.mu.Unlock()
	})
	return c.Conn.Close()
}
