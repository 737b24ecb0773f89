// pause: the process that holds a pod's namespaces, like upstream's
// pause.c (kubernetes build/pause/linux/pause.c) in Go: it sleeps until
// SIGINT or SIGTERM, and as PID 1 of a pod that shares its PID namespace it
// reaps the zombies its children leave.
//
// Built static (CGO_ENABLED=0) by scripts/tools/images into the offline
// sandbox image; it is this repository's build, not registry.k8s.io's.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (mykubelet, scripts/tools/images/pause)")
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		switch sig {
		case syscall.SIGCHLD:
			reap()
		default:
			fmt.Fprintf(os.Stderr, "Shutting down, got signal: %v\n", sig)
			os.Exit(0)
		}
	}
}

// reap waits for every child that has exited, without blocking.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
