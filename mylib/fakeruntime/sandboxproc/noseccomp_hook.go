//go:build mykubelet_noseccomp

package sandboxproc

// For the walls' test only (sandboxproc_walls_test.go builds the sandbox
// binary with this tag; no other build has it): the sandbox process
// installs no seccomp filter, so that the test proves each wall behind it
// holds on its own. Set as a variable's initializer, as codeexec_hook.go's.

var _ = func() bool { seccompOff = true; return true }()
