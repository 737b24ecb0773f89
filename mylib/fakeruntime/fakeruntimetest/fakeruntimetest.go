// Package fakeruntimetest serves a fake runtime for tests, the way
// net/http/httptest serves a handler: on a real unix socket, so the code under
// test speaks CRI gRPC exactly as it would to containerd.
package fakeruntimetest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"mykubelet/mylib/fakeruntime"
)

// Serve serves rt on a unix socket until tb ends and returns the socket's
// path. The socket lives in a short temporary directory (unix socket paths
// are limited to 107 bytes). At the end it checks that Serve returned no
// error and removed its socket file.
func Serve(tb testing.TB, rt *fakeruntime.Runtime) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "crt")
	if err != nil {
		tb.Fatal(err)
	}
	sock := filepath.Join(dir, "rt.sock")
	lis, err := fakeruntime.ListenUnix(sock)
	if err != nil {
		os.RemoveAll(dir)
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- rt.Serve(ctx, lis) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			tb.Errorf("fake runtime: Serve: %v", err)
		}
		if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
			tb.Errorf("fake runtime: the socket file %s is still there after shutdown", sock)
		}
		os.RemoveAll(dir)
	})
	return sock
}
