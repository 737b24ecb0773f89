package readmewalk

import (
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"mykubelet/scripts/testkit/testcluster"
)

// GracePeriod is the node monitor grace period of the walk's cluster: the
// READMEs let a learner wait upstream's 50 s for a node to go NotReady; the
// walk does not wait that long (scripts/cluster.sh reads
// MYKUBELET_NODE_MONITOR_GRACE_PERIOD).
const GracePeriod = 20 * time.Second

// MetricResolution is metrics-server's --metric-resolution in the walk
// (scripts/cluster.sh reads MYKUBELET_METRIC_RESOLUTION): its shortest,
// instead of the manifest's 15 s that the READMEs' waits allow for.
const MetricResolution = 10 * time.Second

// TestWalkTheCourse walks the top-level README and then every chapter's
// README, in order, as one learner on one fresh local cluster: the commands
// as written, in a fresh copy of the repository (so .state starts empty and
// nothing of the checkout is touched), with the cluster's ports (and
// metrics-server's) chosen free.
// What a chapter leaves running or on disk, the next one uses.
//
// WALK_UNTIL=04 stops after chapter 04 (for working on a chapter).
// WALK_ONLY=12 walks the top README, chapters 02 and 03 (the node's
// credentials) and then chapter 12 alone: quicker, but not what CI walks
// (what chapters 04–11 leave behind is missing).
func TestWalkTheCourse(t *testing.T) {
	if testing.Short() {
		t.Skip("walks every chapter against a real control plane")
	}
	root := testcluster.RepoRoot(t)
	dir := filepath.Join(t.TempDir(), "mykubelet")
	copyCheckout(t, root, dir)

	ports := freePorts(t, 6)
	env := cleanEnv(os.Environ(), "MYKUBELET_STATE_DIR", "KUBECONFIG", "NODE_NAME")
	env = append(env,
		"MYKUBELET_ETCD_PORT="+strconv.Itoa(ports[0]),
		"MYKUBELET_ETCD_PEER_PORT="+strconv.Itoa(ports[1]),
		"MYKUBELET_APISERVER_PORT="+strconv.Itoa(ports[2]),
		"MYKUBELET_CONTROLLER_MANAGER_PORT="+strconv.Itoa(ports[3]),
		"MYKUBELET_SCHEDULER_PORT="+strconv.Itoa(ports[4]),
		"MYKUBELET_NODE_MONITOR_GRACE_PERIOD="+GracePeriod.String(),
		// metrics-server, which scripts/cluster.sh up starts for chapter
		// 16: on a free port, scraping as often as it allows.
		"MYKUBELET_METRICS_SERVER_PORT="+strconv.Itoa(ports[5]),
		"MYKUBELET_METRIC_RESOLUTION="+MetricResolution.String(),
	)
	w := NewWalker(dir, t.TempDir(), env, t.Logf)
	t.Cleanup(func() {
		if err := w.StopAll(); err != nil {
			t.Errorf("programs still running at the end: %v", err)
		}
		down := exec.Command(filepath.Join(dir, "scripts", "cluster.sh"), "down")
		down.Env = w.Env
		if out, err := down.CombinedOutput(); err != nil {
			t.Logf("scripts/cluster.sh down: %v\n%s", err, out)
		}
	})

	readmes := []string{"README.md"}
	chapters, err := filepath.Glob(filepath.Join(dir, "chapters", "[0-9][0-9]-*", "README.md"))
	require.NoError(t, err)
	require.NotEmpty(t, chapters)
	until, only := os.Getenv("WALK_UNTIL"), os.Getenv("WALK_ONLY")
	for _, c := range chapters {
		rel, _ := filepath.Rel(dir, c)
		chapter := filepath.Base(filepath.Dir(c))
		if only != "" && !strings.HasPrefix(chapter, only+"-") && !strings.HasPrefix(chapter, "02-") && !strings.HasPrefix(chapter, "03-") {
			continue
		}
		readmes = append(readmes, rel)
		if until != "" && strings.HasPrefix(filepath.Base(filepath.Dir(c)), until+"-") {
			break
		}
	}
	for _, r := range readmes {
		start := time.Now()
		steps, err := os.ReadFile(filepath.Join(dir, r))
		require.NoError(t, err)
		if !strings.Contains(string(steps), "<!-- walk: ") {
			t.Fatalf("%s has no walk steps: mark its commands (scripts/readmewalk/README.md)", r)
		}
		if err := w.Walk(r); err != nil {
			t.Fatalf("%v", err)
		}
		t.Logf("=== %s walked in %s", r, time.Since(start).Round(time.Second))
	}
}

// copyCheckout copies the files git knows (tracked, and new ones not
// ignored), as they are in the working tree, to dst.
func copyCheckout(t *testing.T, root, dst string) {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	require.NoError(t, err, "git ls-files")
	for _, rel := range strings.Split(string(out), "\x00") {
		if rel == "" {
			continue
		}
		src := filepath.Join(root, rel)
		info, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		require.NoError(t, err)
		target := filepath.Join(dst, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(target), 0o755))
		if info.Mode()&fs.ModeSymlink != 0 {
			link, err := os.Readlink(src)
			require.NoError(t, err)
			require.NoError(t, os.Symlink(link, target))
			continue
		}
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(target, b, info.Mode().Perm()))
	}
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func cleanEnv(env []string, drop ...string) []string {
	var out []string
	for _, kv := range env {
		keep := true
		for _, d := range drop {
			if strings.HasPrefix(kv, d+"=") {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}
