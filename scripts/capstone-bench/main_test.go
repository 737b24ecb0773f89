package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"mykubelet/scripts/testkit/testcluster"
)

// TestScriptRefusesBadArguments: scripts/capstone-bench.sh says what is
// wrong in one line and exits 1 before it builds or starts anything.
func TestScriptRefusesBadArguments(t *testing.T) {
	script := filepath.Join(testcluster.RepoRoot(t), "scripts", "capstone-bench.sh")
	notExec := filepath.Join(t.TempDir(), "mykubelet")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-pods", "0"}, "error: --max-pods is a whole number above 0 (got '0')"},
		{[]string{"--idle", "1m"}, "error: --idle is a whole number above 0 (got '1m')"},
		{[]string{"--burst", "-3"}, "error: --burst is a whole number above 0 (got '-3')"},
		{[]string{"--max-pods", "30"}, "error: --burst (100) cannot be above --max-pods (30): the node would reject the rest (OutOfpods)"},
		{[]string{"--binary"}, "error: --binary needs a value (usage: scripts/capstone-bench.sh [--binary PATH] [--max-pods N] [--burst N] [--idle SECONDS] [--baseline SECONDS])"},
		{[]string{"--binary", notExec}, "error: --binary " + notExec + " is not an executable file"},
		{[]string{"--fast"}, "error: unknown argument '--fast' (usage: scripts/capstone-bench.sh [--binary PATH] [--max-pods N] [--burst N] [--idle SECONDS] [--baseline SECONDS])"},
	} {
		start := time.Now()
		out, err := exec.Command(script, c.args...).CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%v: %s", c.args, out)
		assert.Equal(t, 1, exit.ExitCode(), c.args)
		assert.Equal(t, c.want+"\n", string(out), c.args)
		t.Logf("%v refused in %s", c.args, time.Since(start).Round(time.Millisecond))
	}
	out, err := exec.Command(script, "--help").CombinedOutput()
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(out), "usage: scripts/capstone-bench.sh "), string(out))
}

func TestHelperRefusesBadArguments(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, usage},
		{[]string{"burst"}, usage},
		{[]string{"startup"}, "startup: --node is required"},
		{[]string{"startup", "--node", "n1", "--pods", "0"}, "startup: --pods must be at least 1 (got 0)"},
		{[]string{"startup", "--node", "n1", "--timeout", "0s"}, "startup: --timeout must be positive (got 0s)"},
		{[]string{"startup", "--node", "n1", "--label", "Big_One"}, `startup: --label "Big_One": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		{[]string{"startup", "--node", "n1", "extra"}, `startup: unexpected argument "extra" (` + usage + ")"},
	} {
		_, _, err := parse(c.args)
		assert.EqualError(t, err, c.want, c.args)
	}
	_, b, err := parse([]string{"startup", "--node", "n1"})
	require.NoError(t, err)
	assert.Equal(t, burst{node: "n1", label: "burst", pods: 100, timeout: 5 * time.Minute}, b, "defaults: a burst of 100, as SIG Scalability's and chapter 09's figure")
}
