// Chapter 05: the PLEG finds out what changed in the container runtime by listing it every second.
//
// By default this program serves a mock container runtime (mylib/fakeruntime)
// on a unix socket, speaking the real CRI, and runs the kubelet's Pod
// Lifecycle Event Generator (mylib/pleg) against it through a CRI gRPC
// client (mylib/kuberuntime), exactly as the kubelet talks to containerd.
// It prints each event as it happens. A small HTTP control API, on a unix
// socket only your user can reach, lets you kill, stop, remove or exec in
// containers behind the PLEG's back.
//
// It needs no Kubernetes cluster: --kubeconfig is accepted, like in every
// chapter, and not used.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/utils/clock"

	"mykubelet/mylib/app"
	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/options"
	"mykubelet/mylib/pleg"
)

func main() {
	o := options.New("05-pleg")
	rt := o.Runtime(pleg.RelistPeriod)
	seed := o.Flags.Bool("seed-pods", false, "start the mock runtime with two sample pods (default: empty)")
	var control fakeruntime.ControlFlag
	o.Flags.Var(&control, "control-address", fakeruntime.ControlFlagUsage)
	runPLEG := o.Flags.Bool("pleg", true, "run the PLEG; false: only serve the mock runtime, for crictl or other chapters")

	o.Main(os.Args[1:], func(ctx context.Context) error {
		if !rt.Fake && !*runPLEG {
			return errors.New("--fake-runtime=false and --pleg=false leave nothing to do")
		}
		clk := clock.RealClock{}
		// Stop everything this program started, and wait for it, on return.
		ctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()

		// 1. The runtime: our mock, served on a unix socket like containerd
		// (mylib/app, which every kubelet of the course serves it with), and
		// its control API on a unix socket only this user may use. Pulls
		// take as long as from a real registry, so that a caller's deadline
		// can cut one short. Mounts may come from the pods and host
		// directories of the state directory: the kubelet's root
		// directory when a kubelet shares it (--state-dir), as the
		// capstone does.
		if rt.Fake {
			state, err := filepath.Abs(o.StateDir)
			if err != nil {
				return err
			}
			mock, err := app.ServeMockRuntime(ctx, &wg, rt.Endpoint, app.MockRuntime{Seed: *seed, ControlPath: control.Path(o.StateDir),
				Config: fakeruntime.Config{Clock: clk, PullLatency: fakeruntime.TypicalPullLatency, PullBandwidth: fakeruntime.TypicalPullBandwidth,
					MountRoots: []string{filepath.Join(state, "pods"), filepath.Join(state, "host")}}})
			if err != nil {
				return err
			}
			fmt.Printf("fake runtime: serving CRI on %s with %d sample pods\n", rt.Endpoint, len(mock.Snapshot().Sandboxes))
			if path := control.Path(o.StateDir); path != "" {
				fmt.Printf("fake runtime: control API on unix://%s (curl it for help)\n", path)
			}
		}
		if !*runPLEG {
			fmt.Println("fake runtime: serving until Ctrl-C (no PLEG: --pleg=false)")
			<-ctx.Done()
			fmt.Println("stopped: fake runtime shut down")
			return nil
		}

		// 2. The kubelet's side: a CRI client, a pod cache, and the PLEG.
		runtime, err := kuberuntime.Connect(ctx, rt.Endpoint, clk)
		if err != nil {
			return err
		}
		defer runtime.Close()
		cache := kubecontainer.NewCache()
		events := make(chan *pleg.PodLifecycleEvent, pleg.ChannelCapacity)
		p := pleg.NewGenericPLEG(runtime, events, &pleg.RelistDuration{RelistPeriod: rt.RelistPeriod, RelistThreshold: pleg.RelistThreshold}, cache, clk)
		v := runtime.Version()
		fmt.Printf("PLEG: relisting %s %s at %s every %s (Ctrl-C to stop)\n", v.GetRuntimeName(), v.GetRuntimeVersion(), rt.Endpoint, rt.RelistPeriod)
		plegDone := make(chan struct{})
		go func() { defer close(plegDone); p.Run(ctx) }()

		// 3. What the kubelet's syncLoop would receive: print it.
		names := newNamer(cache)
		for {
			select {
			case <-ctx.Done():
				<-plegDone // its last relist is over before the connection closes
				health := "healthy"
				if ok, err := p.Healthy(); !ok {
					health = "unhealthy: " + err.Error()
				}
				fmt.Printf("stopped: PLEG %s, %d events dropped\n", health, p.DiscardedEvents())
				return nil
			case e := <-events:
				fmt.Println(names.describe(e))
			}
		}
	})
}
