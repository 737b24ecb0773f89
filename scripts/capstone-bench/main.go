// Command capstone-bench is the measuring half of scripts/capstone-bench.sh
// and scripts/startup-bench.sh: it creates pods bound to a node and reports
// their startup latency as SIG Scalability defines it (pod created → all
// its containers started, both observed through a watch), the figure
// mylib/kubelet's BenchmarkPodStartup reports for the in-process Kubelet,
// here for node agents running as their own programs.
//
//	capstone-bench startup --node NAME [--pods 100] [--keep]
//	capstone-bench compare --node kwok=NODE[:PID] --node capstone=NODE[:PID] … [--apiserver-pid PID]
//
// startup is one burst on one node. compare runs bursts on several nodes
// in turn and prints a table (compare.go). The admin kubeconfig comes from
// --kubeconfig or $KUBECONFIG. Without --keep the pods are deleted
// afterwards and it waits until they are gone.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"mykubelet/mylib/signals"

	"mykubelet/scripts/testkit/benchkit"
)

const usage = `usage: capstone-bench [--kubeconfig PATH] startup --node NAME [--pods N] [--label VALUE] [--keep] [--timeout 5m]
       capstone-bench [--kubeconfig PATH] compare --node LABEL=NODE[:PID] [--node …] [--pods N] [--rounds N] [--apiserver-pid PID]`

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "capstone-bench:", err)
		os.Exit(1)
	}
}

// burst is one run's settings.
type burst struct {
	node, label string
	pods        int
	keep        bool
	timeout     time.Duration
}

func parse(args []string) (kubeconfig string, b burst, err error) {
	fs := flag.NewFlagSet("capstone-bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "an admin kubeconfig (default: $KUBECONFIG)")
	if err := fs.Parse(args); err != nil {
		return "", b, fmt.Errorf("%w (%s)", err, usage)
	}
	if fs.NArg() == 0 || fs.Arg(0) != "startup" {
		return "", b, errors.New(usage)
	}
	sub := flag.NewFlagSet("startup", flag.ContinueOnError)
	sub.SetOutput(io.Discard)
	sub.StringVar(&b.node, "node", "", "the node the pods are bound to")
	sub.IntVar(&b.pods, "pods", 100, "how many pods, created at once")
	sub.StringVar(&b.label, "label", "burst", "the pods' label capstone-bench=VALUE and name prefix")
	sub.BoolVar(&b.keep, "keep", false, "leave the pods running")
	sub.DurationVar(&b.timeout, "timeout", 5*time.Minute, "how long to wait for them all")
	if err := sub.Parse(fs.Args()[1:]); err != nil {
		return "", b, fmt.Errorf("startup: %w (%s)", err, usage)
	}
	switch {
	case sub.NArg() > 0:
		return "", b, fmt.Errorf("startup: unexpected argument %q (%s)", sub.Arg(0), usage)
	case b.node == "":
		return "", b, errors.New("startup: --node is required")
	case b.pods < 1:
		return "", b, fmt.Errorf("startup: --pods must be at least 1 (got %d)", b.pods)
	case b.timeout <= 0:
		return "", b, fmt.Errorf("startup: --timeout must be positive (got %s)", b.timeout)
	}
	if errs := validation.IsDNS1123Label(b.label); len(errs) > 0 {
		return "", b, fmt.Errorf("startup: --label %q: %s", b.label, errs[0])
	}
	return kubeconfig, b, nil
}

func run(args []string, out io.Writer) error {
	if kubeconfig, c, isCompare, err := parseCompareCommand(args); isCompare {
		if err != nil {
			return err
		}
		cs, err := adminClient(kubeconfig)
		if err != nil {
			return err
		}
		return c.run(signals.SetupSignalContext(), cs, out)
	}
	kubeconfig, b, err := parse(args)
	if err != nil {
		return err
	}
	cs, err := adminClient(kubeconfig)
	if err != nil {
		return err
	}
	ctx := signals.SetupSignalContext()
	lat, err := b.run(ctx, cs)
	if err != nil {
		return err
	}
	slices.Sort(lat)
	q := func(p float64) int64 { return benchkit.Quantile(lat, p).Milliseconds() }
	fmt.Fprintf(out, "pod startup latency, %d pods on node %s (created -> all containers started, seen through a watch): p50 %d ms, p90 %d ms, p99 %d ms, max %d ms\n",
		len(lat), b.node, q(0.50), q(0.90), q(0.99), lat[len(lat)-1].Milliseconds())
	return nil
}

// parseCompareCommand: whether args name the compare command, and if so
// its settings.
func parseCompareCommand(args []string) (kubeconfig string, c comparison, isCompare bool, err error) {
	fs := flag.NewFlagSet("capstone-bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "")
	if fs.Parse(args) != nil || fs.Arg(0) != "compare" {
		return "", c, false, nil
	}
	c, err = parseCompare(fs.Args()[1:])
	return kubeconfig, c, true, err
}

// adminClient is a client from the admin kubeconfig (--kubeconfig, else
// $KUBECONFIG), rate-limited loosely: a burst's creations go out at once.
func adminClient(kubeconfig string) (kubernetes.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("admin kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	return kubernetes.NewForConfig(cfg)
}

// run creates the pods at once, returns each one's startup latency and,
// unless keep, deletes them and waits until they are gone.
func (b burst) run(ctx context.Context, cs kubernetes.Interface) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	events, err := benchkit.WatchPods(ctx, cs.CoreV1().Pods(metav1.NamespaceDefault), b.selector(), "capstone-bench")
	if err != nil {
		return nil, err
	}
	lat, err := b.start(ctx, cs, events, false)
	if err != nil || b.keep {
		return lat, err
	}
	return lat, b.remove(ctx, cs, events)
}

func (b burst) selector() string { return "capstone-bench=" + b.label }

// start creates the pods at once and returns each one's startup latency
// once every pod has started (and, with untilReady, once every pod is also
// Ready: the node has written all it writes to start a pod).
func (b burst) start(ctx context.Context, cs kubernetes.Interface, events <-chan watch.Event, untilReady bool) ([]time.Duration, error) {
	pods := cs.CoreV1().Pods(metav1.NamespaceDefault)
	var wg sync.WaitGroup
	defer wg.Wait()
	errs := make(chan error, b.pods)
	for i := range b.pods {
		wg.Go(func() {
			grace := int64(1)
			pod := &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%03d", b.label, i), Labels: map[string]string{"capstone-bench": b.label}},
				Spec: v1.PodSpec{NodeName: b.node, TerminationGracePeriodSeconds: &grace, Containers: []v1.Container{{
					Name: "c", Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sh", "-c", "sleep 3600"}}}},
			}
			if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				errs <- fmt.Errorf("create pod %s: %w", pod.Name, err)
			}
		})
	}
	created, done, ready := map[string]time.Time{}, map[string]bool{}, map[string]bool{}
	var lat []time.Duration
	for len(lat) < b.pods || (untilReady && len(ready) < b.pods) {
		select {
		case err := <-errs:
			return nil, err
		case e, ok := <-events:
			if !ok {
				return nil, fmt.Errorf("%d of %d pods started (%d Ready) within %s", len(lat), b.pods, len(ready), b.timeout)
			}
			pod, isPod := e.Object.(*v1.Pod)
			if !isPod {
				continue
			}
			if _, seen := created[pod.Name]; !seen && e.Type == watch.Added {
				created[pod.Name] = time.Now()
			}
			if pod.Status.Phase == v1.PodFailed {
				return nil, fmt.Errorf("pod %s failed: %s %s", pod.Name, pod.Status.Reason, pod.Status.Message)
			}
			if t0, ok := created[pod.Name]; ok && !done[pod.Name] && allStarted(pod) {
				lat = append(lat, time.Since(t0))
				done[pod.Name] = true
			}
			if isReady(pod) {
				ready[pod.Name] = true
			}
		}
	}
	return lat, nil
}

// remove deletes the burst's pods and waits until the API server has
// removed them all (the node has stopped them and said so).
func (b burst) remove(ctx context.Context, cs kubernetes.Interface, events <-chan watch.Event) error {
	if err := cs.CoreV1().Pods(metav1.NamespaceDefault).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: b.selector()}); err != nil {
		return fmt.Errorf("delete the pods: %w", err)
	}
	for gone := 0; gone < b.pods; {
		e, ok := <-events
		if !ok {
			return fmt.Errorf("%d of %d pods gone within %s", gone, b.pods, b.timeout)
		}
		if e.Type == watch.Deleted {
			gone++
		}
	}
	return nil
}

// isReady: the pod's Ready condition is True.
func isReady(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// allStarted: every container of the pod is running.
func allStarted(pod *v1.Pod) bool {
	if len(pod.Status.ContainerStatuses) != len(pod.Spec.Containers) {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return false
		}
	}
	return true
}
