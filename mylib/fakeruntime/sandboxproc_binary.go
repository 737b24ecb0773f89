package fakeruntime

// The binary the sandbox processes start from: the sandboxproc package's
// own (cmd/sandbox), built once per runtime process with the go
// toolchain from this module's source, which links no package of the
// kubelet; or, where the toolchain or the source is not there, the
// runtime's own binary started again (its sandboxproc init becomes the
// sandbox process before its main runs).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"mykubelet/mylib/fakeruntime/sandboxproc"
)

// sandboxBinaryPackage is the sandbox process's main package.
const sandboxBinaryPackage = "./mylib/fakeruntime/sandboxproc/cmd/sandbox"

// sandboxBuildTimeout bounds the build: with Go's build cache a link of a
// second or two, from nothing some 40 s.
const sandboxBuildTimeout = 20 * time.Second

var sandboxBinaryOnce struct {
	sync.Once
	exe *os.File
	err error
}

// sandboxBinary is the binary every sandbox process of this runtime
// process starts from, opened once: a binary rebuilt (or replaced) since
// is never one.
func sandboxBinary() (*os.File, error) {
	sandboxBinaryOnce.Do(func() {
		sandboxBinaryOnce.exe, sandboxBinaryOnce.err = openSandboxBinary(moduleDir())
	})
	return sandboxBinaryOnce.exe, sandboxBinaryOnce.err
}

// openSandboxBinary builds the sandbox binary from the module at dir and
// opens it, else opens the runtime's own binary, saying why in one line.
func openSandboxBinary(dir string) (*os.File, error) {
	f, err := buildSandboxBinary(dir)
	if err == nil {
		return f, nil
	}
	exe, oerr := openExe("/proc/self/exe")
	if oerr != nil {
		return nil, oerr
	}
	readsAll := "yes"
	if !sandboxproc.LinkedStatically(exe) {
		// Linked with cgo, where Go cannot change the user of all its
		// threads at once while keeping a capability (child.go).
		readsAll = "no: the binary is linked dynamically, with cgo, so a container's root reads only what the modes let the pod's user read (a Secret file of mode 0400 is refused)"
	}
	klog.V(2).InfoS("The mock runtime starts its sandbox processes from its own binary, not from the small one of mylib/fakeruntime/sandboxproc", "reason", err, "rootReadsEveryFileOfItsPod", readsAll)
	return exe, nil
}

// moduleDir is where this file's module was when it was built. Built
// with -trimpath, the binary keeps no such path: then it is the module
// found from the working directory up, as `go run ./chapters/...` from
// the checkout has it ("" if neither is known).
func moduleDir() string {
	_, file, _, _ := runtime.Caller(0)
	wd, _ := os.Getwd()
	return moduleDirFrom(file, wd)
}

// moduleDirFrom is moduleDir from this file's path as the binary has it
// (absolute, or module-relative with -trimpath) and the working directory.
func moduleDirFrom(file, wd string) string {
	if filepath.IsAbs(file) {
		return filepath.Dir(filepath.Dir(filepath.Dir(file))) // <module>/mylib/fakeruntime/this.go
	}
	for dir := wd; dir != "" && filepath.IsAbs(dir); dir = filepath.Dir(dir) {
		if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			if strings.HasPrefix(string(mod), "module mykubelet\n") {
				return dir
			}
			return "" // another module: not this runtime's source
		}
		if dir == filepath.Dir(dir) {
			break
		}
	}
	return ""
}

// buildSandboxBinary builds the sandbox binary of the module at dir into
// a file of its own (never over one a runtime holds open) in the user's
// cache, opens it and removes its name: the open descriptor is the
// binary. Go's build cache makes the build after the first one a link.
func buildSandboxBinary(dir string) (*os.File, error) {
	if dir == "" {
		return nil, errors.New("the runtime's source directory is unknown (built with -trimpath, and not run from the checkout)")
	}
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(sandboxBinaryPackage), "main.go")); err != nil {
		return nil, fmt.Errorf("no source of the sandbox binary: %w", err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		// sudo's secure_path drops Go's directory; the toolchain this
		// binary was built with may still be where it was.
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, serr := os.Stat(goBin); runtime.GOROOT() == "" || serr != nil {
			return nil, fmt.Errorf("no go toolchain: %w", err)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return nil, err
	}
	cache = filepath.Join(cache, "mykubelet", "sandboxproc")
	if err := os.MkdirAll(cache, 0o700); err != nil {
		return nil, err
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails
	out := filepath.Join(cache, "mykubelet-sandbox-"+hex.EncodeToString(b[:]))
	// Never a download, and not long: with no module cache or build cache
	// of its user (a HOME of its own), the runtime's own binary serves.
	ctx, cancel := context.WithTimeout(context.Background(), sandboxBuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", out, sandboxBinaryPackage)
	cmd.Dir = dir
	// -trimpath, and none of the user's GOFLAGS: the same build from any
	// copy of the checkout is the build cache's (the tour builds it first).
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-trimpath", "GOPROXY=off", "GOTOOLCHAIN=local")
	if msg, err := cmd.CombinedOutput(); err != nil {
		os.Remove(out)
		return nil, fmt.Errorf("go build %s: %v: %s", sandboxBinaryPackage, err, msg)
	}
	f, err := openExe(out)
	os.Remove(out) // the descriptor holds it
	return f, err
}
