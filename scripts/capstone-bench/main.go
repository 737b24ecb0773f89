// Command capstone-bench is the measuring half of scripts/capstone-bench.sh:
// it creates pods bound to one node and reports their startup latency as
// SIG Scalability defines it (pod created → all its containers started,
// both observed through a watch), the figure mylib/kubelet's
// BenchmarkPodStartup reports for the in-process Kubelet, here for a node
// agent running as its own program.
//
//	capstone-bench startup --node NAME [--pods 100] [--keep]
//
// The admin kubeconfig comes from --kubeconfig or $KUBECONFIG. Without
// --keep the pods are deleted afterwards and it waits until they are gone.
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
)

const usage = `usage: capstone-bench [--kubeconfig PATH] startup --node NAME [--pods N] [--label VALUE] [--keep] [--timeout 5m]`

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
	kubeconfig, b, err := parse(args)
	if err != nil {
		return err
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("admin kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000 // the creations go out at once
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := signals.SetupSignalContext()
	lat, err := b.run(ctx, cs)
	if err != nil {
		return err
	}
	slices.Sort(lat)
	q := func(p float64) int64 { return lat[int(p*float64(len(lat)-1))].Milliseconds() }
	fmt.Fprintf(out, "pod startup latency, %d pods on node %s (created -> all containers started, seen through a watch): p50 %d ms, p90 %d ms, p99 %d ms, max %d ms\n",
		len(lat), b.node, q(0.50), q(0.90), q(0.99), lat[len(lat)-1].Milliseconds())
	return nil
}

// run creates the pods at once, returns each one's startup latency and,
// unless keep, deletes them and waits until they are gone.
func (b burst) run(ctx context.Context, cs kubernetes.Interface) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	pods := cs.CoreV1().Pods(metav1.NamespaceDefault)
	selector := "capstone-bench=" + b.label
	events, err := watchPods(ctx, cs, selector)
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
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
	created, done := map[string]time.Time{}, map[string]bool{}
	var lat []time.Duration
	for len(lat) < b.pods {
		select {
		case err := <-errs:
			return nil, err
		case e, ok := <-events:
			if !ok {
				return nil, fmt.Errorf("%d of %d pods started within %s", len(lat), b.pods, b.timeout)
			}
			pod, isPod := e.Object.(*v1.Pod)
			if !isPod || done[pod.Name] {
				continue
			}
			if _, seen := created[pod.Name]; !seen && e.Type == watch.Added {
				created[pod.Name] = time.Now()
			}
			if pod.Status.Phase == v1.PodFailed {
				return nil, fmt.Errorf("pod %s failed: %s %s", pod.Name, pod.Status.Reason, pod.Status.Message)
			}
			if t0, ok := created[pod.Name]; ok && allStarted(pod) {
				lat = append(lat, time.Since(t0))
				done[pod.Name] = true
			}
		}
	}
	wg.Wait()
	if b.keep {
		return lat, nil
	}
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: selector}); err != nil {
		return nil, fmt.Errorf("delete the pods: %w", err)
	}
	for gone := 0; gone < b.pods; {
		e, ok := <-events
		if !ok {
			return nil, fmt.Errorf("%d of %d pods gone within %s", gone, b.pods, b.timeout)
		}
		if e.Type == watch.Deleted {
			gone++
		}
	}
	return lat, nil
}

// watchPods watches the pods with the selector until ctx ends; when the API
// server ends a watch (its time-out, or an error event), it watches again
// from the last resource version seen. The channel closes when ctx ends.
func watchPods(ctx context.Context, cs kubernetes.Interface, selector string) (<-chan watch.Event, error) {
	pods := cs.CoreV1().Pods(metav1.NamespaceDefault)
	w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("watch pods: %w", err)
	}
	out := make(chan watch.Event)
	go func() {
		defer close(out)
		rv := ""
		for {
			for e := range w.ResultChan() {
				switch o := e.Object.(type) {
				case *v1.Pod:
					rv = o.ResourceVersion
				case *metav1.Status:
					if ctx.Err() != nil {
						return // the watch ends because we are done
					}
					fmt.Fprintf(os.Stderr, "capstone-bench: watch: %s (watching again)\n", o.Message)
					if o.Code == 410 { // gone: that version is too old, start afresh
						rv = ""
					}
				}
				select {
				case out <- e:
				case <-ctx.Done():
					w.Stop()
					return
				}
			}
			for {
				if ctx.Err() != nil {
					return
				}
				if w, err = pods.Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: rv}); err == nil {
					break
				}
				fmt.Fprintf(os.Stderr, "capstone-bench: watch pods again: %v\n", err)
				time.Sleep(time.Second)
			}
		}
	}()
	return out, nil
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
