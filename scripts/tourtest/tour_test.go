// Package tourtest runs the README's main command, scripts/tour.sh, against a
// real control plane, so the tutorial a learner follows end to end is tested
// end to end.
package tourtest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"mykubelet/scripts/testkit/localcluster"
	"mykubelet/scripts/testkit/testcluster"
)

func TestTourRunsEveryChapter(t *testing.T) {
	root := testcluster.RepoRoot(t)
	tours, err := filepath.Glob(filepath.Join(root, "chapters", "[0-9][0-9]-*", "tour.sh"))
	require.NoError(t, err)
	require.NotEmpty(t, tours, "no chapter has a tour.sh")

	// A short grace period so chapter 01 can show a node going NotReady
	// quickly; metrics-server for chapter 16's `kubectl top` and HPA.
	c := testcluster.Start(t, testcluster.WithNodeMonitorGracePeriod(20*time.Second), localcluster.WithMetricsServer())
	cmd := exec.Command(filepath.Join(root, "scripts", "tour.sh"))
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+c.AdminKubeconfig,
		"MYKUBELET_STATE_DIR="+t.TempDir(),
		"NODE_NAME=tour-node",
		"MYKUBELET_NODE_MONITOR_GRACE_PERIOD=20s",
		// Not the default 10255: scripts/readmewalk walks the READMEs, which
		// use it, perhaps at the same time.
		"MYKUBELET_DEBUG_PORT="+strconv.Itoa(freePort(t)),
		// Nor the kubelet API's 10250, for the same reason: chapters 12,
		// 13 and 15 serve it, in the walk and in the tour.
		"MYKUBELET_KUBELET_PORT="+strconv.Itoa(freePort(t)),
		"PATH="+testcluster.BinDir()+string(os.PathListSeparator)+os.Getenv("PATH"),
	)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("tour took %s", time.Since(start).Round(time.Second))
	require.NoError(t, err, "scripts/tour.sh failed:\n%s", out)

	for _, tour := range tours {
		slug := filepath.Base(filepath.Dir(tour))
		require.Contains(t, string(out), "=== Chapter "+slug, "the tour skipped chapter %s", slug)
	}
	m := regexp.MustCompile(`=== Done: (\d+) chapters\.`).FindSubmatch(out)
	require.NotNil(t, m, "the tour did not finish:\n%s", out)
	n, _ := strconv.Atoi(string(m[1]))
	require.Equal(t, len(tours), n)
}

func TestTourRefusesAnUnknownChapter(t *testing.T) {
	root := testcluster.RepoRoot(t)
	out, err := exec.Command(filepath.Join(root, "scripts", "tour.sh"), "99").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "there is no chapter 99")
	out, err = exec.Command(filepath.Join(root, "scripts", "tour.sh"), "one").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "chapters are named by their two digits")
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
