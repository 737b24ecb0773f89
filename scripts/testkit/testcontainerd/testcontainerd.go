// Package testcontainerd starts a real container runtime for a test:
// containerd, runc and the CNI plugins, through scripts/containerd.sh (up,
// images, down), in a state directory and on a CNI network of the test's
// own, so that it runs beside a learner's (.state/containerd, 10.22.0.0/16).
// Root only: the test is skipped without root, or where containerd cannot
// be installed.
package testcontainerd

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"mykubelet/scripts/testkit/testcluster"
)

// Config chooses the runtime's network; the zero value is DefaultSubnet on
// DefaultBridge. Tests that run at the same time need one each.
type Config struct {
	Subnet string // the pods' addresses (MYKUBELET_CNI_SUBNET)
	Bridge string // the CNI bridge's name, at most 15 bytes (MYKUBELET_CNI_BRIDGE)
	// Flavor is MYKUBELET_CONTAINERD: "debian" (containerd 1.6, apt) or "v2"
	// (built from its module); empty: the test's own MYKUBELET_CONTAINERD.
	Flavor string
}

// The tests' network: neither the learner's 10.22.0.0/16, nor the mock
// runtime's 10.88.0.0/16, nor the control plane's cluster CIDR 10.128.0.0/12.
const (
	DefaultSubnet = "10.24.0.0/24"
	DefaultBridge = "mykubelet-test"
)

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
	// Version is `containerd --version`'s line, from the script's output.
	Version string

	env  []string
	root string
}

// Start brings containerd up with the offline images imported (pause and
// busybox, scripts/tools/images), and down when the test ends.
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
	_, subnet, err := net.ParseCIDR(c.Subnet)
	if err != nil {
		t.Fatalf("testcontainerd: subnet %q: %v", c.Subnet, err)
	}
	r := &Runtime{StateDir: t.TempDir(), Subnet: subnet, Bridge: c.Bridge, root: testcluster.RepoRoot(t)}
	r.Endpoint = "unix://" + filepath.Join(r.StateDir, "containerd", "containerd.sock")
	r.env = append(os.Environ(), "MYKUBELET_STATE_DIR="+r.StateDir, "MYKUBELET_CNI_SUBNET="+c.Subnet,
		"MYKUBELET_CNI_BRIDGE="+c.Bridge, "MYKUBELET_CONTAINERD="+c.Flavor)
	out, err := r.script("up")
	if err != nil {
		if strings.Contains(out, "could not install") || strings.Contains(out, "no apt-get") {
			t.Skipf("containerd cannot be installed here: %s", lastLine(out))
		}
		t.Fatalf("scripts/containerd.sh up: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := r.script("down"); err != nil {
			t.Errorf("scripts/containerd.sh down: %v\n%s", err, out)
		}
	})
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "==> starting "); ok {
			v, _, _ = strings.Cut(v, " (log:")
			r.Version = strings.TrimSpace(v)
		}
	}
	if out, err := r.script("images"); err != nil {
		t.Fatalf("scripts/containerd.sh images: %v\n%s", err, out)
	}
	return r
}

// Status runs scripts/containerd.sh status.
func (r *Runtime) Status() (string, error) { return r.script("status") }

// Down runs scripts/containerd.sh down now (it runs again, harmlessly, when
// the test ends).
func (r *Runtime) Down() (string, error) { return r.script("down") }

// Up runs scripts/containerd.sh up again.
func (r *Runtime) Up() (string, error) { return r.script("up") }

func (r *Runtime) script(arg string) (string, error) {
	cmd := exec.Command(filepath.Join(r.root, "scripts", "containerd.sh"), arg)
	cmd.Env = r.env
	b, err := cmd.CombinedOutput()
	return string(b), err
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
