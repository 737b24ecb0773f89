package readmewalk

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"mykubelet/scripts/testkit/testcluster"
)

// A course of its own, no cluster: the tour command (scripts/tour.sh's
// engine) run in a directory that holds only READMEs.
var course = map[string]string{
	"README.md": "# Course\n\n<!-- walk: run local -->\n```sh\ntouch started-a-cluster\n```\n\n" +
		"<!-- walk: run -->\n```sh\nexport GREETING=hello\n```\n",
	"chapters/01-first/README.md": "# 01\n\n## Run\n\n<!-- walk: run -->\n```console\n$ echo \"$GREETING one\"\nhello one\n```\n\n" +
		"<!-- walk: observe -->\nThe greeting came from the\ntop README's terminal.\n\n" +
		"<!-- walk: background name=prog ready=\"^up\" -->\n```sh\nbash -c 'trap \"echo down; exit 0\" INT; echo up; echo $$ > prog.pid; while :; do sleep 0.1; done'\n```\n\n" +
		"## Stop\n\n<!-- walk: ctrl-c name=prog -->\n",
	"chapters/02-second/README.md": "# 02\n\n## Where to run\n\n<!-- walk: needs chapters=\"01\" -->\n\n<!-- walk: run -->\n```sh\necho second chapter\n```\n",
	"chapters/03-third/README.md":  "# 03\n\n<!-- walk: run -->\n```sh\necho third chapter\n```\n",
}

func writeCourse(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return dir
}

func runTour(t *testing.T, bin, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(os.Environ(), "KUBECONFIG", "TMPDIR", "GREETING", "MYKUBELET_STATE_DIR"), append([]string{"TMPDIR=" + dir}, env...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestTourRunsTheBlocksTheWalkRuns: every command the walk would run is
// printed by the tour, in order, with its output; the observe paragraph is
// printed; a block added to a README shows up in the next tour.
func TestTourRunsTheBlocksTheWalkRuns(t *testing.T) {
	bin := testcluster.BuildChapter(t, "./scripts/readmewalk/tour")
	dir := writeCourse(t, course)
	check := func() string {
		out, err := runTour(t, bin, dir, nil)
		require.NoError(t, err, out)
		readmes, err := Plan(dir, nil)
		require.NoError(t, err)
		require.Equal(t, []string{"README.md", "chapters/01-first/README.md", "chapters/02-second/README.md", "chapters/03-third/README.md"}, readmes)
		pos := 0
		for _, r := range readmes {
			md, err := os.ReadFile(filepath.Join(dir, r))
			require.NoError(t, err)
			steps, err := Parse(string(md))
			require.NoError(t, err)
			for _, st := range steps {
				var cmds []string
				switch {
				case st.Action == Run && IsConsole(st.Block):
					for _, cc := range Console(st.Block) {
						cmds = append(cmds, cc.Command)
					}
				case st.Action == Run || st.Action == Background:
					cmds = Commands(st.Block)
				}
				for _, c := range cmds {
					i := strings.Index(out[pos:], "$ "+c)
					require.GreaterOrEqual(t, i, 0, "%s: the tour did not print %q after position %d:\n%s", r, c, pos, out)
					pos += i
				}
			}
			require.Contains(t, out, "=== "+r+" walked in")
		}
		return out
	}
	out := check()
	assert.Contains(t, out, "  hello one", "a command's output is printed under it")
	assert.Contains(t, out, "  observe: The greeting came from the top README's terminal.")
	assert.Contains(t, out, "--- Stop", "the README's headings are printed")
	assert.Contains(t, out, "^C   (in the terminal of prog)")
	assert.Contains(t, out, "=== Done: 4 READMEs walked")
	assert.FileExists(t, filepath.Join(dir, "started-a-cluster"), "without KUBECONFIG the local steps run")

	// A block added to a README is in the next tour.
	c := course["chapters/03-third/README.md"] + "\n<!-- walk: run -->\n```sh\necho a block added later\n```\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "chapters/03-third/README.md"), []byte(c), 0o644))
	out = check()
	assert.Contains(t, out, "$ echo a block added later\n  a block added later")
}

func TestTourOfSomeChaptersWalksWhatTheyNeed(t *testing.T) {
	dir := writeCourse(t, course)
	plan, err := Plan(dir, []string{"02"})
	require.NoError(t, err)
	require.Equal(t, []string{"README.md", "chapters/01-first/README.md", "chapters/02-second/README.md"}, plan)
	plan, err = Plan(dir, []string{"03", "01"})
	require.NoError(t, err)
	require.Equal(t, []string{"README.md", "chapters/01-first/README.md", "chapters/03-third/README.md"}, plan)

	_, err = Plan(dir, []string{"99"})
	require.ErrorContains(t, err, "there is no chapter 99")
	_, err = Plan(dir, []string{"one"})
	require.ErrorContains(t, err, "chapters are named by their two digits")

	bad := writeCourse(t, map[string]string{
		"README.md":               "# x\n",
		"chapters/01-a/README.md": "<!-- walk: needs chapters=\"02\" -->\n",
		"chapters/02-b/README.md": "# b\n",
		"chapters/03-c/README.md": "<!-- walk: needs chapters=\"07\" -->\n",
		"chapters/04-d/README.md": "<!-- walk: needs chapters=\"x1\" -->\n",
		"chapters/05-e/README.md": "<!-- walk: needs -->\n",
		"chapters/06-f/README.md": "<!-- walk: observe -->\n\n## no paragraph\n",
		"chapters/07-g/README.md": "# g\n",
	})
	for n, want := range map[string]string{
		"01": "needs chapter 02, which comes after it",
		"03": "walk: needs chapter 07, which comes after it",
		"04": "want two-digit chapter numbers",
		"05": "needs chapters=",
		"06": "observe is not followed by a paragraph",
	} {
		_, err := Plan(bad, []string{n})
		assert.ErrorContains(t, err, want, "chapter %s", n)
	}
}

// TestAFailingStepFailsTheTour: the tour stops at the first step that
// fails, says where, exits non-zero, walks no further README and stops the
// programs it started in the background.
func TestAFailingStepFailsTheTour(t *testing.T) {
	bin := testcluster.BuildChapter(t, "./scripts/readmewalk/tour")
	for name, block := range map[string]string{
		"a command fails":          "<!-- walk: run -->\n```sh\nfalse\necho after the failing step\n```\n",
		"a pipeline fails":         "<!-- walk: run -->\n```sh\nset -o pipefail; false | cat\n```\n",
		"an output differs":        "<!-- walk: run -->\n```console\n$ echo something else\nwhat the README says\n```\n",
		"a program never is ready": "<!-- walk: background name=slow ready=\"^never\" timeout=1s -->\n```sh\nsleep 30\n```\n",
	} {
		t.Run(name, func(t *testing.T) {
			files := map[string]string{}
			for k, v := range course {
				files[k] = v
			}
			// Chapter 02 fails while chapter 01's program still runs.
			files["chapters/02-second/README.md"] = "# 02\n\n" + block
			dir := writeCourse(t, files)
			out, err := runTour(t, bin, dir, nil)
			require.Error(t, err, out)
			assert.Contains(t, out, "tour: chapters/02-second/README.md:3 (walk: ")
			assert.NotContains(t, out, "after the failing step")
			assert.NotContains(t, out, "=== chapters/03-third", "the tour went on after a failure")
			assert.NotContains(t, out, "=== Done")
			pid, err := os.ReadFile(filepath.Join(dir, "prog.pid"))
			require.NoError(t, err)
			_, err = os.Stat("/proc/" + strings.TrimSpace(string(pid)))
			assert.True(t, os.IsNotExist(err), "chapter 01's background program is still running after the tour failed")
		})
	}
}

// TestTourOnAnotherClusterSkipsTheLocalSteps: with KUBECONFIG set (kind,
// a classroom's cluster) the steps marked local, which start the local
// control plane, are not run; the others are.
func TestTourOnAnotherClusterSkipsTheLocalSteps(t *testing.T) {
	bin := testcluster.BuildChapter(t, "./scripts/readmewalk/tour")
	dir := writeCourse(t, course)
	out, err := runTour(t, bin, dir, []string{"KUBECONFIG=" + filepath.Join(dir, "kind.kubeconfig")}, "01")
	require.NoError(t, err, out)
	assert.NoFileExists(t, filepath.Join(dir, "started-a-cluster"))
	assert.Contains(t, out, "(not run here: on the local control plane only; this tour uses KUBECONFIG="+filepath.Join(dir, "kind.kubeconfig")+")")
	assert.Contains(t, out, "$ echo \"$GREETING one\"\n  hello one")
	assert.NotContains(t, out, "The local cluster is still running")
}

// TestAProgramLeftRunningIsStoppedWhereTheCourseStopsIt: a program started
// with until="02" is left running for the chapters before 02, which stops
// it. A tour of 03 (which needs 01, not 02) skips that Ctrl-C: the tour
// presses it before 03, as the learner walking 02 would have; a full tour
// leaves it to 02.
func TestAProgramLeftRunningIsStoppedWhereTheCourseStopsIt(t *testing.T) {
	bin := testcluster.BuildChapter(t, "./scripts/readmewalk/tour")
	gone := "<!-- walk: run -->\n```sh\n! kill -0 \"$(cat prog.pid)\" 2>/dev/null\n```\n"
	files := map[string]string{
		"README.md": "# Course\n",
		"chapters/01-first/README.md": "# 01\n\n<!-- walk: background name=prog ready=\"^up\" until=\"02\" -->\n" +
			"```sh\nbash -c 'trap \"echo down; exit 0\" INT; echo up; echo $$ > prog.pid; while :; do sleep 0.1; done'\n```\n",
		"chapters/02-second/README.md": "# 02\n\n<!-- walk: ctrl-c name=prog -->\n\n" + gone,
		"chapters/03-third/README.md":  "# 03\n\n<!-- walk: needs chapters=\"01\" -->\n\n" + gone,
	}
	dir := writeCourse(t, files)
	out, err := runTour(t, bin, dir, nil, "03")
	require.NoError(t, err, out)
	assert.Contains(t, out, "^C   (in the terminal of prog: chapter 02 stops it, and this walk skipped it)")

	dir = writeCourse(t, files)
	out, err = runTour(t, bin, dir, nil)
	require.NoError(t, err, out)
	assert.NotContains(t, out, "this walk skipped it")

	files["chapters/01-first/README.md"] = "# 01\n\n<!-- walk: run until=\"02\" -->\n```sh\ntrue\n```\n"
	_, err = Parse(files["chapters/01-first/README.md"])
	assert.ErrorContains(t, err, "only a background program has one")
}
