package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"mykubelet/scripts/testkit/localcluster"
	"mykubelet/scripts/testkit/testcluster"
)

// clusterSh runs scripts/cluster.sh with a state dir and ports of its own.
type clusterSh struct {
	t   *testing.T
	env []string
}

func (c clusterSh) run(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(testcluster.RepoRoot(c.t), "scripts", "cluster.sh"), args...)
	cmd.Env = append(os.Environ(), c.env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestClusterScript drives scripts/cluster.sh as a learner does: up, a
// harmless second up, kubectl get --raw /readyz, the metrics API through
// metrics-server, status, down, and checks that down leaves no process
// behind.
func TestClusterScript(t *testing.T) {
	state := t.TempDir()
	p := testcluster.FreePorts(t, 5)
	sh := clusterSh{t: t, env: []string{
		"MYKUBELET_STATE_DIR=" + state,
		"MYKUBELET_ETCD_PORT=" + strconv.Itoa(p[0]), "MYKUBELET_ETCD_PEER_PORT=" + strconv.Itoa(p[1]),
		"MYKUBELET_APISERVER_PORT=" + strconv.Itoa(p[2]), "MYKUBELET_CONTROLLER_MANAGER_PORT=" + strconv.Itoa(p[3]),
		"MYKUBELET_SCHEDULER_PORT=" + strconv.Itoa(p[4]),
		// No MYKUBELET_METRICS_SERVER_PORT: with the other ports moved,
		// metrics-server gets a free one, not the learner's 4443.
		"MYKUBELET_METRIC_RESOLUTION=10s",
	}}
	dir := filepath.Join(state, "cluster")
	t.Cleanup(func() { _, _ = localcluster.Down(dir) })

	out, err := sh.run("up")
	require.NoError(t, err, out)
	require.Contains(t, out, "the local cluster is ready at https://127.0.0.1:"+strconv.Itoa(p[2]))
	m := regexp.MustCompile(`metrics-server serves v1beta1\.metrics\.k8s\.io at https://127\.0\.0\.1:(\d+)\n`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	require.NotEqual(t, strconv.Itoa(localcluster.DefaultMetricsServerPort), m[1])

	info, err := os.Stat(filepath.Join(dir, "admin.kubeconfig"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the admin kubeconfig must be mode 0600")
	for _, f := range []string{"pki/ca.key", "pki/admin.key", "pki/sa.key"} {
		info, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), f)
	}

	env, err := sh.run("env")
	require.NoError(t, err, env)
	kubectl := func(args string) string {
		cmd := exec.Command("bash", "-c", env+"\nkubectl "+args)
		cmd.Env = append(os.Environ(), sh.env...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "kubectl %s: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	require.Equal(t, "ok", kubectl("get --raw /readyz"))
	// up waits for the APIService; the metrics API answers (no nodes yet).
	require.Equal(t, "True", kubectl(`get apiservice v1beta1.metrics.k8s.io -o jsonpath='{.status.conditions[?(@.type=="Available")].status}'`))
	require.Contains(t, kubectl("get --raw /apis/metrics.k8s.io/v1beta1/nodes"), `"kind":"NodeMetricsList"`)

	out, err = sh.run("up")
	require.NoError(t, err, out)
	require.Contains(t, out, "already running")

	out, err = sh.run("status")
	require.NoError(t, err, out)
	require.Regexp(t, `v1beta1\.metrics\.k8s\.io +Available=True`, out)
	var pids []int
	states := localcluster.Status(dir)
	require.Len(t, states, len(localcluster.Components)+1, "and metrics-server: %s", out)
	for _, s := range states {
		require.True(t, s.Running, "%s should run: %s", s.Name, out)
		require.Contains(t, out, s.Name+" ")
		pids = append(pids, s.Pid)
	}

	// A second cluster on the same ports is refused with one clear line.
	other := clusterSh{t: t, env: append(append([]string{}, sh.env...), "MYKUBELET_STATE_DIR="+t.TempDir())}
	out, err = other.run("up")
	require.Error(t, err)
	require.Regexp(t, `error: port \d+ for etcd client is taken`, out)

	out, err = sh.run("down")
	require.NoError(t, err, out)
	require.Contains(t, out, "stopped metrics-server, kube-scheduler, kube-controller-manager, kube-apiserver, etcd")
	for _, pid := range pids {
		require.False(t, localcluster.Alive(pid), "pid %d still runs after down", pid)
	}
	out, err = sh.run("status")
	require.Error(t, err, "status must fail when the cluster is down")
	require.Contains(t, out, "not running")

	out, err = sh.run("down")
	require.NoError(t, err, out)
	require.Contains(t, out, "not running")

	out, err = sh.run("bogus")
	require.Error(t, err)
	require.Contains(t, out, "usage: scripts/cluster.sh")
}
