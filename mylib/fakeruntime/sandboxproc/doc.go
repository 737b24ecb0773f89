// Package sandboxproc is the mock runtime's interpreter (mvdan.cc/sh with
// the utilities of its images) and the sandbox process's own side: the
// wire messages it reads from the runtime, its walls (child.go) and the
// mounts it pins. The runtime (mylib/fakeruntime) runs the interpreter in
// its own process on a fake clock or without root, and otherwise starts
// one sandbox process per pod from this package's small binary
// (cmd/sandbox, built as mykubelet-sandbox), as containerd starts a shim per pod. So that
// this binary stays small, the package imports no Kubernetes package and
// no other package of this module.
package sandboxproc
