// Command realnode-bench is the measuring half of scripts/realnode-bench.sh:
// bursts of pods bound to one node whose kubelet drives a real runtime
// (containerd), and their figures. Per burst it creates the pods at once
// and follows them through a watch: each pod's startup latency (created →
// Running with its containers running), the time from the first create
// until every pod ran, and the CPU time of the kubelet's process (and of
// containerd's) over that time, from /proc/PID/stat. Then it deletes the
// pods and waits until they are gone. It prints a line per burst and,
// last, the measured bursts as a row of a Markdown table (--print-header
// prints its header).
//
//	realnode-bench --node NAME --label capstone --kubelet-pid PID [--containerd-pid PID] [--pods 100] [--rounds 2] [--warm-up 10]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"mykubelet/mylib/signals"

	"mykubelet/scripts/testkit/benchkit"
)

const usage = `usage: realnode-bench [--kubeconfig PATH] --node NAME --label LABEL --kubelet-pid PID [--containerd-pid PID] [--pods 100] [--rounds 2] [--warm-up 10] [--image REF] [--timeout 5m]
       realnode-bench --print-header`

type options struct {
	kubeconfig, node, label, image string
	kubeletPID, containerdPID      int
	pods, rounds, warmUp           int
	timeout                        time.Duration
	printHeader                    bool
}

func parse(args []string) (o options, err error) {
	fs := flag.NewFlagSet("realnode-bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "an admin kubeconfig (default: $KUBECONFIG)")
	fs.StringVar(&o.node, "node", "", "the node the pods are bound to (spec.nodeName)")
	fs.StringVar(&o.label, "label", "", "the kubelet's name in the table, and the pods' label realnode-bench=LABEL")
	fs.StringVar(&o.image, "image", "docker.io/library/busybox:1.35.0", "the pods' image (present in the runtime)")
	fs.IntVar(&o.kubeletPID, "kubelet-pid", 0, "the kubelet's process, for its CPU time")
	fs.IntVar(&o.containerdPID, "containerd-pid", 0, "containerd's process, for its CPU time (0: not measured)")
	fs.IntVar(&o.pods, "pods", 100, "pods per burst, created at once")
	fs.IntVar(&o.rounds, "rounds", 2, "measured bursts")
	fs.IntVar(&o.warmUp, "warm-up", 10, "pods of one burst before the measured ones, not reported (0: none)")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long one burst may take, start and removal")
	fs.BoolVar(&o.printHeader, "print-header", false, "print the table's header and exit")
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("%w (%s)", err, usage)
	}
	if o.printHeader {
		return o, nil
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q (%s)", fs.Arg(0), usage)
	case o.node == "" || o.label == "":
		return o, fmt.Errorf("--node and --label are required (%s)", usage)
	case o.kubeletPID <= 0:
		return o, fmt.Errorf("--kubelet-pid must be a process ID (got %d)", o.kubeletPID)
	case o.containerdPID < 0:
		return o, fmt.Errorf("--containerd-pid must not be negative (got %d)", o.containerdPID)
	case o.pods < 1 || o.rounds < 1 || o.warmUp < 0:
		return o, fmt.Errorf("--pods and --rounds must be at least 1, --warm-up at least 0 (got %d, %d, %d)", o.pods, o.rounds, o.warmUp)
	case o.timeout <= 0:
		return o, fmt.Errorf("--timeout must be positive (got %s)", o.timeout)
	}
	return o, nil
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "realnode-bench:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	if o.printHeader {
		fmt.Fprintln(out, header)
		return nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("admin kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000 // a burst's creates go out at once
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := signals.SetupSignalContext()
	if _, err := benchkit.CPUTime(o.kubeletPID); err != nil {
		return fmt.Errorf("the kubelet's process: %w", err)
	}
	var measured []burstResult
	for r := 0; r <= o.rounds; r++ {
		n, name := o.pods, fmt.Sprintf("round %d", r)
		if r == 0 {
			if o.warmUp == 0 {
				continue
			}
			n, name = o.warmUp, "warm-up"
		}
		b, err := o.burst(ctx, cs, n, fmt.Sprintf("%s-r%d", o.label, r))
		if err != nil {
			return fmt.Errorf("%s, %s: %w", o.label, name, err)
		}
		s := summarize([]burstResult{b})
		fmt.Fprintf(out, "%-8s %-9s %3d pods: p50 %s, p99 %s, all Running after %s, kubelet CPU-s/pod %.4f, containerd CPU-s/pod %.4f\n",
			o.label, name, n, secs(s.p50), secs(s.p99), secs(b.allRunning), s.kubeletCPU.Seconds(), s.containerdCPU.Seconds())
		if r > 0 {
			measured = append(measured, b)
		}
	}
	fmt.Fprintln(out, summarize(measured).row(o.label))
	return nil
}

// burst creates n pods named prefix-NNN at once, waits until each runs,
// then deletes them and waits until they are gone.
func (o options) burst(ctx context.Context, cs kubernetes.Interface, n int, prefix string) (b burstResult, err error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	selector := "realnode-bench=" + prefix
	pods := cs.CoreV1().Pods(metav1.NamespaceDefault)
	events, err := benchkit.WatchPods(ctx, pods, selector, "realnode-bench")
	if err != nil {
		return b, err
	}
	k0, err := benchkit.CPUTime(o.kubeletPID)
	if err != nil {
		return b, fmt.Errorf("the kubelet's process: %w", err)
	}
	c0, err := benchkit.CPUTime(o.containerdPID)
	if err != nil {
		return b, fmt.Errorf("containerd's process: %w", err)
	}
	start := time.Now()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range n {
		wg.Go(func() {
			grace, no := int64(1), false
			pod := &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%03d", prefix, i), Labels: map[string]string{"realnode-bench": prefix}},
				Spec: v1.PodSpec{NodeName: o.node, TerminationGracePeriodSeconds: &grace, AutomountServiceAccountToken: &no,
					Containers: []v1.Container{{Name: "c", Image: o.image, ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sleep", "3600"}}}},
			}
			if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				errs <- fmt.Errorf("create pod %s: %w", pod.Name, err)
			}
		})
	}
	created, running := map[string]time.Time{}, map[string]bool{}
	for len(running) < n {
		select {
		case err := <-errs:
			return b, err
		case e, ok := <-events:
			if !ok {
				return b, fmt.Errorf("%d of %d pods Running within %s", len(running), n, o.timeout)
			}
			pod, isPod := e.Object.(*v1.Pod)
			if !isPod {
				continue
			}
			now := time.Now()
			if _, seen := created[pod.Name]; !seen {
				created[pod.Name] = now
			}
			if pod.Status.Phase == v1.PodFailed {
				return b, fmt.Errorf("pod %s failed: %s %s", pod.Name, pod.Status.Reason, pod.Status.Message)
			}
			if !running[pod.Name] && isRunning(pod) {
				running[pod.Name] = true
				b.lat = append(b.lat, now.Sub(created[pod.Name]))
			}
		}
	}
	b.allRunning = time.Since(start)
	k1, err := benchkit.CPUTime(o.kubeletPID)
	if err != nil {
		return b, fmt.Errorf("the kubelet's process: %w", err)
	}
	c1, _ := benchkit.CPUTime(o.containerdPID) // read above: it was there
	b.kubeletCPU, b.containerdCPU = k1-k0, c1-c0

	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: selector}); err != nil {
		return b, fmt.Errorf("delete the pods: %w", err)
	}
	for gone := 0; gone < n; {
		e, ok := <-events
		if !ok {
			return b, fmt.Errorf("%d of %d pods gone within %s", gone, n, o.timeout)
		}
		if e.Type == watch.Deleted {
			gone++
		}
	}
	return b, nil
}

// isRunning: the pod is Running and every container runs.
func isRunning(pod *v1.Pod) bool {
	if pod.Status.Phase != v1.PodRunning || len(pod.Status.ContainerStatuses) != len(pod.Spec.Containers) {
		return false
	}
	for _, c := range pod.Status.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
	}
	return true
}
