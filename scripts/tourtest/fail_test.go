package tourtest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"mykubelet/scripts/testkit/testcluster"
)

// TestAFailingTourStepFailsTheTour runs scripts/tour.sh on a copy of the
// scripts with made-up chapters whose tours fail in each way `set -euo
// pipefail` catches, and checks that the tour stops there and exits
// non-zero. No cluster: kubectl is a stand-in that answers yes.
func TestAFailingTourStepFailsTheTour(t *testing.T) {
	root := testcluster.RepoRoot(t)
	dir := t.TempDir()
	for _, f := range []string{"tour.sh", "tour-lib.sh", "lib.sh"} {
		b, err := os.ReadFile(filepath.Join(root, "scripts", f))
		require.NoError(t, err)
		writeFile(t, filepath.Join(dir, "scripts", f), string(b), 0o755)
	}
	bin := filepath.Join(dir, "bin")
	writeFile(t, filepath.Join(bin, "kubectl"), "#!/bin/sh\nexit 0\n", 0o755)
	chapters := map[string]string{
		"01-passes":   "step 'nothing fails'\necho 'chapter 01 reached its end'\n",
		"02-command":  "step 'a command fails'\nfalse\necho 'after the failing step'\n",
		"03-pipeline": "step 'a pipeline fails'\nfalse | cat\necho 'after the failing step'\n",
		"04-unset":    "step 'an unset variable'\necho \"$NO_SUCH_VARIABLE\"\necho 'after the failing step'\n",
		"05-helper":   "step 'a helper fails'\nwait_until 1 false\necho 'after the failing step'\n",
		"06-bg":       "step 'a program left running is stopped'\nmkdir -p \"$TOUR_DIR/bin\"\nbg_start sleeper sleep 2\ncp \"$TOUR_DIR/sleeper.pid\" \"$TOUR_DIR/sleeper.started\"\nfalse\n",
	}
	for name, body := range chapters {
		writeFile(t, filepath.Join(dir, "chapters", name, "tour.sh"), "# shellcheck shell=bash\n"+body, 0o644)
	}
	tour := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(dir, "scripts", "tour.sh"), args...)
		cmd.Env = append(cleanEnv(os.Environ(), "KUBECONFIG", "NODE_NAME", "MYKUBELET_STATE_DIR", "TMPDIR"),
			"KUBECONFIG="+filepath.Join(dir, "kubeconfig"),
			"MYKUBELET_STATE_DIR="+filepath.Join(dir, "state"),
			"TMPDIR="+dir,
			"NODE_NAME=tour-node",
			"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := tour("01")
	require.NoError(t, err, "a tour whose steps pass:\n%s", out)
	assert.Contains(t, out, "chapter 01 reached its end")
	assert.Contains(t, out, "=== Done: 1 chapters.")
	assert.Empty(t, must(filepath.Glob(filepath.Join(dir, "mykubelet-tour.*"))), "a tour that passed leaves no scratch directory")

	for _, n := range []string{"02", "03", "04", "05"} {
		out, err := tour("01", n, "06")
		assert.Error(t, err, "chapter %s failed, the tour did not:\n%s", n, out)
		assert.Regexp(t, regexp.MustCompile(`error: chapter `+n+`-\S+: the tour step above failed`), out)
		assert.Contains(t, out, "chapter 01 reached its end")
		assert.NotContains(t, out, "after the failing step", "chapter %s went on after its failing step", n)
		assert.NotContains(t, out, "=== Chapter 06", "the tour went on after chapter %s failed", n)
		assert.NotContains(t, out, "=== Done")
	}

	out, err = tour("06")
	assert.Error(t, err, "chapter 06 failed, the tour did not:\n%s", out)
	// Its program was stopped (and waited for) before the tour exited.
	started := must(filepath.Glob(filepath.Join(dir, "mykubelet-tour.*", "sleeper.started")))
	require.Len(t, started, 1, "the chapter did not start its program:\n%s", out)
	assert.Empty(t, must(filepath.Glob(filepath.Join(dir, "mykubelet-tour.*", "bin"))), "a failed tour keeps its logs, not the built programs")
	pid := strings.TrimSpace(string(must(os.ReadFile(started[0]))))
	_, err = os.Stat("/proc/" + pid)
	assert.True(t, os.IsNotExist(err), "the failed chapter's background program (pid %s) is still running: bg_stop_all did not run in the chapter's shell", pid)
}

// TestChapterToursChangeNoShellOptions: a chapter's tour.sh is sourced
// into the shell scripts/tour.sh starts for it, which sets the options
// (set -euo pipefail); a tour that sets its own would change them for the
// helpers and hide how the chapter runs.
func TestChapterToursChangeNoShellOptions(t *testing.T) {
	root := testcluster.RepoRoot(t)
	tours, err := filepath.Glob(filepath.Join(root, "chapters", "[0-9][0-9]-*", "tour.sh"))
	require.NoError(t, err)
	require.NotEmpty(t, tours)
	setRe := regexp.MustCompile(`^\s*(set\s+[-+]|shopt\s)`)
	for _, tour := range tours {
		f, err := os.Open(tour)
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		for n := 1; sc.Scan(); n++ {
			assert.False(t, setRe.MatchString(sc.Text()), "%s:%d changes the shell's options (%q): scripts/tour.sh sets them for every chapter", tour, n, strings.TrimSpace(sc.Text()))
		}
		f.Close()
	}
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), mode))
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

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
