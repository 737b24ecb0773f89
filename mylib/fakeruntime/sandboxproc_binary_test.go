package fakeruntime

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sandboxExeIs checks that pod sandbox sb's process runs the binary want
// and answers an exec.
func sandboxExeIs(t *testing.T, r *Runtime, sb string, want os.FileInfo) {
	t.Helper()
	c := createContainer(t, r, sb, "one", "sleep", "3600")
	startContainer(t, r, c)
	got, err := os.Stat(fmt.Sprintf("/proc/%d/exe", sandboxPID(t, r, sb)))
	require.NoError(t, err)
	require.True(t, os.SameFile(want, got), "the sandbox process runs %s", got.Name())
	res := execIn(t, r, c, "sh", "-c", "echo hello")
	require.Equal(t, "hello\n", string(res.Stdout))
}

// TestSandboxProcessStartsFromTheSmallBinary: built from this module's
// source, the sandbox binary (sandboxproc/cmd/sandbox) is what each pod's
// process runs, not the runtime's own binary (here the test binary).
func TestSandboxProcessStartsFromTheSmallBinary(t *testing.T) {
	r := sandboxRuntime(t)
	require.NoError(t, r.sandbox.exeErr)
	want, err := r.sandbox.exe.Stat()
	require.NoError(t, err)
	self, err := os.Stat("/proc/self/exe")
	require.NoError(t, err)
	require.False(t, os.SameFile(want, self), "the go toolchain and the source are here: the small binary was built")
	sandboxExeIs(t, r, runSandbox(t, r, "small", "uid-small", nil), want)
}

// TestSandboxProcessFallsBackToTheRuntimesBinary: where there is no
// source to build the sandbox binary from, the runtime starts its own
// binary again, which becomes the sandbox process before its main runs.
func TestSandboxProcessFallsBackToTheRuntimesBinary(t *testing.T) {
	r := sandboxRuntime(t)
	exe, err := openSandboxBinary(t.TempDir()) // no module there
	require.NoError(t, err)
	t.Cleanup(func() { exe.Close() })
	self, err := os.Stat("/proc/self/exe")
	require.NoError(t, err)
	fi, err := exe.Stat()
	require.NoError(t, err)
	require.True(t, os.SameFile(self, fi), "the runtime's own binary")
	r.sandbox.exe = exe // before its first pod
	sandboxExeIs(t, r, runSandbox(t, r, "self", "uid-self", nil), self)
}

// TestModuleDirWithTrimpath: a runtime built with -trimpath knows its
// source file only as mykubelet/mylib/fakeruntime/…; run from the
// checkout (or a directory of it), it finds the module there, and run
// from another module's directory, none.
func TestModuleDirWithTrimpath(t *testing.T) {
	root := moduleDir()
	require.FileExists(t, filepath.Join(root, "go.mod"))
	trimmed := "mykubelet/mylib/fakeruntime/sandboxproc_binary.go"
	assert.Equal(t, root, moduleDirFrom(trimmed, root))
	assert.Equal(t, root, moduleDirFrom(trimmed, filepath.Join(root, "chapters", "13-mykubelet")))
	other := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(other, "go.mod"), []byte("module example.com/other\n"), 0o644))
	assert.Equal(t, "", moduleDirFrom(trimmed, other))
	assert.Equal(t, "", moduleDirFrom(trimmed, "/"))
	assert.Equal(t, root, moduleDirFrom(filepath.Join(root, "mylib", "fakeruntime", "sandboxproc_binary.go"), other), "an absolute path wins")
}
