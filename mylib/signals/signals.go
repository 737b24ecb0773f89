// Package signals gives a program one context that ends on Ctrl-C, the way
// k8s.io/sample-controller's pkg/signals does: the first SIGINT or SIGTERM
// cancels the context so the program can shut down cleanly; a second one exits
// at once.
package signals

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

var onlyOnce = make(chan struct{})

// exit is replaced in tests.
var exit = os.Exit

// SetupSignalContext returns a context that is cancelled on the first SIGINT
// or SIGTERM. A second signal ends the process with exit code 1. Call it once.
func SetupSignalContext() context.Context {
	close(onlyOnce) // panics when called twice: a programmer error

	ctx, cancel := context.WithCancel(context.Background())
	c := make(chan os.Signal, 2)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-c
		fmt.Fprintf(os.Stderr, "received %v, shutting down (press Ctrl-C again to exit now)\n", s)
		cancel()
		<-c
		exit(1)
	}()
	return ctx
}
