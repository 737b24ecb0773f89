// Chapter 14: a fleet of node agents in one process, to measure why the Lease is the heartbeat.
//
// Every agent is the node half of chapter 04's kubelet with an identity of
// its own (system:node:<name>, a certificate from chapter 03's CSR flow);
// --mode picks today's heartbeat (lease) or the one before v1.14 (status).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"k8s.io/client-go/kubernetes"

	"mykubelet/mylib/fleet"
	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/nodelease"
	"mykubelet/mylib/options"
	"mykubelet/mylib/statedir"
)

func main() {
	o := options.New("14-node-fleet")
	var (
		nodes         = o.Flags.Int("nodes", 100, "how many node agents to run")
		mode          = o.Flags.String("mode", string(fleet.ModeLease), "heartbeat: lease (renewed every 10 s, status on change or every 5 min) or status (the whole status every 10 s, no lease: before v1.14)")
		name          = o.Flags.String("fleet-name", "fleet", "the fleet's name: nodes <name>-0001…, label "+fleet.LabelFleet+"=<name>")
		report        = o.Flags.Duration("report-interval", 10*time.Second, "print the request rates this often once every node is registered (0: never)")
		qps           = o.Flags.Float64("qps", fleet.DefaultQPS, "requests per second for the whole fleet (one shared budget)")
		burst         = o.Flags.Int("burst", fleet.DefaultBurst, "burst of that budget")
		cleanup       = o.Flags.Bool("cleanup", false, "delete the fleet's Nodes, Leases and CSRs with the admin kubeconfig (--kubeconfig or $KUBECONFIG), then exit")
		profiles      = o.Flags.String("profile-address", "", "serve Go's profiles (go tool pprof http://<address>/debug/pprof/heap) on this loopback address, e.g. 127.0.0.1:6060")
		memoryLimit   = o.Flags.String("memory-limit", "", "a soft limit on the program's memory for Go's garbage collector, e.g. 80Mi: less RSS for more CPU (as GOMEMLIMIT)")
		leaseDuration = nodelease.DurationSeconds(nodelease.DefaultLeaseDurationSeconds)
	)
	o.Flags.Var(&leaseDuration, "lease-duration", "each Lease's leaseDurationSeconds; renewed every quarter of it")

	o.Main(os.Args[1:], func(ctx context.Context) error {
		if *cleanup {
			_, cfg, err := o.Clientset(ctx)
			if err != nil {
				return err
			}
			// Two deletes per node and one per CSR: more than client-go's
			// default 5 requests/s allows in reasonable time.
			cfg.QPS, cfg.Burst = float32(*qps), *burst
			admin, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			_, err = fleet.Cleanup(ctx, admin, *name, os.Stdout)
			return err
		}
		if m := fleet.Mode(*mode); m != fleet.ModeLease && m != fleet.ModeStatus {
			return fmt.Errorf("--mode %q: want %s or %s", *mode, fleet.ModeLease, fleet.ModeStatus)
		}
		// The agents use nothing but the bootstrap token; never $KUBECONFIG.
		bootstrapKubeconfig := statedir.Path(o.StateDir, statedir.BootstrapKubeconfig)
		if _, err := os.Stat(bootstrapKubeconfig); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("no bootstrap kubeconfig at %s: run chapter 02 first (go run ./chapters/02-bootstrap-token)", bootstrapKubeconfig)
		}
		if err := fleet.SetMemoryLimit(*memoryLimit); err != nil {
			return fmt.Errorf("--memory-limit: %w", err)
		}
		if *profiles != "" {
			addr, err := fleet.ServeProfiles(ctx, *profiles)
			if err != nil {
				return err
			}
			fmt.Printf("profiles: go tool pprof http://%s/debug/pprof/heap\n", addr)
		}
		counter := fleet.NewCounter()
		cfg := fleet.Config{
			Name: *name, Nodes: *nodes, Mode: fleet.Mode(*mode),
			BootstrapKubeconfig: bootstrapKubeconfig, StateDir: o.StateDir,
			LeaseDurationSeconds: int32(leaseDuration),
			QPS:                  float32(*qps), Burst: *burst,
			Counter: counter, Out: os.Stdout,
		}
		fmt.Printf("fleet %s: %d nodes %s to %s, heartbeat mode %s: %s\n", *name, *nodes,
			fleet.NodeName(*name, 1), fleet.NodeName(*name, *nodes), *mode, heartbeat(cfg.Mode, int32(leaseDuration)))
		f, err := fleet.New(ctx, cfg)
		if err != nil {
			return err
		}
		ids := f.Identities()
		fmt.Printf("identities: %d client certificates requested (one CSR each), %d reused, in %s\n", ids.Requested, ids.Reused, ids.Took.Round(100*time.Millisecond))

		before := runtime.NumGoroutine()
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- f.Run(ctx) }()
		select {
		case <-f.AllRegistered():
			fmt.Printf("registered: %d/%d nodes in %s\n", f.Registered(), *nodes, time.Since(start).Round(100*time.Millisecond))
			reportEvery(ctx, *report, counter)
		case <-ctx.Done():
		}
		if err := <-done; err != nil {
			return err
		}
		fmt.Printf("stopped: %d agents stopped (%d had failed), %d goroutines left behind; the nodes go NotReady after the grace period\n",
			*nodes, f.Failed(), goroutinesLeft(before))
		return nil
	})
}

// heartbeat says what the agents write, and how often.
func heartbeat(m fleet.Mode, leaseDuration int32) string {
	if m == fleet.ModeStatus {
		return fmt.Sprintf("node status patched every %v, no lease", kubelet.DefaultNodeStatusUpdateFrequency)
	}
	return fmt.Sprintf("lease renewed every %v, status written on change or every %v", nodelease.RenewInterval(leaseDuration), kubelet.DefaultNodeStatusReportFrequency)
}

// reportEvery prints the counter's rates for each interval until ctx ends.
func reportEvery(ctx context.Context, every time.Duration, c *fleet.Counter) {
	if every <= 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	last := c.Snapshot()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			now := c.Snapshot()
			fmt.Printf("last %v: %s; goroutines %d\n", every, fleet.FormatRates(fleet.Sub(now, last), every), runtime.NumGoroutine())
			last = now
		}
	}
}

// goroutinesLeft waits up to 5 s for the goroutine count to come back to
// what it was before the agents started, and returns how many are above it.
func goroutinesLeft(before int) int {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); n > before && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(50 * time.Millisecond)
	}
	return max(0, n-before)
}
