package main

// compare: the same bursts on several nodes of one control plane, in turn,
// for scripts/startup-bench.sh. Each node gets one warm-up burst (its
// image pulled, its client's first connections made; not reported), then
// the measured rounds interleave the nodes, each round starting one node
// further on so that no node always follows the same one.
//
// Per burst it measures, from the pods' creation until every pod is Ready
// (and tail more, for the events a node sends after the status):
//   - each pod's startup latency (created -> all containers started, seen
//     through a watch: SIG Scalability's pod startup SLI);
//   - the API server's write requests (apiserver_request_total, verbs
//     POST PUT PATCH DELETE APPLY), less the burst's own creates;
//   - the CPU time of the API server's process and of the node's, from
//     /proc/PID/stat (utime + stime);
//   - how busy the whole machine was from the pods' creation until the
//     last one was Ready, from /proc/stat: near 100% the burst waited for
//     CPU, and only less work per pod, on the node or in the API server,
//     can make it shorter.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"mykubelet/scripts/testkit/benchkit"
)

const compareUsage = `usage: capstone-bench [--kubeconfig PATH] compare --node LABEL=NODE[:PID] [--node …] [--pods 100] [--rounds 2] [--apiserver-pid PID] [--tail 2s] [--settle 5s] [--timeout 5m]`

// contender is one node of the comparison: a short label for the table,
// the Node's name, and the process that speaks for it (0: not measured).
type contender struct {
	label, node string
	pid         int
}

type comparison struct {
	nodes        []contender
	pods, rounds int
	apiserverPID int
	tail, settle time.Duration
	timeout      time.Duration
}

func parseCompare(args []string) (c comparison, err error) {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Func("node", "LABEL=NODE[:PID], once per node, the reference (the ratios' divisor) first", func(v string) error {
		label, rest, ok := strings.Cut(v, "=")
		if !ok || label == "" || rest == "" {
			return fmt.Errorf("%q is not LABEL=NODE[:PID]", v)
		}
		n := contender{label: label, node: rest}
		if node, pid, ok := strings.Cut(rest, ":"); ok {
			p, err := strconv.Atoi(pid)
			if err != nil || p <= 0 {
				return fmt.Errorf("%q: the PID %q is not a whole number above 0", v, pid)
			}
			n.node, n.pid = node, p
		}
		if slices.ContainsFunc(c.nodes, func(o contender) bool { return o.label == label }) {
			return fmt.Errorf("label %q given twice", label)
		}
		c.nodes = append(c.nodes, n)
		return nil
	})
	fs.IntVar(&c.pods, "pods", 100, "pods per burst, created at once")
	fs.IntVar(&c.rounds, "rounds", 2, "measured bursts per node, after one warm-up burst")
	fs.IntVar(&c.apiserverPID, "apiserver-pid", 0, "the kube-apiserver's process, for its CPU time (0: not measured)")
	fs.DurationVar(&c.tail, "tail", 2*time.Second, "how long the window stays open after every pod is Ready")
	fs.DurationVar(&c.settle, "settle", 5*time.Second, "the pause after a burst's pods are gone, before the next burst")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Minute, "how long one burst may take, start and removal")
	if err := fs.Parse(args); err != nil {
		return c, fmt.Errorf("compare: %w (%s)", err, compareUsage)
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("compare: unexpected argument %q (%s)", fs.Arg(0), compareUsage)
	case len(c.nodes) == 0:
		return c, errors.New("compare: at least one --node is required")
	case c.pods < 1:
		return c, fmt.Errorf("compare: --pods must be at least 1 (got %d)", c.pods)
	case c.rounds < 1:
		return c, fmt.Errorf("compare: --rounds must be at least 1 (got %d)", c.rounds)
	case c.apiserverPID < 0:
		return c, fmt.Errorf("compare: --apiserver-pid must not be negative (got %d)", c.apiserverPID)
	case c.tail < 0 || c.settle < 0:
		return c, errors.New("compare: --tail and --settle must not be negative")
	case c.timeout <= 0:
		return c, fmt.Errorf("compare: --timeout must be positive (got %s)", c.timeout)
	}
	return c, nil
}

// sample is what one burst on one node measured.
type sample struct {
	lat             []time.Duration
	writes          map[string]float64 // the API server's writes by verb and resource, the burst's creates excluded
	apiCPU, nodeCPU time.Duration
	// machine is the whole machine's CPU use from the pods' creation until
	// the last one was Ready (zero when /proc/stat could not be read).
	machine machineCPU
}

// order is round r's order of the nodes: rotated by r.
func order(n, r int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = (i + r) % n
	}
	return idx
}

func (c comparison) run(ctx context.Context, cs kubernetes.Interface, out io.Writer) error {
	fmt.Fprintf(out, "load at the start: %s", loadavg())
	results := make([][]sample, len(c.nodes))
	for r := 0; r <= c.rounds; r++ {
		for _, i := range order(len(c.nodes), r) {
			n := c.nodes[i]
			s, err := c.measure(ctx, cs, n, fmt.Sprintf("r%d-%s", r, n.label))
			if err != nil {
				return fmt.Errorf("%s (node %s), %s: %w", n.label, n.node, roundName(r), err)
			}
			fmt.Fprintf(out, "%-9s %-12s %s\n", roundName(r), n.label, s.line(c.pods))
			if r > 0 {
				results[i] = append(results[i], s)
			}
		}
	}
	fmt.Fprintf(out, "load at the end: %s\n", loadavg())
	return c.table(out, results)
}

func roundName(r int) string {
	if r == 0 {
		return "warm-up"
	}
	return fmt.Sprintf("round %d", r)
}

func (c comparison) measure(ctx context.Context, cs kubernetes.Interface, n contender, label string) (s sample, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	b := burst{node: n.node, label: label, pods: c.pods, timeout: c.timeout}
	events, err := benchkit.WatchPods(ctx, cs.CoreV1().Pods("default"), b.selector(), "capstone-bench")
	if err != nil {
		return s, err
	}
	w0, err := apiWrites(ctx, cs)
	if err != nil {
		return s, err
	}
	a0, n0 := cpuTime(c.apiserverPID), cpuTime(n.pid)
	m0 := readMachineCPU()
	if s.lat, err = b.start(ctx, cs, events, true); err != nil {
		return s, err
	}
	s.machine = readMachineCPU().since(m0)
	time.Sleep(c.tail)
	w1, err := apiWrites(ctx, cs)
	if err != nil {
		return s, err
	}
	s.writes = map[string]float64{}
	for k, v := range w1 {
		if d := v - w0[k]; d > 0 {
			s.writes[k] = d
		}
	}
	s.writes["POST pods"] -= float64(c.pods)
	s.apiCPU, s.nodeCPU = cpuTime(c.apiserverPID)-a0, cpuTime(n.pid)-n0
	if err := b.remove(ctx, cs, events); err != nil {
		return s, err
	}
	time.Sleep(c.settle)
	return s, nil
}

func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) }

func (s sample) total() (t float64) {
	for _, v := range s.writes {
		t += v
	}
	return t
}

func (s sample) line(pods int) string {
	lat := slices.Sorted(slices.Values(s.lat))
	return fmt.Sprintf("p50 %s s  p90 %s s  p99 %s s  writes/pod %.2f  API server CPU-s/pod %.4f  node CPU-s/pod %.4f  machine busy %s",
		seconds(benchkit.Quantile(lat, .5)), seconds(benchkit.Quantile(lat, .9)), seconds(benchkit.Quantile(lat, .99)),
		s.total()/float64(pods), s.apiCPU.Seconds()/float64(pods), s.nodeCPU.Seconds()/float64(pods), s.machine.busyPercent())
}

// table prints the measured rounds as a Markdown table, the latencies of
// all a node's bursts together, and each burst's p99.
func (c comparison) table(out io.Writer, results [][]sample) error {
	fmt.Fprintf(out, "\n%d measured bursts of %d pods per node (after one warm-up burst each):\n\n", c.rounds, c.pods)
	fmt.Fprintln(out, "| node | p50 | p90 | p99 | p99 per burst | p99 ÷ "+c.nodes[0].label+" | API writes per pod | API server CPU-s per pod | node CPU-s per pod | machine busy | machine CPU-s per pod |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|---|")
	var ref time.Duration
	for i, n := range c.nodes {
		var all []time.Duration
		var perBurst []string
		var writes float64
		var api, node time.Duration
		var machine machineCPU
		for _, s := range results[i] {
			machine.busy += s.machine.busy
			machine.total += s.machine.total
			all = append(all, s.lat...)
			perBurst = append(perBurst, seconds(benchkit.Quantile(slices.Sorted(slices.Values(s.lat)), .99)))
			writes += s.total()
			api += s.apiCPU
			node += s.nodeCPU
		}
		slices.Sort(all)
		p99 := benchkit.Quantile(all, .99)
		if i == 0 {
			ref = p99
		}
		started := float64(len(all))
		nodeCPU := "—"
		if n.pid > 0 {
			nodeCPU = fmt.Sprintf("%.4f", node.Seconds()/started)
		}
		apiCPU := "—"
		if c.apiserverPID > 0 {
			apiCPU = fmt.Sprintf("%.4f", api.Seconds()/started)
		}
		machinePerPod := "—"
		if machine.total > 0 {
			machinePerPod = fmt.Sprintf("%.4f", machine.busy.Seconds()/started)
		}
		fmt.Fprintf(out, "| %s | %s s | %s s | %s s | %s | %.2f× | %.2f | %s | %s | %s | %s |\n", n.label,
			seconds(benchkit.Quantile(all, .5)), seconds(benchkit.Quantile(all, .9)), seconds(p99), strings.Join(perBurst, ", "),
			p99.Seconds()/ref.Seconds(), writes/started, apiCPU, nodeCPU, machine.busyPercent(), machinePerPod)
	}
	fmt.Fprintln(out, "\nAPI writes per started pod, by verb and resource (0.05 and above; the control plane's own writes meanwhile included):")
	for i, n := range c.nodes {
		by := map[string]float64{}
		started := 0
		for _, s := range results[i] {
			started += len(s.lat)
			for k, v := range s.writes {
				by[k] += v
			}
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(by)) {
			if per := by[k] / float64(started); per >= 0.05 {
				parts = append(parts, fmt.Sprintf("%s %.2f", k, per))
			}
		}
		fmt.Fprintf(out, "  %-10s %s\n", n.label, strings.Join(parts, ", "))
	}
	return nil
}

// apiWrites is the API server's apiserver_request_total over the write
// verbs, from its /metrics, by "VERB resource[/subresource]".
func apiWrites(ctx context.Context, cs kubernetes.Interface) (map[string]float64, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("the API server's /metrics: %w", err)
	}
	return sumWrites(raw)
}

var writeVerbs = []string{"POST", "PUT", "PATCH", "DELETE", "APPLY"}

func sumWrites(metrics []byte) (map[string]float64, error) {
	writes := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(metrics))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	found := false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		found = true
		verb := label(line, "verb")
		if !slices.Contains(writeVerbs, verb) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("apiserver_request_total: %q: %w", line, err)
		}
		key := verb + " " + label(line, "resource")
		if sub := label(line, "subresource"); sub != "" {
			key += "/" + sub
		}
		writes[key] += v
	}
	if !found {
		return nil, errors.New("no apiserver_request_total in the API server's /metrics")
	}
	return writes, sc.Err()
}

// label is the value of a metric line's label name (empty when absent);
// the name must follow '{' or ',', so that resource is not subresource.
func label(line, name string) string {
	for _, lead := range []string{"{", ","} {
		if _, rest, ok := strings.Cut(line, lead+name+`="`); ok {
			v, _, _ := strings.Cut(rest, `"`)
			return v
		}
	}
	return ""
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on Linux
// (sysconf(_SC_CLK_TCK), which Go cannot ask without cgo).
const clockTicks = 100

// cpuTime is the process's user and system CPU time so far (0 for pid 0
// or a process that is gone).
func cpuTime(pid int) time.Duration {
	d, _ := benchkit.CPUTime(pid)
	return d
}

// machineCPU is CPU time of the whole machine, all its cores: busy (user,
// nice, system, irq, softirq, steal) and total (busy, idle and iowait).
type machineCPU struct{ busy, total time.Duration }

// readMachineCPU reads /proc/stat's first line, the sum over all cores;
// zero when it cannot.
func readMachineCPU() machineCPU {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineCPU{}
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	return parseProcStat(line)
}

// parseProcStat reads "cpu  user nice system idle iowait irq softirq steal …"
// in ticks of USER_HZ.
func parseProcStat(line string) machineCPU {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return machineCPU{}
	}
	var ticks [8]int64
	for i := range ticks {
		v, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return machineCPU{}
		}
		ticks[i] = v
	}
	tick := func(n int64) time.Duration { return time.Duration(n) * time.Second / clockTicks }
	idle := ticks[3] + ticks[4]
	busy := ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6] + ticks[7]
	return machineCPU{busy: tick(busy), total: tick(busy + idle)}
}

// since is the CPU time spent between m0 and m; zero if either is unknown.
func (m machineCPU) since(m0 machineCPU) machineCPU {
	if m.total == 0 || m0.total == 0 {
		return machineCPU{}
	}
	return machineCPU{busy: m.busy - m0.busy, total: m.total - m0.total}
}

// busyPercent is busy over total, or "—" when unknown.
func (m machineCPU) busyPercent() string {
	if m.total <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f%%", 100*m.busy.Seconds()/m.total.Seconds())
}

func loadavg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown\n"
	}
	return string(raw)
}
