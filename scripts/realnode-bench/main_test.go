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
		{[]string{"--short", "--pods", "500"}, "error: --pods (500) cannot be above 110, the nodes' maxPods"}, // a flag wins over --short
		{[]string{"--pods", "", "--short"}, "error: --pods is a whole number above 0 (got '')"},
	} {
		refused(t, script, c.args, c.want)
	}
	out, err := exec.Command(script, "--help").CombinedOutput()
	require.NoError(t, err)
	assert.Equal(t, u+"\n", string(out))
}

// TestConformanceRefusesBadArguments: scripts/conformance.sh, which shares
// the node and the flag parsing (lib.sh's parse_flags) with this script,
// says what is wrong in one line too, before it builds anything.
func TestConformanceRefusesBadArguments(t *testing.T) {
	script := filepath.Join(testcluster.RepoRoot(t), "scripts", "conformance.sh")
	const u = "usage: scripts/conformance.sh [--kubelet capstone|upstream] [--set NodeConformance|conformance] [--focus REGEX] [--short] [--slow] [--procs N] [--timeout DURATION] [--specs all|node|storage] [--build]"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--procs", "0"}, "error: --procs is a whole number above 0 (got '0')"},
		{[]string{"--short", "--procs"}, "error: --procs needs a value (" + u + ")"},
		{[]string{"--kubelet", "kwok"}, "error: --kubelet is capstone or upstream (got 'kwok')"},
		{[]string{"--build", "--specs", "auth"}, "error: --specs is all, node or storage (got 'auth')"},
		{[]string{"--timeout", "soon"}, "error: --timeout is a duration such as 45m or 2h (got 'soon')"},
		{[]string{"--set", "all"}, "error: --set is NodeConformance or conformance (got 'all')"},
		{[]string{"--set", "conformance", "--short"}, "error: --short is a subset of the NodeConformance set; for a few of --set conformance, give --focus"},
		{[]string{"--set", "conformance", "--specs", "node"}, "error: --specs is for the NodeConformance set: --set conformance runs its four directories"},
		{[]string{"--shorter"}, "error: unknown argument '--shorter' (" + u + ")"},
	} {
		refused(t, script, c.args, c.want)
	}
	out, err := exec.Command(script, "-h").CombinedOutput()
	require.NoError(t, err)
	assert.Equal(t, u+"\n", string(out))
}

// refused runs script with args and checks that it printed want, one
// line, and exited 1.
func refused(t *testing.T, script string, args []string, want string) {
	t.Helper()
	out, err := exec.Command(script, args...).CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%v: %s", args, out)
	assert.Equal(t, 1, exit.ExitCode(), args)
	assert.Equal(t, want+"\n", string(out), args)
}
