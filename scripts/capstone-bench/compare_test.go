package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"mykubelet/scripts/testkit/testcluster"
)

func TestCompareRefusesBadArguments(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "compare: at least one --node is required"},
		{[]string{"--node", "kwok"}, `compare: invalid value "kwok" for flag -node: "kwok" is not LABEL=NODE[:PID] (` + compareUsage + ")"},
		{[]string{"--node", "kwok=n1:x"}, `compare: invalid value "kwok=n1:x" for flag -node: "kwok=n1:x": the PID "x" is not a whole number above 0 (` + compareUsage + ")"},
		{[]string{"--node", "a=n1", "--node", "a=n2"}, `compare: invalid value "a=n2" for flag -node: label "a" given twice (` + compareUsage + ")"},
		{[]string{"--node", "a=n1", "--pods", "0"}, "compare: --pods must be at least 1 (got 0)"},
		{[]string{"--node", "a=n1", "--rounds", "0"}, "compare: --rounds must be at least 1 (got 0)"},
		{[]string{"--node", "a=n1", "--apiserver-pid", "-1"}, "compare: --apiserver-pid must not be negative (got -1)"},
		{[]string{"--node", "a=n1", "--settle", "-1s"}, "compare: --tail and --settle must not be negative"},
		{[]string{"--node", "a=n1", "extra"}, `compare: unexpected argument "extra" (` + compareUsage + ")"},
	} {
		_, err := parseCompare(c.args)
		assert.EqualError(t, err, c.want, c.args)
	}
	kubeconfig, c, isCompare, err := parseCompareCommand([]string{"--kubeconfig", "/k", "compare", "--node", "kwok=n1", "--node", "capstone=n2:42"})
	require.NoError(t, err)
	assert.True(t, isCompare)
	assert.Equal(t, "/k", kubeconfig)
	assert.Equal(t, []contender{{"kwok", "n1", 0}, {"capstone", "n2", 42}}, c.nodes, "in the order given: the first is the reference")
	assert.Equal(t, 100, c.pods)
	assert.Equal(t, 2, c.rounds)
	_, _, isCompare, _ = parseCompareCommand([]string{"startup", "--node", "n1"})
	assert.False(t, isCompare, "startup is the other command")
}

func TestOrderRotatesEachRound(t *testing.T) {
	assert.Equal(t, []int{0, 1, 2, 3}, order(4, 0))
	assert.Equal(t, []int{1, 2, 3, 0}, order(4, 1))
	assert.Equal(t, []int{2, 3, 0, 1}, order(4, 2))
}

func TestSumWritesCountsWriteVerbsByResource(t *testing.T) {
	metrics := `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 100
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 230
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 3
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 2
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="serviceaccounts",scope="resource",subresource="token",verb="POST",version="v1"} 1e+02
apiserver_request_total_other{verb="POST"} 9
`
	w, err := sumWrites([]byte(metrics))
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{"POST pods": 100, "PATCH pods/status": 232, "POST serviceaccounts/token": 100}, w)
	_, err = sumWrites([]byte("process_cpu_seconds_total 3\n"))
	assert.EqualError(t, err, "no apiserver_request_total in the API server's /metrics")
	_, err = sumWrites([]byte(`apiserver_request_total{resource="pods",verb="POST"} many` + "\n"))
	assert.ErrorContains(t, err, `apiserver_request_total: "apiserver_request_total{resource=\"pods\",verb=\"POST\"} many"`)
}

func TestParseProcStat(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	m := parseProcStat("cpu  700 100 150 900 100 20 30 0 0 0")
	assert.Equal(t, machineCPU{busy: 10 * time.Second, total: 20 * time.Second}, m, "busy 700+100+150+20+30 of 2000 ticks")
	assert.Equal(t, machineCPU{}, parseProcStat("cpu0 1 2 3 4 5 6 7 8"), "one core's line, not the sum")
	assert.Equal(t, machineCPU{}, parseProcStat("cpu 1 2 3"), "too short")
	assert.Equal(t, machineCPU{}, parseProcStat("cpu 1 2 x 4 5 6 7 8"))

	later := machineCPU{busy: 13 * time.Second, total: 24 * time.Second}
	assert.Equal(t, machineCPU{busy: 3 * time.Second, total: 4 * time.Second}, later.since(m))
	assert.Equal(t, "75%", later.since(m).busyPercent())
	assert.Equal(t, machineCPU{}, later.since(machineCPU{}), "the start unknown: unknown")
	assert.Equal(t, "—", machineCPU{}.busyPercent())
	assert.Positive(t, readMachineCPU().total, "this machine's /proc/stat")
}

func TestTableRatiosAndPerPodFigures(t *testing.T) {
	ms := func(v ...int) (d []time.Duration) {
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	c := comparison{nodes: []contender{{"kwok", "n1", 0}, {"capstone", "n2", 7}}, pods: 2, rounds: 2, apiserverPID: 1}
	results := [][]sample{
		{
			{lat: ms(100, 200), writes: map[string]float64{"PATCH pods/status": 2}, apiCPU: 40 * time.Millisecond},
			{lat: ms(100, 400), writes: map[string]float64{"PATCH pods/status": 2}, apiCPU: 40 * time.Millisecond},
		},
		{
			{lat: ms(300, 600), writes: map[string]float64{"PATCH pods/status": 4, "POST events": 6}, apiCPU: 80 * time.Millisecond, nodeCPU: 20 * time.Millisecond,
				machine: machineCPU{busy: 1100 * time.Millisecond, total: 1200 * time.Millisecond}},
			{lat: ms(300, 1200), writes: map[string]float64{"PATCH pods/status": 4, "POST events": 6}, apiCPU: 80 * time.Millisecond, nodeCPU: 20 * time.Millisecond,
				machine: machineCPU{busy: 2300 * time.Millisecond, total: 2400 * time.Millisecond}},
		},
	}
	var out bytes.Buffer
	require.NoError(t, c.table(&out, results))
	got := out.String()
	assert.Contains(t, got, "| kwok | 0.10 s | 0.40 s | 0.40 s | 0.20, 0.40 | 1.00× | 1.00 | 0.0200 | — | — | — |", got)
	// The machine: 3.4 of 3.6 CPU-seconds busy over both bursts, 0.85 per pod.
	assert.Contains(t, got, "| capstone | 0.30 s | 1.20 s | 1.20 s | 0.60, 1.20 | 3.00× | 5.00 | 0.0400 | 0.0100 | 94% | 0.8500 |", got)
	assert.Contains(t, got, "  capstone   PATCH pods/status 2.00, POST events 3.00\n", got)
}

// TestStartupBenchRefusesBadArguments: scripts/startup-bench.sh says what
// is wrong in one line and exits 1 before it builds or starts anything.
func TestStartupBenchRefusesBadArguments(t *testing.T) {
	script := filepath.Join(testcluster.RepoRoot(t), "scripts", "startup-bench.sh")
	const u = "usage: scripts/startup-bench.sh [--pods N] [--rounds N] [--nodes kwok,kubemark,capstone,09]"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--pods", "0"}, "error: --pods is a whole number above 0 (got '0')"},
		{[]string{"--rounds", "two"}, "error: --rounds is a whole number above 0 (got 'two')"},
		{[]string{"--pods", "111"}, "error: --pods (111) cannot be above 110, the nodes' --max-pods"},
		{[]string{"--nodes", "kwok,kubelet"}, "error: --nodes: unknown node 'kubelet' (kwok, kubemark, capstone, 09)"},
		{[]string{"--nodes", "kwok,09,kwok"}, "error: --nodes names a node twice: kwok,09,kwok"},
		{[]string{"--nodes", ""}, "error: --nodes names no node (" + u + ")"},
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
	assert.True(t, strings.HasPrefix(string(out), u), string(out))
}
