package readmewalk

import (
	"fmt"
	"io/fs"
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

// WalkGoFlags is the walks' one setting a learner does not have: the copy
// of the checkout is in a new directory each time, and Go's build cache
// keys a package built without -trimpath by its directory, so each walk
// (and TestWalkOnAnotherCluster's, beside it) would compile the course
// anew: minutes of both cores. With -trimpath, builds of the same sources
// are the build cache's, whatever the copy's directory. What the course's
// programs do is the same: the mock runtime finds its module from the
// working directory (fakeruntime.moduleDir), where `go run ./chapters/…`
// runs.
const WalkGoFlags = "GOFLAGS=-trimpath"

// TestWalkTheCourse runs scripts/tour.sh, the README's own command, which
// walks the top-level README and then every chapter's README, in order, as
// one learner on one fresh local cluster: the commands as written, in a
// fresh copy of the repository (so .state starts empty and nothing of the
// checkout is touched), with the cluster's ports (and metrics-server's)
// chosen free. What a chapter leaves running or on disk, the next one uses.
// The tour is the walk: there is no second telling to run.
//
// WALK_CHAPTERS="12" walks README.md, what chapter 12 needs, then 12
// (scripts/tour.sh 12): quicker, for working on a chapter, but not what CI
// walks. MYKUBELET_PHASE_LOG names a file that gets a line per README with
// the time its walk took (scripts/test.sh prints it).
func TestWalkTheCourse(t *testing.T) {
	if testing.Short() {
		t.Skip("walks every chapter against a real control plane")
	}
	// Parallel, as TestWalkOnAnotherCluster is: a parallel test waits for
	// every test that is not to end, so with this one not parallel the
	// other walk began only after it (some 10 minutes more in CI).
	t.Parallel()
	root := testcluster.RepoRoot(t)
	dir := filepath.Join(t.TempDir(), "mykubelet")
	copyCheckout(t, root, dir)

	ports := testcluster.FreePorts(t, 6)
	env := cleanEnv(os.Environ(), "MYKUBELET_STATE_DIR", "KUBECONFIG", "NODE_NAME", "TMPDIR", "GOFLAGS")
	env = append(env,
		WalkGoFlags,
		"TMPDIR="+t.TempDir(),
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
	t.Cleanup(func() {
		// Chapter 19's containerd, if a failed walk left it running (root
		// only; without it, nothing to do): its pods, mounts and bridge.
		if _, err := os.Stat(filepath.Join(dir, ".state", "containerd", "config.toml")); err == nil && os.Geteuid() == 0 {
			down := exec.Command(filepath.Join(dir, "scripts", "containerd.sh"), "down")
			down.Dir = dir
			down.Env = env
			if out, err := down.CombinedOutput(); err != nil {
				t.Logf("scripts/containerd.sh down: %v\n%s", err, out)
			}
		}
		down := exec.Command(filepath.Join(dir, "scripts", "cluster.sh"), "down")
		down.Dir = dir
		down.Env = env
		if out, err := down.CombinedOutput(); err != nil {
			t.Logf("scripts/cluster.sh down: %v\n%s", err, out)
		}
	})

	logFile := filepath.Join(t.TempDir(), "tour.out")
	out, err := os.Create(logFile)
	require.NoError(t, err)
	defer out.Close()
	tour := exec.Command(filepath.Join(dir, "scripts", "tour.sh"), strings.Fields(os.Getenv("WALK_CHAPTERS"))...)
	tour.Dir = dir
	tour.Env = env
	tour.Stdout, tour.Stderr = out, out
	start := time.Now()
	err = tour.Run()
	printed, _ := os.ReadFile(logFile)
	recordPhases(t, string(printed))
	if err != nil {
		// The whole transcript is long: the tour's own account of the
		// failure first (a view that cuts the middle still shows it),
		// then the transcript's end.
		t.Fatalf("scripts/tour.sh failed after %s: %v\n%s\n%s", time.Since(start).Round(time.Second), err,
			tourFailure(string(printed)), lastLines(string(printed), 150))
	}
	readmes, err := Plan(dir, strings.Fields(os.Getenv("WALK_CHAPTERS")))
	require.NoError(t, err)
	for _, r := range readmes {
		require.Contains(t, string(printed), "=== "+r+" walked in", "the tour did not walk %s", r)
	}
	require.Contains(t, string(printed), fmt.Sprintf("=== Done: %d READMEs walked", len(readmes)))
}

// tourFailure is what the tour printed about its failure: its lines that
// start with "tour: failed in" (the step and its error), or a line saying
// there is none.
func tourFailure(printed string) string {
	var lines []string
	for _, l := range strings.Split(printed, "\n") {
		if strings.HasPrefix(l, "tour: failed in ") {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return "(the tour printed no \"tour: failed in\" line)"
	}
	return strings.Join(lines, "\n")
}

// recordPhases logs how long each README's walk took and, when
// MYKUBELET_PHASE_LOG is set, appends those lines to that file.
func recordPhases(t *testing.T, printed string) {
	var lines []string
	for _, l := range strings.Split(printed, "\n") {
		if strings.HasPrefix(l, "=== ") && strings.Contains(l, " walked in ") {
			lines = append(lines, "walk: "+strings.TrimPrefix(l, "=== "))
		}
	}
	t.Logf("%s", strings.Join(lines, "\n"))
	if f := os.Getenv("MYKUBELET_PHASE_LOG"); f != "" && len(lines) > 0 {
		if fh, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			_, _ = fmt.Fprintln(fh, strings.Join(lines, "\n"))
			_ = fh.Close()
		}
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
