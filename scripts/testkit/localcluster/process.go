package localcluster

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Components in start order; Stop and Down go in reverse.
var Components = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// OptionalComponents start after Components when asked for (Config); Status
// lists one only when it has a pid file, Down stops them first.
var OptionalComponents = []string{MetricsServerName}

type process struct {
	name, bin, logPath string
	cmd                *exec.Cmd
	exited             chan struct{}
	waitErr            error
}

func (c *Cluster) args(name string) []string {
	p, d := c.Ports, c.cfg.Dir
	port := func(n int) string { return strconv.Itoa(n) }
	switch name {
	case "etcd":
		return []string{
			"--data-dir=" + filepath.Join(d, "etcd"),
			"--listen-client-url=http://127.0.0.1:" + port(p.EtcdClient),
			"--listen-peer-url=http://127.0.0.1:" + port(p.EtcdPeer),
		}
	case "kube-apiserver":
		return []string{
			"--etcd-servers=http://127.0.0.1:" + port(p.EtcdClient),
			"--bind-address=127.0.0.1",
			"--secure-port=" + port(p.APIServer),
			// v1.37 refuses a loopback advertise address unless the endpoint
			// reconciler (which would publish it in the kubernetes Service's
			// endpoints) is off.
			"--advertise-address=127.0.0.1",
			"--endpoint-reconciler-type=none",
			"--cert-dir=" + c.pki("apiserver-generated"),
			"--tls-cert-file=" + c.pki("apiserver.crt"),
			"--tls-private-key-file=" + c.pki("apiserver.key"),
			"--client-ca-file=" + c.pki("ca.crt"),
			"--kubelet-client-certificate=" + c.pki("apiserver-kubelet-client.crt"),
			"--kubelet-client-key=" + c.pki("apiserver-kubelet-client.key"),
			// As kubeadm's docs harden it once kubelets request their
			// serving certificates (serverTLSBootstrap): the API server
			// checks the kubelet's serving certificate against the cluster
			// CA, which signs kubernetes.io/kubelet-serving CSRs; and, as
			// kubeadm's own flags, it dials the node's InternalIP first
			// (127.0.0.1 for the tutorial's nodes).
			"--kubelet-certificate-authority=" + c.pki("ca.crt"),
			"--kubelet-preferred-address-types=" + KubeletPreferredAddressTypes,
			"--enable-bootstrap-token-auth=true",
			"--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction",
			"--allow-privileged=true",
			"--service-cluster-ip-range=" + ServiceClusterIPRange,
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + c.pki("sa.pub"),
			"--service-account-signing-key-file=" + c.pki("sa.key"),
			// The aggregation layer, as kubeadm sets it up: whom extension
			// API servers trust to pass the user in headers, and the client
			// certificate the API server proxies with.
			"--requestheader-client-ca-file=" + c.pki("front-proxy-ca.crt"),
			"--requestheader-allowed-names=" + FrontProxyClientName,
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--proxy-client-cert-file=" + c.pki("front-proxy-client.crt"),
			"--proxy-client-key-file=" + c.pki("front-proxy-client.key"),
		}
	case "kube-controller-manager":
		kc := filepath.Join(d, "controller-manager.kubeconfig")
		a := []string{
			"--kubeconfig=" + kc,
			"--authentication-kubeconfig=" + kc,
			"--authorization-kubeconfig=" + kc,
			"--bind-address=127.0.0.1",
			"--secure-port=" + port(p.ControllerManager),
			"--tls-cert-file=" + c.pki("controller-manager-serving.crt"),
			"--tls-private-key-file=" + c.pki("controller-manager-serving.key"),
			"--client-ca-file=" + c.pki("ca.crt"),
			"--root-ca-file=" + c.pki("ca.crt"),
			"--service-account-private-key-file=" + c.pki("sa.key"),
			"--use-service-account-credentials=true",
			// The csrsigning controller signs approved CSRs with the cluster CA.
			"--cluster-signing-cert-file=" + c.pki("ca.crt"),
			"--cluster-signing-key-file=" + c.pki("ca.key"),
			// bootstrapsigner and tokencleaner are off by default; kubeadm
			// turns them on for bootstrap tokens, and so do we.
			"--controllers=*,bootstrapsigner,tokencleaner",
			"--leader-elect=false",
			// The node IPAM controller (nodeipam, among *) gives each node
			// a spec.podCIDR, which the kubelet hands to its runtime, as
			// kubeadm's --pod-network-cidr sets it up.
			"--allocate-node-cidrs=true",
			"--cluster-cidr=" + cmp.Or(c.cfg.ClusterCIDR, ClusterCIDR),
			"--node-cidr-mask-size=" + strconv.Itoa(NodeCIDRMaskSize),
			"--service-cluster-ip-range=" + ServiceClusterIPRange,
		}
		if c.cfg.NodeMonitorGracePeriod > 0 {
			a = append(a, "--node-monitor-grace-period="+c.cfg.NodeMonitorGracePeriod.String())
		}
		if c.cfg.ClusterSigningDuration > 0 {
			a = append(a, "--cluster-signing-duration="+c.cfg.ClusterSigningDuration.String())
		}
		return a
	case "kube-scheduler":
		kc := filepath.Join(d, "scheduler.kubeconfig")
		return []string{
			"--kubeconfig=" + kc,
			"--authentication-kubeconfig=" + kc,
			"--authorization-kubeconfig=" + kc,
			"--bind-address=127.0.0.1",
			"--secure-port=" + port(p.Scheduler),
			"--tls-cert-file=" + c.pki("scheduler-serving.crt"),
			"--tls-private-key-file=" + c.pki("scheduler-serving.key"),
			"--leader-elect=false",
		}
	case MetricsServerName:
		return c.metricsServerArgs()
	}
	panic("unknown component " + name)
}

func (c *Cluster) start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ReadyTimeout)
	defer cancel()
	for _, dir := range []string{"logs", "run", "etcd"} {
		if err := os.MkdirAll(filepath.Join(c.cfg.Dir, dir), 0o700); err != nil {
			return err
		}
	}
	caPool := x509.NewCertPool()
	caPool.AddCert(c.ca.Cert)
	tlsClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPool}}}
	plainClient := &http.Client{Timeout: 5 * time.Second}

	if err := c.launch("etcd"); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "etcd", func() error {
		return httpOK(plainClient, "http://127.0.0.1:"+strconv.Itoa(c.Ports.EtcdClient)+"/health")
	}); err != nil {
		return err
	}
	if err := c.launch("kube-apiserver"); err != nil {
		return err
	}
	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := c.waitFor(ctx, "kube-apiserver /readyz", func() error {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Raw()
		if err == nil && string(body) != "ok" {
			err = fmt.Errorf("readyz: %s", body)
		}
		return err
	}); err != nil {
		return err
	}
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		if err := c.launch(name); err != nil {
			return err
		}
	}
	for name, port := range map[string]int{"kube-controller-manager": c.Ports.ControllerManager, "kube-scheduler": c.Ports.Scheduler} {
		url := "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
		if err := c.waitFor(ctx, name+" /healthz", func() error { return httpOK(tlsClient, url) }); err != nil {
			return err
		}
	}
	// The serviceaccount controller makes "default" in each namespace; pods
	// cannot be created before it exists.
	if err := c.waitFor(ctx, "service account default/default", func() error {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return err
	}
	if c.cfg.MetricsServer {
		return c.startMetricsServer(ctx, cs)
	}
	return nil
}

func httpOK(client *http.Client, url string) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// waitFor polls check every 200 ms until it succeeds, a process exits, or ctx ends.
func (c *Cluster) waitFor(ctx context.Context, what string, check func() error) error {
	var last error
	for {
		if last = check(); last == nil {
			if c.cfg.Progress != nil {
				c.cfg.Progress("%s: ready (%.1fs)", what, time.Since(c.started).Seconds())
			}
			return nil
		}
		for _, p := range c.procs {
			select {
			case <-p.exited:
				return fmt.Errorf("%s exited (%v) while waiting for %s; last lines of %s:\n%s", p.name, p.waitErr, what, p.logPath, tail(p.logPath, 15))
			default:
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for %s: %v (logs in %s)", what, last, filepath.Join(c.cfg.Dir, "logs"))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *Cluster) launch(name string) error {
	bin := filepath.Join(c.cfg.BinDir, name)
	logPath := filepath.Join(c.cfg.Dir, "logs", name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child has its own copy
	cmd := exec.Command(bin, c.args(name)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if c.cfg.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		// Die with the test binary even when it is killed.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	start := cmd.Start
	if !c.cfg.Detach {
		start = func() error { return startOnLastingThread(cmd) }
	}
	if err := start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, bin: bin, logPath: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() { p.waitErr = cmd.Wait(); close(p.exited) }()
	c.procs = append(c.procs, p)
	if c.cfg.Detach {
		return writePidFile(c.cfg.Dir, name, cmd.Process.Pid, bin)
	}
	return nil
}

// startOnLastingThread starts cmd from an OS thread that never ends. The
// kernel sends Pdeathsig when the thread that forked the child ends, not
// the process; and Go ends a thread when a goroutine locked to it returns
// without unlocking, as the mock runtime's pod network does on purpose
// (podnet: a thread that entered a network namespace is never reused). A
// test that runs a pod network beside its control plane would otherwise
// see the control plane killed at a random moment.
func startOnLastingThread(cmd *exec.Cmd) error {
	lastingThreadOnce.Do(func() {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lasts as long as the process
			for r := range lastingThreadStarts {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	lastingThreadStarts <- startRequest{cmd, done}
	return <-done
}

type startRequest struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	lastingThreadOnce   sync.Once
	lastingThreadStarts = make(chan startRequest)
)

// Stop stops the processes this Cluster started, newest first: SIGTERM, then
// SIGKILL after 15 s.
func (c *Cluster) Stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM) // fails only if it is gone already
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if c.cfg.Detach {
			os.Remove(pidFile(c.cfg.Dir, p.name))
		}
	}
	c.procs = nil
}

func pidFile(dir, name string) string { return filepath.Join(dir, "run", name+".pid") }

// A pid file holds the pid and the binary's path, so that Down signals the
// process it started and not whatever got the pid since.
func writePidFile(dir, name string, pid int, bin string) error {
	return os.WriteFile(pidFile(dir, name), []byte(fmt.Sprintf("%d\n%s\n", pid, bin)), 0o600)
}

// ProcState is what Status reports of one component.
type ProcState struct {
	Name    string
	Pid     int // 0 when there is no pid file
	Running bool
}

// Status reads the pid files in dir/run and says which components run: all
// of Components, and those of OptionalComponents that were started (that
// have a pid file, whether the process still runs or not).
func Status(dir string) []ProcState {
	var out []ProcState
	for _, name := range Components {
		pid, running := readPid(dir, name)
		out = append(out, ProcState{Name: name, Pid: pid, Running: running})
	}
	for _, name := range OptionalComponents {
		if fileExists(pidFile(dir, name)) {
			pid, running := readPid(dir, name)
			out = append(out, ProcState{Name: name, Pid: pid, Running: running})
		}
	}
	return out
}

// readPid returns the pid from the pid file and whether that pid still runs
// the binary that was started.
func readPid(dir, name string) (int, bool) {
	b, err := os.ReadFile(pidFile(dir, name))
	if err != nil {
		return 0, false
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	pid, err := strconv.Atoi(lines[0])
	if err != nil || len(lines) < 2 {
		return 0, false
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return pid, false
	}
	return pid, strings.TrimSuffix(exe, " (deleted)") == lines[1]
}

// Down stops the components of the detached cluster in dir, newest first,
// each by the pid in its pid file and only if that pid still runs the binary
// that was started. It returns the names it stopped.
func Down(dir string) ([]string, error) {
	var stopped []string
	var errs []error
	all := append(append([]string{}, Components...), OptionalComponents...)
	for i := len(all) - 1; i >= 0; i-- {
		name := all[i]
		pid, running := readPid(dir, name)
		if running {
			if err := terminate(pid); err != nil {
				errs = append(errs, fmt.Errorf("%s (pid %d): %w", name, pid, err))
				continue
			}
			stopped = append(stopped, name)
		}
		if err := os.Remove(pidFile(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return stopped, errors.Join(errs...)
}

func terminate(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if !Alive(pid) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	for i := 0; i < 50 && Alive(pid); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		lines = append(lines, s.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// Alive reports whether pid is a live process. A zombie (exited, not yet
// reaped by its parent, as happens to detached processes when PID 1 does not
// reap) counts as gone.
func Alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
