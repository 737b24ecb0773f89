package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mykubelet/mylib/bootstraptoken"
	"mykubelet/mylib/fleet"
	"mykubelet/mylib/statedir"
	"mykubelet/scripts/testkit/testcluster"
)

var (
	benchNodes  = flag.String("fleet.nodes", "100", "comma-separated fleet sizes for BenchmarkFleet")
	benchModes  = flag.String("fleet.modes", "lease,status,kwok", "what to run for each size: lease, status (this fleet; lease@80Mi runs it with --memory-limit 80Mi), kwok (KWOK with its lease stage)")
	benchWindow = flag.Duration("fleet.window", 3*time.Minute, "how long each run is measured, after a 30 s warm-up")
	benchKwok   = flag.String("fleet.kwok", "", "the kwok binary (v0.8.0); needed for mode kwok")
	benchStages = flag.String("fleet.kwok-stages", "", "a kwok config with its node-initialize and node-heartbeat-with-lease stages")
)

const warmUp = 30 * time.Second

// BenchmarkFleet runs the chapter's fleet (and KWOK) against a fresh local
// control plane for each size and mode, and prints what it cost: writes and
// request bodies per second (the fleet's counter and the API server's
// metrics), etcd's database growth, CPU and RSS of the API server, etcd and
// the node tool. It prints figures; it asserts nothing about time. Run it
// with scripts/fleet-bench.sh.
func BenchmarkFleet(b *testing.B) {
	bin := testcluster.BuildChapter(b, "./chapters/14-node-fleet")
	for b.Loop() {
		for _, ns := range strings.Split(*benchNodes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(ns))
			if err != nil || n < 1 {
				b.Fatalf("-fleet.nodes: %q is not a size", ns)
			}
			for _, mode := range strings.Split(*benchModes, ",") {
				benchRun(b, bin, n, strings.TrimSpace(mode))
			}
		}
	}
}

// sample is what one moment looks like from outside the processes.
type sample struct {
	at                      time.Time
	apiserverCPU, etcdCPU   time.Duration
	toolCPU                 time.Duration
	apiserverRSS, toolRSS   int64
	etcdDBSize, etcdDBInUse float64
	server                  fleet.ServerCounts
	load                    string
}

func benchRun(b *testing.B, bin string, n int, mode string) {
	c := testcluster.Start(b)
	admin := c.Clientset(b)
	ctx := context.Background()
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", c.Ports.EtcdClient)
	apiserver, etcd := pidWithArg(b, "--etcd-servers="+etcdURL), pidWithArg(b, "--listen-client-url="+etcdURL)
	take := func(tool int) sample {
		s := sample{at: time.Now(), server: serverCounts(b, admin), load: loadavg()}
		s.apiserverCPU, s.apiserverRSS = procCPU(apiserver), procRSS(apiserver)
		s.etcdCPU = procCPU(etcd)
		s.toolCPU, s.toolRSS = procCPU(tool), procRSS(tool)
		s.etcdDBSize, s.etcdDBInUse = etcdDB(b, c.Ports.EtcdClient)
		return s
	}

	var cmd *exec.Cmd
	var out *lines
	start := ""
	mode, memoryLimit, _ := strings.Cut(mode, "@")
	switch mode {
	case "lease", "status":
		stateDir := b.TempDir()
		if _, err := bootstraptoken.Setup(ctx, admin, c.Config(b), bootstraptoken.SetupOptions{AutoApprove: true, Kubeconfig: statedir.Path(stateDir, statedir.BootstrapKubeconfig)}); err != nil {
			b.Fatal(err)
		}
		args := []string{"--state-dir", stateDir, "--nodes", strconv.Itoa(n), "--mode", mode, "--report-interval", "10s"}
		if memoryLimit != "" {
			args = append(args, "--memory-limit", memoryLimit)
		}
		if mode == "lease" && memoryLimit == "" {
			// The cost of a restart, with the identities in the state dir.
			cmd, out = startTool(b, bin, args...)
			first := out.wait(b, `^identities: .*`, 15*time.Minute)
			out.wait(b, `^registered: .*`, 10*time.Minute)
			stopTool(b, cmd, out)
			start = "first start: " + first + "; restart: "
		}
		cmd, out = startTool(b, bin, args...)
		start += out.wait(b, `^identities: .*`, 15*time.Minute) + "; " + out.wait(b, `^registered: .*`, 10*time.Minute)
	case "kwok":
		if *benchKwok == "" || *benchStages == "" {
			b.Fatal("mode kwok needs -fleet.kwok and -fleet.kwok-stages (scripts/fleet-bench.sh sets them)")
		}
		kc := filepath.Join(c.Dir(), "admin.kubeconfig")
		cmd, out = startTool(b, *benchKwok, "--kubeconfig", kc, "--config", *benchStages,
			"--manage-all-nodes=false", "--manage-nodes-with-label-selector", "kwok.x-k8s.io/node=fake",
			"--node-lease-duration-seconds", "40", "--node-ip", "127.0.0.1", "--server-address", "")
		t0 := time.Now()
		fast := c.Config(b)
		fast.QPS, fast.Burst = 200, 400
		createKwokNodes(b, kubernetes.NewForConfigOrDie(fast), n)
		waitReady(b, admin, n, 10*time.Minute)
		start = fmt.Sprintf("%d nodes created and Ready in %s", n, time.Since(t0).Round(100*time.Millisecond))
	default:
		b.Fatalf("-fleet.modes: unknown mode %q", mode)
	}
	time.Sleep(warmUp)
	s0 := take(cmd.Process.Pid)
	reports0 := out.count(`^last `)
	// The tool's RSS every 5 s of the window: its mean and its peak.
	var rssSum, rssMax int64
	var rssN int
	for end := s0.at.Add(*benchWindow); time.Now().Before(end); {
		time.Sleep(min(5*time.Second, time.Until(end)))
		r := procRSS(cmd.Process.Pid)
		rssSum, rssMax, rssN = rssSum+r, max(rssMax, r), rssN+1
	}
	s1 := take(cmd.Process.Pid)
	ready, err := countReady(admin)
	if err != nil {
		b.Fatal(err)
	}
	var fleetLines []string
	if mode != "kwok" {
		fleetLines = out.since(`^last `, reports0)
	}
	goroutines := goroutinesOf(fleetLines)
	stopTool(b, cmd, out)

	secs := s1.at.Sub(s0.at).Seconds()
	srv := fleet.Sub(s1.server, s0.server)
	var writes, bytes float64
	var kinds []string
	for _, k := range fleet.SortedKeys(srv) {
		if !k.IsWrite() || (k.Resource != "leases" && k.Resource != "nodes") {
			continue
		}
		// Body bytes are summed by verb and resource, without subresource.
		bytes += float64(srv[k].BodyBytes)
		if srv[k].Requests > 0 {
			writes += float64(srv[k].Requests)
			kinds = append(kinds, fmt.Sprintf("%s %.1f", k, float64(srv[k].Requests)/secs))
		}
	}
	cpu := func(a, b time.Duration) float64 { return 100 * (b - a).Seconds() / secs }
	if memoryLimit != "" {
		mode += " --memory-limit " + memoryLimit
	}
	fmt.Printf("\n== N=%d %s, measured %s after a %s warm-up; load average %s -> %s\n", n, mode, (*benchWindow).Round(time.Second), warmUp, s0.load, s1.load)
	fmt.Printf("start:      %s\n", start)
	fmt.Printf("nodes:      %d of %d Ready at the end of the window\n", ready, n)
	fmt.Printf("API server: %.1f node/lease writes/s (%s), %.1f KiB/s request bodies\n", writes/secs, strings.Join(kinds, ", "), bytes/1024/secs)
	if len(fleetLines) > 0 {
		fmt.Printf("fleet counter, last 10 s windows: first %s\n                                   last  %s\n", fleetLines[0], fleetLines[len(fleetLines)-1])
	}
	fmt.Printf("etcd:       db size %.1f -> %.1f MiB (%+.1f KiB/min), in use %.1f -> %.1f MiB\n",
		s0.etcdDBSize/(1<<20), s1.etcdDBSize/(1<<20), (s1.etcdDBSize-s0.etcdDBSize)/1024/(secs/60), s0.etcdDBInUse/(1<<20), s1.etcdDBInUse/(1<<20))
	fmt.Printf("CPU:        kube-apiserver %.1f %%, etcd %.1f %%, %s %.1f %% (of one core)\n", cpu(s0.apiserverCPU, s1.apiserverCPU), cpu(s0.etcdCPU, s1.etcdCPU), toolName(mode), cpu(s0.toolCPU, s1.toolCPU))
	fmt.Printf("RSS:        kube-apiserver %d MiB, %s %d MiB (every 5 s of the window: mean %d, peak %d MiB)", s1.apiserverRSS>>20, toolName(mode), s1.toolRSS>>20, rssSum/int64(max(rssN, 1))>>20, rssMax>>20)
	if goroutines != "" {
		fmt.Printf(", fleet goroutines %s", goroutines)
	}
	fmt.Println()
}

func toolName(mode string) string {
	if mode == "kwok" {
		return "kwok"
	}
	return "fleet"
}

// lines collects a process's stdout and stderr, line by line.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) add(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		l.mu.Lock()
		l.all = append(l.all, sc.Text())
		l.mu.Unlock()
	}
}

func (l *lines) wait(b *testing.B, re string, timeout time.Duration) string {
	b.Helper()
	rx := regexp.MustCompile(re)
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		l.mu.Lock()
		for _, s := range l.all {
			if rx.MatchString(s) {
				l.mu.Unlock()
				return s
			}
		}
		l.mu.Unlock()
	}
	b.Fatalf("no line matching %s after %s; output:\n%s", re, timeout, l.String())
	return ""
}

func (l *lines) count(re string) int { return len(l.since(re, 0)) }

func (l *lines) since(re string, skip int) []string {
	rx := regexp.MustCompile(re)
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.all {
		if rx.MatchString(s) {
			out = append(out, s)
		}
	}
	return out[min(skip, len(out)):]
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all[max(0, len(l.all)-40):], "\n")
}

func startTool(b *testing.B, bin string, args ...string) (*exec.Cmd, *lines) {
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"HOME=" + b.TempDir(), "PATH=" + os.Getenv("PATH")}
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	l := &lines{}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go l.add(stdout)
	go l.add(stderr)
	b.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGINT); _ = cmd.Wait() })
	return cmd, l
}

func stopTool(b *testing.B, cmd *exec.Cmd, l *lines) {
	_ = cmd.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		b.Fatalf("%s did not stop within 60 s of Ctrl-C:\n%s", cmd.Path, l.String())
	}
}

var goroutinesRe = regexp.MustCompile(`goroutines (\d+)`)

func goroutinesOf(reports []string) string {
	if len(reports) == 0 {
		return ""
	}
	m := goroutinesRe.FindStringSubmatch(reports[len(reports)-1])
	if m == nil {
		return ""
	}
	return m[1]
}

// pidWithArg finds the process started with arg (the test cluster's
// processes are children of this one, with no pid file).
func pidWithArg(b *testing.B, arg string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		raw, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(raw), "\x00") {
			if a == arg {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
				return pid
			}
		}
	}
	b.Fatalf("no process with argument %s", arg)
	return 0
}

func serverCounts(b *testing.B, cs kubernetes.Interface) fleet.ServerCounts {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return fleet.ParseServerCounts(string(raw))
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat (100 on Linux).
const clockTicks = 100

func procCPU(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

func procRSS(pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func loadavg() string {
	raw, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

var etcdMetric = regexp.MustCompile(`(?m)^(etcd_mvcc_db_total_size_in_bytes|etcd_mvcc_db_total_size_in_use_in_bytes) (\S+)$`)

func etcdDB(b *testing.B, port int) (size, inUse float64) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for _, m := range etcdMetric.FindAllStringSubmatch(string(raw), -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		if m[1] == "etcd_mvcc_db_total_size_in_bytes" {
			size = v
		} else {
			inUse = v
		}
	}
	return size, inUse
}

// createKwokNodes creates n Nodes for KWOK to manage, as its documentation
// shows (the label selects them).
func createKwokNodes(b *testing.B, cs kubernetes.Interface, n int) {
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			name := fleet.NodeName("kwok", i)
			node := &v1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: name,
					Labels:      map[string]string{"kwok.x-k8s.io/node": "fake", v1.LabelHostname: name, v1.LabelOSStable: "linux"},
					Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"}},
				Status: v1.NodeStatus{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi"), v1.ResourcePods: resource.MustParse("110")}},
			}
			if _, err := cs.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
				b.Errorf("create %s: %v", name, err)
			}
		})
	}
	wg.Wait()
}

func waitReady(b *testing.B, cs kubernetes.Interface, n int, timeout time.Duration) {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(time.Second) {
		if ready, err := countReady(cs); err == nil && ready >= n {
			return
		}
	}
	b.Fatalf("fewer than %d nodes Ready after %s", n, timeout)
}

// countReady counts the cluster's nodes whose Ready condition is True.
func countReady(cs kubernetes.Interface) (int, error) {
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	ready := 0
	for _, node := range nodes.Items {
		for _, c := range node.Status.Conditions {
			if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
				ready++
			}
		}
	}
	return ready, nil
}
