// Chapter 05: the PLEG finds out what changed in the container runtime by listing it every second.
//
// By default this program serves a mock container runtime (mylib/fakeruntime)
// on a unix socket, speaking the real CRI, and runs the kubelet's Pod
// Lifecycle Event Generator (mylib/pleg) against it through a CRI gRPC
// client (mylib/kuberuntime), exactly as the kubelet talks to containerd.
// It prints each event as it happens. A small HTTP control API on loopback
// lets you kill, stop, remove or exec in containers behind the PLEG's back.
//
// It needs no Kubernetes cluster: --kubeconfig is accepted, like in every
// chapter, and not used.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/options"
	"mykubelet/mylib/pleg"
	"mykubelet/mylib/statedir"
)

// DefaultControlAddress is where the fake runtime's control API listens.
const DefaultControlAddress = "127.0.0.1:10355"

func main() {
	o := options.New("05-pleg")
	endpoint := o.Flags.String("container-runtime-endpoint", "", "the CRI socket, unix:///path (default: unix://<state-dir>/"+statedir.RuntimeSocket+")")
	fake := o.Flags.Bool("fake-runtime", true, "serve the mock CRI runtime on --container-runtime-endpoint in this process; false: connect to a runtime already there (e.g. containerd)")
	seed := o.Flags.Bool("seed-pods", false, "start the mock runtime with two sample pods (default: empty)")
	control := o.Flags.String("control-address", DefaultControlAddress, "host:port of the mock runtime's HTTP control API (empty: none); loopback only, it has no authentication")
	runPLEG := o.Flags.Bool("pleg", true, "run the PLEG; false: only serve the mock runtime, for crictl or other chapters")
	relistPeriod := o.Flags.Duration("relist-period", pleg.RelistPeriod, "time between two relists")

	o.Main(os.Args[1:], func(ctx context.Context) error {
		if *relistPeriod <= 0 {
			return fmt.Errorf("--relist-period must be positive (got %s)", *relistPeriod)
		}
		if !*fake && !*runPLEG {
			return errors.New("--fake-runtime=false and --pleg=false leave nothing to do")
		}
		if *endpoint == "" {
			*endpoint = "unix://" + statedir.Path(o.StateDir, statedir.RuntimeSocket)
		}
		clk := clock.RealClock{}
		// Stop everything this program started, and wait for it, on return.
		ctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()

		// 1. The runtime: our mock, served on a unix socket like containerd.
		if *fake {
			if err := serveFakeRuntime(ctx, &wg, clk, *endpoint, *seed, *control); err != nil {
				return err
			}
		}
		if !*runPLEG {
			fmt.Println("fake runtime: serving until Ctrl-C (no PLEG: --pleg=false)")
			<-ctx.Done()
			fmt.Println("stopped: fake runtime shut down")
			return nil
		}

		// 2. The kubelet's side: a CRI client, a pod cache, and the PLEG.
		runtime, err := kuberuntime.Connect(ctx, *endpoint, clk)
		if err != nil {
			return err
		}
		defer runtime.Close()
		cache := kubecontainer.NewCache()
		events := make(chan *pleg.PodLifecycleEvent, pleg.ChannelCapacity)
		p := pleg.NewGenericPLEG(runtime, events, &pleg.RelistDuration{RelistPeriod: *relistPeriod, RelistThreshold: pleg.RelistThreshold}, cache, clk)
		v := runtime.Version()
		fmt.Printf("PLEG: relisting %s %s at %s every %s (Ctrl-C to stop)\n", v.GetRuntimeName(), v.GetRuntimeVersion(), *endpoint, *relistPeriod)
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

// serveFakeRuntime starts the mock runtime on endpoint, and its control API
// on controlAddr unless empty. Both stop when ctx ends; wg waits for them.
func serveFakeRuntime(ctx context.Context, wg *sync.WaitGroup, clk clock.Clock, endpoint string, seed bool, controlAddr string) error {
	path, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok {
		return fmt.Errorf("--container-runtime-endpoint %q: the mock runtime serves only unix:// endpoints", endpoint)
	}
	rt := fakeruntime.New(clk)
	if seed {
		if err := rt.Seed(ctx); err != nil {
			return err
		}
	}
	lis, err := fakeruntime.ListenUnix(path)
	if err != nil {
		return err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := rt.Serve(ctx, lis); err != nil {
			fmt.Fprintf(os.Stderr, "fake runtime: %v\n", err)
		}
	}()
	fmt.Printf("fake runtime: serving CRI on unix://%s with %d sample pods\n", path, len(rt.Snapshot().Sandboxes))

	if controlAddr == "" {
		return nil
	}
	cl, err := fakeruntime.ListenControl(controlAddr) // loopback only: it has no authentication
	if err != nil {
		return fmt.Errorf("control API: %w", err)
	}
	srv := &http.Server{Handler: fakeruntime.NewControlHandler(rt), ReadHeaderTimeout: 10 * time.Second}
	wg.Add(2)
	go func() { defer wg.Done(); _ = srv.Serve(cl) }() // returns ErrServerClosed after Shutdown
	go func() {
		defer wg.Done()
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx) // best effort: the program is exiting
	}()
	fmt.Printf("fake runtime: control API on http://%s (curl it for help)\n", cl.Addr())
	return nil
}

// namer turns an event's pod UID and container ID into names, from the pod
// cache the PLEG has just updated; it remembers names of things since removed.
type namer struct {
	cache kubecontainer.Cache
	pods  map[types.UID]string
	ids   map[string]string // container or sandbox ID → "container=<name>" or "sandbox"
}

func newNamer(c kubecontainer.Cache) *namer {
	return &namer{cache: c, pods: map[types.UID]string{}, ids: map[string]string{}}
}

func (n *namer) describe(e *pleg.PodLifecycleEvent) string {
	exit := ""
	if st, err := n.cache.Get(e.ID); err == nil && st.Name != "" {
		n.pods[e.ID] = st.Namespace + "/" + st.Name
		for _, s := range st.SandboxStatuses {
			n.ids[s.Id] = "sandbox"
		}
		for _, cs := range st.ContainerStatuses {
			n.ids[cs.ID.ID] = "container=" + cs.Name
			if e.Type == pleg.ContainerDied && cs.ID.ID == e.Data && cs.State == kubecontainer.ContainerStateExited {
				exit = fmt.Sprintf(" exitCode=%d reason=%s", cs.ExitCode, cs.Reason)
			}
		}
	}
	pod := n.pods[e.ID]
	if pod == "" {
		pod = string(e.ID)
	}
	id, _ := e.Data.(string)
	if id == "" {
		return fmt.Sprintf("%s pod=%s", e.Type, pod)
	}
	what := n.ids[id]
	if what == "" {
		what = "container=?"
	}
	if len(id) > 13 {
		id = id[:13] // as crictl prints IDs
	}
	return fmt.Sprintf("%s pod=%s %s id=%s%s", e.Type, pod, what, id, exit)
}
