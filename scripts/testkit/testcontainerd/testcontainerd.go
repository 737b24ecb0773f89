// Package testcontainerd starts a real container runtime for a test:
// containerd, runc and the CNI plugins with the offline images and a cgroup
// root, set up as every real-node script sets them up, by scripts/realnode.sh
// (realnode::init, realnode::containerd_up), in a bash that lives as long as
// the test and whose EXIT trap (realnode::cleanup) takes them down again.
// With Config.Node the same bash gives it a control plane of its own too
// (realnode::cluster_up), a bootstrap token for that node (realnode::issue),
// the approval of the serving certificates' CSRs
// (realnode::approve_serving_csrs) and the capstone's config and command
// line (realnode::capstone_args), as scripts/conformance.sh has them. It
// has a work directory and a CNI network of the test's own, so that it runs
// beside a learner's (.state/containerd, 10.22.0.0/16). Root only: the test
// is skipped without root, or where containerd cannot be installed.
package testcontainerd

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"mykubelet/scripts/testkit/testcluster"
)

// Config chooses the runtime's network and cgroup root; the zero value is
// DefaultSubnet on DefaultBridge. Tests that run at the same time need one
// network each.
type Config struct {
	Subnet string // the pods' addresses (MYKUBELET_CNI_SUBNET)
	Bridge string // the CNI bridge's name, at most 15 bytes (MYKUBELET_CNI_BRIDGE)
	// Flavor is MYKUBELET_CONTAINERD: "debian" (containerd 1.6, apt) or "v2"
	// (built from its module); empty: the test's own MYKUBELET_CONTAINERD.
	Flavor string
	// CgroupRoot is a kubelet's cgroupRoot, made in every cgroup hierarchy
	// and removed at the end; empty: /mykubelet-test-<random>.
	CgroupRoot string
	// Node, when set, is the name of the test's kubelet: the harness starts
	// a control plane too (scripts/cluster.sh on free loopback ports),
	// issues the node a bootstrap token and approves its serving CSRs until
	// the end; empty: containerd only.
	Node string
}

// The tests' network: neither the learner's 10.22.0.0/16, nor the mock
// runtime's 10.88.0.0/16, nor the control plane's cluster CIDR 10.128.0.0/12.
const (
	DefaultSubnet = "10.24.0.0/24"
	DefaultBridge = "mykubelet-test"
)

// harness is the bash that owns the runtime: scripts/realnode.sh sets it up
// and says where it is, then waits for the test's end (its stdin closed, or a
// signal); its EXIT trap stops the approver, containerd (scripts/containerd.sh
// down) and the control plane (scripts/cluster.sh down), removes the cgroup
// root and deletes the work directory.
const harness = `set -euo pipefail
source "$1/scripts/lib.sh"
source "$1/scripts/realnode.sh"
realnode::init testcontainerd "$2" "$3" "$4"
echo "work $REALNODE_WORK"
if [[ -n "$5" ]]; then
  realnode::cluster_up
  realnode::issue "$5"
  realnode::approve_serving_csrs
  echo "kubeconfig $KUBECONFIG"
  echo "bootstrap $(realnode::bootstrap "$5")"
  echo "port $REALNODE_KUBELET_PORT"
  realnode::capstone_config
  realnode::capstone_args "$5" 127.0.0.1 | sed 's/^/arg /'
fi
realnode::containerd_up
sed -n 's/^==> starting \(.*\) (log: .*/version \1/p' "$REALNODE_WORK/containerd-up.log"
echo ready
read -r _ || true
`

// Runtime is a running containerd.
type Runtime struct {
	// Endpoint is its CRI endpoint, unix:///…/containerd.sock, as the
	// kubelet's --container-runtime-endpoint takes it.
	Endpoint string
	// StateDir is the MYKUBELET_STATE_DIR it runs in (containerd/ below it).
	StateDir string
	// Subnet is where its pods' addresses come from.
	Subnet *net.IPNet
	// Bridge is its CNI bridge.
	Bridge string
	// CgroupRoot is the cgroup root made for a kubelet on it.
	CgroupRoot string
	// Version is `containerd --version`'s line, from scripts/containerd.sh up.
	Version string

	// With Config.Node only: the control plane's admin kubeconfig
	// (system:masters), the node's bootstrap kubeconfig (the kubelet's
	// --bootstrap-kubeconfig) and a free port for its kubelet to serve on.
	AdminKubeconfig, BootstrapKubeconfig string
	KubeletPort                          int
	// KubeletArgs is the capstone's command line on this containerd as
	// Config.Node on 127.0.0.1, serving on KubeletPort, its directory in
	// the work directory (realnode::capstone_config, realnode::capstone_args):
	// what scripts/conformance.sh and scripts/realnode-bench.sh start.
	KubeletArgs []string

	env  []string
	root string
}

// Start brings containerd up through scripts/realnode.sh with the offline
// images imported (pause and busybox, scripts/tools/images), and with
// c.Node the control plane, and down when the test ends, failing it if
// anything of it is left: a process of its work directory (containerd,
// etcd, kube-apiserver …), the directory, its bridge, its cgroup root.
func Start(t testing.TB, c Config) *Runtime {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("containerd needs root (mounts, namespaces, cgroups): run the test as root")
	}
	if c.Subnet == "" {
		c.Subnet = DefaultSubnet
	}
	if c.Bridge == "" {
		c.Bridge = DefaultBridge
	}
	if c.Flavor == "" {
		c.Flavor = os.Getenv("MYKUBELET_CONTAINERD")
	}
	if c.CgroupRoot == "" {
		c.CgroupRoot = fmt.Sprintf("/mykubelet-test-%08x", rand.Uint32())
	}
	_, subnet, err := net.ParseCIDR(c.Subnet)
	if err != nil {
		t.Fatalf("testcontainerd: subnet %q: %v", c.Subnet, err)
	}
	logPath := filepath.Join(t.TempDir(), "realnode.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	root := testcluster.RepoRoot(t)
	cmd := exec.Command("bash", "-c", harness, "testcontainerd", root, c.Bridge, c.Subnet, c.CgroupRoot, c.Node)
	cmd.Env = append(os.Environ(), "MYKUBELET_CONTAINERD="+c.Flavor)
	cmd.Stdout, cmd.Stderr = w, logFile
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("bash: %v", err)
	}
	w.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	rt := &Runtime{Subnet: subnet, Bridge: c.Bridge, CgroupRoot: c.CgroupRoot, root: root}
	var work string
	ready := false
	t.Cleanup(func() {
		stdin.Close()
		err := <-exited
		log, _ := os.ReadFile(logPath)
		// Not ready: the set-up failed, and said so already.
		if ready && (err != nil || strings.Contains(string(log), "warning:")) {
			t.Errorf("scripts/realnode.sh's cleanup: %v\n%s", err, log)
		}
		rt.checkGone(t, work)
	})

	for s := bufio.NewScanner(r); s.Scan(); {
		k, v, _ := strings.Cut(s.Text(), " ")
		switch k {
		case "work":
			work = v
		case "kubeconfig":
			rt.AdminKubeconfig = v
		case "bootstrap":
			rt.BootstrapKubeconfig = v
		case "port":
			if rt.KubeletPort, err = strconv.Atoi(v); err != nil {
				t.Fatalf("scripts/realnode.sh: REALNODE_KUBELET_PORT %q: %v", v, err)
			}
		case "arg":
			rt.KubeletArgs = append(rt.KubeletArgs, v)
		case "version":
			rt.Version = strings.TrimSpace(v)
		case "ready":
			ready = true
		}
		if ready {
			break
		}
	}
	if !ready {
		err := <-exited
		exited <- err // the cleanup's
		log, _ := os.ReadFile(logPath)
		if strings.Contains(string(log), "could not install") || strings.Contains(string(log), "no apt-get") {
			t.Skipf("containerd cannot be installed here: %s", lastLine(string(log)))
		}
		t.Fatalf("scripts/realnode.sh: %v\n%s", err, log)
	}
	rt.StateDir = filepath.Join(work, "state")
	rt.Endpoint = "unix://" + filepath.Join(rt.StateDir, "containerd", "containerd.sock")
	rt.env = append(os.Environ(), "MYKUBELET_STATE_DIR="+rt.StateDir, "MYKUBELET_CNI_SUBNET="+c.Subnet,
		"MYKUBELET_CNI_BRIDGE="+c.Bridge, "MYKUBELET_CONTAINERD="+c.Flavor)
	return rt
}

// checkGone fails the test for what the harness's cleanup left behind.
func (rt *Runtime) checkGone(t testing.TB, work string) {
	if work != "" {
		// containerd's, and the control plane's, command lines name their
		// files in the work directory.
		cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, f := range cmdlines {
			if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), work+"/") {
				t.Errorf("a process of %s still runs (pid %s): %s", work, filepath.Base(filepath.Dir(f)), strings.ReplaceAll(string(b), "\x00", " "))
			}
		}
		if _, err := os.Stat(work); !os.IsNotExist(err) {
			t.Errorf("the work directory %s is left (%v)", work, err)
		}
	}
	if _, err := net.InterfaceByName(rt.Bridge); err == nil {
		t.Errorf("the bridge %s is left", rt.Bridge)
	}
	for _, pattern := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/*"} {
		left, _ := filepath.Glob(pattern + rt.CgroupRoot)
		for _, dir := range left {
			t.Errorf("the cgroup %s is left", dir)
		}
	}
}

// Status runs scripts/containerd.sh status.
func (rt *Runtime) Status() (string, error) { return rt.script("status") }

// Down runs scripts/containerd.sh down now (it runs again, harmlessly, when
// the test ends).
func (rt *Runtime) Down() (string, error) { return rt.script("down") }

// Up runs scripts/containerd.sh up again.
func (rt *Runtime) Up() (string, error) { return rt.script("up") }

func (rt *Runtime) script(arg string) (string, error) {
	cmd := exec.Command(filepath.Join(rt.root, "scripts", "containerd.sh"), arg)
	cmd.Env = rt.env
	b, err := cmd.CombinedOutput()
	return string(b), err
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
