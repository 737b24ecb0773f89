package main

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"mykubelet/scripts/testkit/testcluster"
)

func TestParse(t *testing.T) {
	o, err := parse([]string{"--node", "n1", "--label", "capstone", "--kubelet-pid", "42"})
	require.NoError(t, err)
	assert.Equal(t, options{node: "n1", label: "capstone", image: "docker.io/library/busybox:1.35.0", kubeletPID: 42,
		pods: 100, rounds: 2, warmUp: 10, timeout: 5 * time.Minute}, o)
	for _, bad := range [][]string{
		{},
		{"--node", "n1", "--kubelet-pid", "42"},
		{"--node", "n1", "--label", "x"},
		{"--node", "n1", "--label", "x", "--kubelet-pid", "42", "--pods", "0"},
		{"--node", "n1", "--label", "x", "--kubelet-pid", "42", "--warm-up", "-1"},
		{"--node", "n1", "--label", "x", "--kubelet-pid", "42", "extra"},
		{"--pods", "many"},
	} {
		_, err := parse(bad)
		assert.Error(t, err, "%q", bad)
	}
}

// TestScriptRefusesBadArguments: scripts/realnode-bench.sh says what is
// wrong in one line and exits 1 before it builds or starts anything.
func TestScriptRefusesBadArguments(t *testing.T) {
	script := filepath.Join(testcluster.RepoRoot(t), "scripts", "realnode-bench.sh")
	const u = "usage: scripts/realnode-bench.sh [--pods N] [--rounds N] [--warm-up N] [--kubelets capstone,upstream] [--short]"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--pods", "0"}, "error: --pods is a whole number above 0 (got '0')"},
		{[]string{"--rounds", "two"}, "error: --rounds is a whole number above 0 (got 'two')"},
		{[]string{"--warm-up", "-1"}, "error: --warm-up is a whole number (got '-1')"},
		{[]string{"--pods", "111"}, "error: --pods (111) cannot be above 110, the nodes' maxPods"},
		{[]string{"--kubelets", "capstone,kwok"}, "error: --kubelets: unknown kubelet 'kwok' (capstone, upstream)"},
		{[]string{"--kubelets", "upstream,upstream"}, "error: --kubelets names a kubelet twice: upstream,upstream"},
		{[]string{"--kubelets", ""}, "error: --kubelets names no kubelet (" + u + ")"},
		{[]string{"--pods"}, "error: --pods needs a value (" + u + ")"},
		{[]string{"--fast"}, "error: unknown argument '--fast' (" + u + ")"},
	} {
		out, err := exec.Command(script, c.args...).CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%v: %s", c.args, out)
		assert.Equal(t, 1, exit.ExitCode(), c.args)
		assert.Equal(t, c.want+"\n", string(out), c.args)
	}
	out, err := exec.Command(script, "--help").CombinedOutput()
	require.NoError(t, err)
	assert.Equal(t, u+"\n", string(out))
}
