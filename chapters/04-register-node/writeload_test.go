package main

import (
	"context"
	"flag"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/nodelease"
	"mykubelet/mylib/nodestatus"
	"mykubelet/scripts/testkit/testcluster"
)

var writeLoadDuration = flag.Duration("writeload.duration", 3*time.Minute, "how long BenchmarkNodeWriteLoad runs the agent")

// requestCounter is an http.RoundTripper that counts requests by kind.
type requestCounter struct {
	next   http.RoundTripper
	mu     sync.Mutex
	counts map[string]int
}

func (c *requestCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	kind := "read"
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		switch p := req.URL.Path; {
		case strings.Contains(p, "/leases/") || strings.HasSuffix(p, "/leases"):
			kind = "lease write"
		case strings.HasSuffix(p, "/status"):
			kind = "node status write"
		case strings.Contains(p, "/nodes"):
			kind = "node write"
		default:
			kind = "other write"
		}
	}
	c.mu.Lock()
	c.counts[kind]++
	c.mu.Unlock()
	return c.next.RoundTrip(req)
}

// BenchmarkNodeWriteLoad runs chapter 04's agent (status loop and lease
// controller, default settings, node credentials) against a real control
// plane for -writeload.duration and reports the requests it made per minute.
// The real kubelet's budget: 6 lease renewals a minute, node status only on
// change or every 5 minutes. Run it with scripts/node-write-load.sh.
func BenchmarkNodeWriteLoad(b *testing.B) {
	c := testcluster.Start(b)
	cfg := c.UserConfig(b, "system:node:bench-node", "system:nodes")
	counter := &requestCounter{counts: map[string]int{}}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter }
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	d := *writeLoadDuration
	const warmUp = time.Minute
	var steadyStart map[string]int
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		kl, err := newAgent(cs, clock.RealClock{}, agentConfig{
			nodeName:       "bench-node",
			stateDir:       b.TempDir(),
			maxPods:        nodestatus.DefaultMaxPods,
			port:           nodestatus.DefaultKubeletPort,
			runtimeVersion: "mock://0.1.0",
			updateFreq:     kubelet.DefaultNodeStatusUpdateFrequency,
			reportFreq:     kubelet.DefaultNodeStatusReportFrequency,
			leaseDuration:  nodelease.DurationSeconds(nodelease.DefaultLeaseDurationSeconds),
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := kl.RegisterWithAPIServer(ctx); err != nil {
			b.Fatal(err)
		}
		kl.SyncNodeStatus(ctx)
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := kl.RunNode(ctx); err != nil {
				b.Error(err)
			}
		})
		// After the first minute, registration and creation are over:
		// what follows is the steady state.
		if d > 2*warmUp {
			select {
			case <-ctx.Done():
			case <-time.After(warmUp):
				counter.mu.Lock()
				steadyStart = map[string]int{}
				for k, v := range counter.counts {
					steadyStart[k] = v
				}
				counter.mu.Unlock()
			}
		}
		wg.Wait()
		cancel()
	}
	b.StopTimer()

	counter.mu.Lock()
	defer counter.mu.Unlock()
	minutes := d.Minutes() * float64(b.N)
	writes := 0
	for kind, n := range counter.counts {
		if kind != "read" {
			writes += n
		}
	}
	b.ReportMetric(float64(writes)/minutes, "writes/min")
	b.ReportMetric(float64(counter.counts["lease write"])/minutes, "lease-writes/min")
	b.ReportMetric(float64(counter.counts["node status write"]+counter.counts["node write"])/minutes, "node-writes/min")
	b.ReportMetric(float64(counter.counts["read"])/minutes, "reads/min")
	if steadyStart != nil && b.N == 1 {
		m := (d - warmUp).Minutes()
		lease := counter.counts["lease write"] - steadyStart["lease write"]
		node := counter.counts["node status write"] + counter.counts["node write"] - steadyStart["node status write"] - steadyStart["node write"]
		b.ReportMetric(float64(lease)/m, "steady-lease-writes/min")
		b.ReportMetric(float64(node)/m, "steady-node-writes/min")
		b.Logf("after the first minute, over %v: %d lease writes, %d node writes", d-warmUp, lease, node)
	}
	b.Logf("over %v: %d writes (%d lease, %d node status, %d node, %d other), %d reads",
		time.Duration(float64(d)*float64(b.N)), writes, counter.counts["lease write"], counter.counts["node status write"],
		counter.counts["node write"], counter.counts["other write"], counter.counts["read"])
}
