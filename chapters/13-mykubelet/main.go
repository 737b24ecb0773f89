// mykubelet: one program, started the way the real kubelet is, that joins a cluster with a bootstrap token and runs its pods.
//
// The order is upstream's cmd/kubelet, and the names: main calls
// app.NewKubeletCommand (mylib/app/command.go: the flags and the --config
// file, flags over file), whose Execute calls run (mylib/app/server.go:
// the client certificate from the bootstrap kubeconfig when the node's is
// missing or expired, certificate rotation, the serving certificate; then
// the clients and the container runtime), which calls RunKubelet (the pod
// sources, the events, kubelet.NewMainKubelet, the kubelet API), which
// calls Kubelet.Run: registration, Lease, status, PLEG, pod workers, sync
// loop. Everything chapters 04 to 12 and 15 to 18 built, in one process.
package main

import (
	"os"

	"mykubelet/mylib/app"
)

func main() {
	os.Exit(app.NewKubeletCommand("13-mykubelet").Execute(os.Args[1:]))
}
