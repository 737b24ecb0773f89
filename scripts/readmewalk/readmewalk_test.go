package readmewalk

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const sample = "# A chapter\n\n" +
	"<!-- walk: run -->\n```sh\nexport GREETING=hello   # set once\n```\n\n" +
	"A prose example stays prose:\n\n```sh\nrm -rf /\n```\n\n" +
	"<!-- walk: background name=prog ready=\"^started\" -->\n```sh\n" +
	"bash -c 'trap \"echo stopped; exit 0\" INT; echo started; echo oops >&2; sleep 0.5; echo \"$GREETING world\"; while :; do sleep 0.1; done'\n```\n\n" +
	"<!-- walk: wait name=prog for=\"oops\" -->\n" +
	"<!-- walk: expect name=prog -->\n```\nstarted\n<greeting> world\n…\nstopped\n```\n\n" +
	"<!-- walk: run -->\n```console\n$ echo \"$GREETING from $NODE_NAME\"\nhello from <node-name>\n$ printf 'NAME   AGE\\nx      3s\\n'\nNAME  AGE\nx     12m\n```\n\n" +
	"<!-- walk: wait name=prog for=\"world\" -->\n" +
	"<!-- walk: ctrl-c name=prog -->\n" +
	"<!-- walk: skip reason=\"not here\" -->\n```sh\nfalse\n```\n" +
	"<!-- walk: run -->\n```sh\necho one; echo two\n```\n<!-- walk: expect -->\n```\none\ntwo\n```\n" +
	"1. In a list:\n\n   <!-- walk: background name=short -->\n   ```console\n   $ sleep 0.5; echo done\n   done\n   ```\n<!-- walk: wait name=short exit -->\n<!-- walk: expect name=short -->\n```\ndone\n```\n"

func TestParseFindsOnlyMarkedBlocks(t *testing.T) {
	steps, err := Parse(sample)
	require.NoError(t, err)
	var actions []Action
	for _, s := range steps {
		actions = append(actions, s.Action)
	}
	require.Equal(t, []Action{Run, Background, Wait, Expect, Run, Wait, CtrlC, Skip, Run, Expect, Background, Wait, Expect}, actions)
	require.Equal(t, "^started", steps[1].Attrs["ready"])
	require.Equal(t, "not here", steps[7].Attrs["reason"])
	require.Equal(t, []string{"false"}, steps[7].Block)
}

func TestParseRejectsBadMarkers(t *testing.T) {
	for _, md := range []string{
		"<!-- walk: jump -->\n```sh\nx\n```\n",
		"<!-- walk: run -->\nno block\n",
		"<!-- walk: background -->\n```sh\nx\n```\n",
		"<!-- walk: skip -->\n```sh\nx\n```\n",
		"<!-- walk: wait name=a -->\n",
		"<!-- walk: run =bad -->\n```sh\nx\n```\n",
	} {
		_, err := Parse(md)
		require.Error(t, err, md)
	}
}

func TestCommandsJoinsContinuationsAndDropsComments(t *testing.T) {
	require.Equal(t, []string{"a \\\n  b", "c # note"}, Commands([]string{"# a comment", "", "a \\", "  b", "c # note"}))
}

func TestMatch(t *testing.T) {
	m := Matcher{NodeName: "walker"}
	ok := []struct {
		exp  []string
		out  string
		ages bool
	}{
		{[]string{"node <node-name>: created"}, "node walker: created\n", false},
		{[]string{"a", "…", "z"}, "a\nb\nc\nz\n", false},
		{[]string{"a", "…", "z"}, "a\nz\n", false},
		{[]string{"rbac: <created|unchanged> x"}, "rbac: unchanged x", false},
		{[]string{"NAME   AGE", "<node-name>   12s"}, "NAME     AGE\nwalker   5m3s\n", true},
		{[]string{"uid 6f1c2d3e-1111-2222-3333-444455556666 at 2026-01-02T03:04:05Z"}, "uid 0a1b2c3d-aaaa-bbbb-cccc-ddddeeeeffff at 2026-11-22T19:00:00.5Z", false},
		{[]string{"Extra: X509SHA256=…"}, "Extra: X509SHA256=abc", false},
		{[]string{"hello   Running   10.128.0.2   n1"}, "hello Running 10.88.0.7 n1", false},
		{[]string{"podCIDR 10.128.0.0/24"}, "podCIDR 10.128.3.0/24", false},
	}
	for _, c := range ok {
		require.NoError(t, m.Match(c.exp, c.out, c.ages), "%q vs %q", c.exp, c.out)
	}
	bad := []struct {
		exp []string
		out string
	}{
		{[]string{"node <node-name>: created"}, "node other: created"},
		{[]string{"a", "z"}, "a\nb\nz"},
		{[]string{"a"}, "a\nextra"},
		{[]string{"rbac: <created|unchanged> x"}, "rbac: deleted x"},
		{[]string{"NAME AGE", "x 12s"}, "NAME AGE\nx 12s extra"},
		{[]string{"a", "…"}, "b"},
		{[]string{"hello   Running   10.128.0.2   n1"}, "hello Running 192.168.1.2 n1"},
		{[]string{"podCIDR 10.128.0.0/24"}, "podCIDR 10.128.3.0/16"},
	}
	for _, c := range bad {
		require.Error(t, m.Match(c.exp, c.out, false), "%q vs %q", c.exp, c.out)
	}
}

func walkSample(t *testing.T, md string) error {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte(md), 0o600))
	w := NewWalker(dir, t.TempDir(), append(os.Environ(), "NODE_NAME=walker"), t.Logf)
	t.Cleanup(func() { _ = w.StopAll() })
	return w.Walk("README.md")
}

// TestWalkRunsTheMarkedSteps walks a README with every marker: an export
// kept for later commands, a program in the background, its output checked
// after Ctrl-C, a transcript checked line by line.
func TestWalkRunsTheMarkedSteps(t *testing.T) {
	require.NoError(t, walkSample(t, sample))
}

// The walk fails when the README and the commands disagree.
func TestWalkFailsWhenTheREADMEIsWrong(t *testing.T) {
	for what, mutated := range map[string]string{
		"transcript output":        strings.Replace(sample, "hello from <node-name>", "hi from <node-name>", 1),
		"background output":        strings.Replace(sample, "\nstopped\n```", "\nbye\n```", 1),
		"a failing command":        strings.Replace(sample, "export GREETING=hello", "export GREETING=hello; false", 1),
		"a missing program":        strings.Replace(sample, "<!-- walk: ctrl-c name=prog -->", "<!-- walk: ctrl-c name=other -->", 1),
		"a command's output":       strings.Replace(sample, "one\ntwo\n```", "one\n2\n```", 1),
		"a program's last line":    strings.Replace(sample, "   $ sleep 0.5; echo done\n   done", "   $ sleep 0.5; echo done\n   finished", 1),
		"an expect after the stop": strings.Replace(sample, "exit -->\n<!-- walk: expect name=short -->\n```\ndone\n", "exit -->\n<!-- walk: expect name=short -->\n```\nnot done\n", 1),
		"a line never seen":        strings.Replace(sample, `for="world"`, `for="planet" timeout=1s`, 1),
	} {
		err := walkSample(t, mutated)
		require.Error(t, err, what)
		t.Logf("%s: %v", what, err)
	}
}

// TestLocalAndExternalStepsRunOnTheirClusterOnly: a step marked local runs
// only on the local control plane, one marked external only with
// KUBECONFIG naming another cluster (Walker.External); the same README
// holds on both, each showing what its kind of cluster prints. A step
// cannot be both.
func TestLocalAndExternalStepsRunOnTheirClusterOnly(t *testing.T) {
	md := "<!-- walk: run local -->\n```console\n$ echo \"$CLUSTER\"\nlocal\n```\n" +
		"<!-- walk: run external -->\n```console\n$ echo \"$CLUSTER\"\nkind\n```\n" +
		"<!-- walk: run -->\n```sh\necho \"$CLUSTER\" >>ran\n```\n"
	for _, c := range []struct {
		cluster  string
		external bool
		skipped  string
	}{
		{"local", false, "(not run here: on another cluster only, with KUBECONFIG set; this tour uses the local control plane)"},
		{"kind", true, "(not run here: on the local control plane only; this tour uses KUBECONFIG=kind.kubeconfig)"},
	} {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte(md), 0o600))
		w := NewWalker(dir, t.TempDir(), append(os.Environ(), "CLUSTER="+c.cluster, "KUBECONFIG=kind.kubeconfig"), t.Logf)
		w.External = c.external
		var out strings.Builder
		w.Out = &out
		require.NoError(t, w.Walk("README.md"), c.cluster)
		require.Contains(t, out.String(), c.skipped, c.cluster)
		ran, err := os.ReadFile(filepath.Join(dir, "ran"))
		require.NoError(t, err)
		require.Equal(t, c.cluster+"\n", string(ran), "the unmarked step runs on every cluster")

		// The other cluster's step, run here, would fail: it is skipped.
		w = NewWalker(dir, t.TempDir(), append(os.Environ(), "CLUSTER="+c.cluster), t.Logf)
		w.External = !c.external
		require.Error(t, w.Walk("README.md"), c.cluster)
	}
	_, err := Parse("<!-- walk: run local external -->\n```sh\ntrue\n```\n")
	require.ErrorContains(t, err, "local or external, not both")
}

// The environment a README exports is there for the next README, as in a
// learner's terminal.
func TestWalkKeepsTheEnvironmentAcrossREADMEs(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.md"), []byte("<!-- walk: run -->\n```sh\nexport KEPT=yes\n```\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.md"), []byte("<!-- walk: run -->\n```console\n$ echo $KEPT\nyes\n```\n"), 0o600))
	w := NewWalker(dir, t.TempDir(), os.Environ(), t.Logf)
	require.NoError(t, w.Walk("a.md"))
	require.NoError(t, w.Walk("b.md"))
}

// TestEveryREADMEParses checks, without a cluster, what the walk would
// find first: every README's markers parse, and each wait, expect and
// ctrl-c names a program a background step of the same README started
// before it (or, for expect and ctrl-c, an earlier README: a learner's
// terminal keeps it running), and none is started twice while it runs.
func TestEveryREADMEParses(t *testing.T) {
	root := filepath.Join("..", "..")
	chapters, err := filepath.Glob(filepath.Join(root, "chapters", "[0-9][0-9]-*", "README.md"))
	require.NoError(t, err)
	require.NotEmpty(t, chapters)
	running := map[string]bool{}
	for _, r := range append([]string{filepath.Join(root, "README.md")}, chapters...) {
		md, err := os.ReadFile(r)
		require.NoError(t, err)
		steps, err := Parse(string(md))
		require.NoError(t, err, r)
		for _, st := range steps {
			where := fmt.Sprintf("%s:%d", r, st.Line)
			switch st.Action {
			case Background:
				require.False(t, running[st.Name()], "%s: %q is started while it still runs", where, st.Name())
				running[st.Name()] = true
			case Wait:
				require.True(t, running[st.Name()], "%s: waits for %q, which is not running", where, st.Name())
				if st.Attrs["exit"] == "true" {
					running[st.Name()] = false
				}
			case CtrlC:
				require.True(t, running[st.Name()], "%s: Ctrl-C in %q, which is not running", where, st.Name())
				running[st.Name()] = false
			case Run, Skip:
				require.NotEmpty(t, st.Block, "%s: a %s step without a block", where, st.Action)
			}
		}
	}
}

func TestTourFailureIsTheTourOwnLine(t *testing.T) {
	printed := "=== README.md\n$ kubectl get pods\nlong output\ntour: failed in chapters/13-mykubelet/README.md: line 398: the output differs\nmore logs\n"
	require.Equal(t, "tour: failed in chapters/13-mykubelet/README.md: line 398: the output differs", tourFailure(printed))
	require.Contains(t, tourFailure("=== README.md walked in 3s\n"), "no \"tour: failed in\" line")
}
