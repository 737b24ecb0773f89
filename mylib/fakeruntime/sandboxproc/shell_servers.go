package sandboxproc

// Server commands: the images of the Kubernetes documentation's probe
// examples serve something a probe checks. Each is a utility (see
// Utilities) that listens on its sandbox's IP in the pod network
// (Config.PodNetwork; mylib/fakeruntime/podnet) until the container is stopped:
//
//	agnhost liveness      HTTP :8080, /healthz 200 "ok" for the first 10 s after it started, then 500 "error: <seconds>" (as agnhost's)
//	agnhost stress        not a server: the e2e tests' memory hog, growing step by step (agnhostStress, shell_stress.go)
//	goproxy               TCP :8080 (an HTTP proxy in the real image; here it answers 200 to any request)
//	nginx                 HTTP :80, the welcome page
//	etcd                  gRPC on the port of --listen-client-urls (default 2379): the grpc.health.v1 service, SERVING
//
// Unlike the real programs, each binds its sandbox's IP whatever address
// it is given (every sandbox shares the runtime's one namespace).
//
// The control API can make a container's probe targets fail and recover
// (ActionFail, ActionRecover): while failing, an HTTP server answers 500, a
// TCP server refuses connections (it closes its listening socket) and the
// gRPC health service says NOT_SERVING.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	grpchealth "google.golang.org/grpc/health/grpc_health_v1"
	"mvdan.cc/sh/v3/interp"
)

// serverUtilities are the server commands, by name.
var serverUtilities = []string{"agnhost", "goproxy", "nginx", "etcd"}

// FaultSwitch is whether the control API makes a container's servers fail;
// changed is closed at each change.
type FaultSwitch struct {
	mu      sync.Mutex
	on      bool
	changed chan struct{}
	// Notify, if set, hears every set: the sandbox process's servers
	// keep their own switch.
	Notify func(on bool)
}

func (f *FaultSwitch) Set(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Notify != nil {
		f.Notify(on)
	}
	if f.changed == nil {
		f.changed = make(chan struct{})
	}
	if f.on != on {
		f.on = on
		close(f.changed)
		f.changed = make(chan struct{})
	}
}

// state is whether it fails now, and a channel closed at the next change.
func (f *FaultSwitch) state() (bool, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.changed == nil {
		f.changed = make(chan struct{})
	}
	return f.on, f.changed
}

// Listener listens in the pod network from the runtime's own process
// (mylib/fakeruntime/podnet's Network: in the network's namespace).
type Listener interface {
	Listen(addr string) (net.Listener, error)
}

// ContainerNet is what a container's servers need: where to listen, and
// whether to fail.
type ContainerNet struct {
	PodIP  string
	direct bool     // this process is in the pod network: listen without setns (the sandbox process)
	Net    Listener // nil: no pod network
	NetErr error
	Fault  *FaultSwitch
	// Traffic counts the bytes of the connections its servers accept
	// (nil: not counted).
	Traffic *netCounters
}

// listen listens on the pod IP's port; the connections it accepts count
// their bytes in the container's traffic.
func (n *ContainerNet) listen(port int) (net.Listener, error) {
	l, err := n.listenRaw(port)
	if err != nil || n.Traffic == nil {
		return l, err
	}
	return countingListener{Listener: l, c: n.Traffic}, nil
}

func (n *ContainerNet) listenRaw(port int) (net.Listener, error) {
	if n != nil && n.direct {
		return net.Listen("tcp", net.JoinHostPort(n.PodIP, strconv.Itoa(port)))
	}
	if n == nil || n.Net == nil {
		err := ErrNoPodNetwork
		if n != nil && n.NetErr != nil {
			err = n.NetErr
		}
		return nil, err
	}
	return n.Net.Listen(net.JoinHostPort(n.PodIP, strconv.Itoa(port)))
}

// server runs one of serverUtilities; ok is false for any other name.
func (p *proc) server(ctx context.Context, hc interp.HandlerContext, name string, args []string) (err error, ok bool) {
	if p.Net == nil {
		p.Net = &ContainerNet{NetErr: ErrNoPodNetwork, Fault: &FaultSwitch{}}
	}
	switch name {
	case "agnhost":
		if len(args) > 0 && args[0] == "stress" {
			return p.agnhostStress(ctx, hc, args[1:]), true
		}
		if len(args) == 0 || args[0] != "liveness" {
			fmt.Fprintln(hc.Stderr, "agnhost: the mock runtime implements only: agnhost liveness, agnhost stress")
			return interp.NewExitStatus(1), true
		}
		started := p.clock.Now()
		mux := http.NewServeMux()
		mux.HandleFunc("/started", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, p.clock.Since(started).String())
		})
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			if d := p.clock.Since(started); d.Seconds() > 10 {
				w.WriteHeader(http.StatusInternalServerError)
				fmt.Fprintf(w, "error: %v", d.Seconds())
				return
			}
			fmt.Fprint(w, "ok")
		})
		return p.serveHTTP(ctx, hc, "agnhost", 8080, mux, ExitCodeSIGTERM, false), true
	case "goproxy":
		return p.serveHTTP(ctx, hc, "goproxy", 8080, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintln(w, "goproxy")
		}), ExitCodeSIGTERM, true), true
	case "nginx":
		fmt.Fprintln(hc.Stdout, "/docker-entrypoint.sh: Configuration complete; ready for start up")
		return p.serveHTTP(ctx, hc, "nginx", 80, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, "<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome to nginx!</title>\n</head>\n<body>\n<h1>Welcome to nginx!</h1>\n</body>\n</html>\n")
		}), 0, false), true
	case "etcd":
		port := 2379
		for i, a := range args {
			v, found := strings.CutPrefix(a, "--listen-client-urls=")
			if !found && a == "--listen-client-urls" && i+1 < len(args) {
				v, found = args[i+1], true
			}
			if found {
				u, err := url.Parse(strings.Split(v, ",")[0])
				if n, err2 := strconv.Atoi(u.Port()); err == nil && err2 == nil {
					port = n
				}
			}
		}
		return p.serveGRPCHealth(ctx, hc, port), true
	}
	return nil, false
}

// stopped waits until the process is killed (ctx) or gets SIGTERM; it
// returns the utility's exit: termCode on SIGTERM.
func (p *proc) stopped(ctx context.Context, termCode int) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-p.term:
		return exitStatus(termCode)
	}
}

// exitStatus is a utility's exit with code: nil for 0 (the interpreter
// refuses an exit status error of 0).
func exitStatus(code int) error {
	if code == 0 {
		return nil
	}
	return interp.NewExitStatus(uint8(code))
}

// serveHTTP serves h on the pod IP's port until stopped. While the control
// API makes the container fail, every answer is 500 or, with refuse (a TCP
// probe's target), the listening socket is closed: connections are refused.
func (p *proc) serveHTTP(ctx context.Context, hc interp.HandlerContext, name string, port int, h http.Handler, termCode int, refuse bool) error {
	defer p.running.cpu.idle()() // it waits; its requests are served on net/http's goroutines
	fault := p.Net.Fault
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if on, _ := fault.state(); on {
			http.Error(w, "failing: the mock runtime's control API made this container fail", http.StatusInternalServerError)
			return
		}
		h.ServeHTTP(w, r)
	})
	for {
		on, changed := fault.state()
		if !refuse {
			changed = nil // a 500 needs no new socket
		}
		var srv *http.Server
		done := make(chan struct{})
		if on && refuse {
			close(done) // no socket while failing
		} else {
			l, err := p.Net.listen(port)
			if err != nil {
				fmt.Fprintf(hc.Stderr, "%s: cannot listen on port %d: %v\n", name, port, err)
				return p.stopped(ctx, termCode) // runs on, serving nothing: its probes fail
			}
			srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: handler}
			go func() {
				defer close(done)
				_ = srv.Serve(l) // ends with Close
			}()
		}
		var err error
		stop := false
		select {
		case <-changed:
		case <-ctx.Done():
			err, stop = ctx.Err(), true
		case <-p.term:
			err, stop = exitStatus(termCode), true
		}
		if srv != nil {
			srv.Close()
		}
		<-done
		if stop {
			return err
		}
	}
}

// serveGRPCHealth serves the gRPC health service on the pod IP's port
// until stopped: SERVING, or NOT_SERVING while the container is made to fail.
func (p *proc) serveGRPCHealth(ctx context.Context, hc interp.HandlerContext, port int) error {
	defer p.running.cpu.idle()()
	l, err := p.Net.listen(port)
	if err != nil {
		fmt.Fprintf(hc.Stderr, "etcd: cannot listen on port %d: %v\n", port, err)
		return p.stopped(ctx, 0)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	grpchealth.RegisterHealthServer(srv, hs)
	fmt.Fprintf(hc.Stderr, "{\"level\":\"info\",\"msg\":\"serving client traffic insecurely; this is strongly discouraged!\",\"address\":\"%s\"}\n", l.Addr())
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(l) })
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			on, changed := p.Net.Fault.state()
			st := grpchealth.HealthCheckResponse_SERVING
			if on {
				st = grpchealth.HealthCheckResponse_NOT_SERVING
			}
			hs.SetServingStatus("", st)
			select {
			case <-changed:
			case <-stop:
				return
			}
		}
	})
	err = p.stopped(ctx, 0)
	close(stop)
	srv.Stop()
	wg.Wait()
	return err
}
