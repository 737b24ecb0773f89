package fakeruntime

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"k8s.io/klog/v2"
)

// ServeEndpoint serves r on endpoint, a CRI endpoint of the form
// unix:///path, as containerd serves its socket. It returns once the socket
// listens (or with the error that kept it from listening); serving goes on in
// a goroutine that wg waits for, until ctx ends. An error while serving is
// logged, not lost.
func ServeEndpoint(ctx context.Context, wg *sync.WaitGroup, r *Runtime, endpoint string) error {
	path, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok {
		return fmt.Errorf("--container-runtime-endpoint %q: the mock runtime serves only unix:// endpoints", endpoint)
	}
	lis, err := ListenUnix(path)
	if err != nil {
		return err
	}
	wg.Go(func() {
		if err := r.Serve(ctx, lis); err != nil {
			klog.ErrorS(err, "The mock runtime stopped serving", "endpoint", endpoint)
		}
	})
	return nil
}
