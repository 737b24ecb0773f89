// Command sandbox (built as mykubelet-sandbox) is a pod's sandbox process of the mock runtime
// (mylib/fakeruntime), which starts it, one per pod, as containerd starts
// a shim: it walls itself in and runs the scripts the runtime sends. It
// links the interpreter only, none of the kubelet's packages.
package main

import (
	"fmt"
	"os"

	"mykubelet/mylib/fakeruntime/sandboxproc"
)

func main() {
	// The package's init has already become the sandbox process when the
	// runtime started this binary as one; anyone else lands here.
	fmt.Fprintf(os.Stderr, "mykubelet-sandbox: started by the mock runtime only (%s is not set)\n", sandboxproc.SandboxEnv)
	os.Exit(2)
}
