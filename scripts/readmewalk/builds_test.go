package readmewalk

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"mykubelet/scripts/testkit/testcluster"
)

// firstUse says, for each script of scripts/ that compiles or installs
// something the first time it runs (a go build, go install or go run, an
// apt-get install, or a call of another such script), which of its
// subcommands do ("" for: every call), with what the tour must have built
// before (words of the Prepare commands of Builds), and which do not. A
// script not listed here that builds fails
// TestEveryScriptThatBuildsIsKnown: say which of its calls build before a
// README uses it.
var firstUse = map[string]struct {
	builds map[string][]string
	not    []string
}{
	"cluster.sh":     {builds: map[string][]string{"up": {goPrograms, controlPlane}}, not: []string{"down", "status", "env", "logs"}},
	"containerd.sh":  {builds: map[string][]string{"up": {runtime}, "install": {runtime}, "images": {runtime, goPrograms, images}}, not: []string{"down", "status", "env"}},
	"conformance.sh": {builds: map[string][]string{"": {goPrograms, controlPlane, runtime, images, e2e}}},
	"classroom.sh":   {builds: map[string][]string{"": {goPrograms}}},
	// Not README commands (benchmarks, the tests, the tour itself, lima's):
	// listed so that a README that calls one fails here until the tour
	// builds what it needs.
	"build-control-plane.sh": {builds: map[string][]string{"": {unprepared}}},
	"tour.sh":                {builds: map[string][]string{"": {unprepared}}},
	"test.sh":                {builds: map[string][]string{"": {unprepared}}},
	"bench.sh":               {builds: map[string][]string{"": {unprepared}}},
	"build-bench-nodes.sh":   {builds: map[string][]string{"": {unprepared}}},
	"capstone-bench.sh":      {builds: map[string][]string{"": {unprepared}}},
	"fleet-bench.sh":         {builds: map[string][]string{"": {unprepared}}},
	"node-write-load.sh":     {builds: map[string][]string{"": {unprepared}}},
	"realnode-bench.sh":      {builds: map[string][]string{"": {unprepared}}},
	"startup-bench.sh":       {builds: map[string][]string{"": {unprepared}}},
	"upstream-kubelet.sh":    {builds: map[string][]string{"": {unprepared}}},
	"realnode.sh":            {builds: map[string][]string{"": {unprepared}}}, // sourced
	"lib.sh":                 {builds: map[string][]string{"": {unprepared}}}, // sourced
	"kind-up.sh":             {builds: map[string][]string{"": {unprepared}}}, // kind pulls its node image the first time (the lima VM)
}

// What each first build is, by a word of its Prepare command.
const (
	goPrograms   = `"the course's packages" build -v`
	controlPlane = "scripts/build-control-plane.sh"
	runtime      = "scripts/containerd.sh install"
	runtimeV2    = "MYKUBELET_CONTAINERD=v2 scripts/containerd.sh install"
	images       = "scripts/tools/images"
	e2e          = "scripts/conformance.sh --build"
	unprepared   = "(no build of Builds prepares it)"
)

var (
	buildsRe     = regexp.MustCompile(`\bgo (build|install|run|test)\b|\bgo_progress\b|apt-get\b[^\n]*\binstall\b|scripts/[a-z-]+\.sh`)
	goCommandRe  = regexp.MustCompile(`\bgo (run|build|install)\b`)
	scriptCallRe = regexp.MustCompile(`(?:^|[\s;&|(])(?:\./)?scripts/([a-z-]+\.sh)(?:[ \t]+([^\s;&|)]+))?`)
	// containerd.sh's v2 flavour builds containerd on first use, beside
	// what the default flavour installs.
	v2CallRe = regexp.MustCompile(`MYKUBELET_CONTAINERD=v2 (?:\./)?scripts/containerd\.sh (?:up|install|images)\b`)
)

func TestEveryScriptThatBuildsIsKnown(t *testing.T) {
	root := testcluster.RepoRoot(t)
	scripts, err := filepath.Glob(filepath.Join(root, "scripts", "*.sh"))
	require.NoError(t, err)
	require.NotEmpty(t, scripts)
	for _, s := range scripts {
		b, err := os.ReadFile(s)
		require.NoError(t, err)
		if !buildsRe.Match(b) {
			continue
		}
		_, ok := firstUse[filepath.Base(s)]
		assert.True(t, ok, "scripts/%s can build or install on first use (%q): say in firstUse which of its calls do", filepath.Base(s), buildsRe.Find(b))
	}
}

// TestEveryStepThatBuildsIsPrepared: a walked README command that can
// build on first use (a go command, or a script call that firstUse says
// builds) is built by the tour before its first step (a Build of Builds
// whose By matches it, chosen by BuildsFor for a tour of that chapter),
// or its step has a timeout of its own long enough for a first build.
// Otherwise it would be walked under the default 3 minutes, which a
// first build of the control plane (19 minutes on 2 cores) overruns.
func TestEveryStepThatBuildsIsPrepared(t *testing.T) {
	root := testcluster.RepoRoot(t)
	readmes, err := Plan(root, nil)
	require.NoError(t, err)
	checked := 0
	for _, r := range readmes {
		md, err := os.ReadFile(filepath.Join(root, r))
		require.NoError(t, err)
		steps, err := Parse(string(md))
		require.NoError(t, err)
		var plan []string
		if n := chapterNumber(r); n != "" {
			plan, err = Plan(root, []string{n})
		} else {
			plan, err = Plan(root, []string{})
			plan = plan[:1] // README.md alone
		}
		require.NoError(t, err)
		for _, external := range []bool{false, true} {
			prepared, err := BuildsFor(root, plan, Builds, external, true)
			require.NoError(t, err)
			for _, st := range steps {
				if !st.Walked(external) {
					continue
				}
				for _, c := range st.Commands() {
					needs := buildsOf(t, c)
					if len(needs) == 0 {
						continue
					}
					checked++
					if d, _ := st.Duration("timeout", DefaultCommandTimeout); d >= 20*time.Minute {
						continue
					}
					for _, need := range needs {
						covered := false
						for _, b := range prepared {
							covered = covered || (strings.Contains(b.Prepare, need) && b.By.MatchString(c))
						}
						assert.True(t, covered, "%s:%d: %q builds on first use what %q builds, and a tour of %v does not build it first (Builds in builds.go)", r, st.Line, c, need, plan)
					}
				}
			}
		}
	}
	// The course has such commands: cluster.sh up, go run, containerd.sh up, conformance.sh.
	require.Greater(t, checked, 20)
}

// buildsOf says what a README command can build on first use: the words
// of the Prepare commands that build it first.
func buildsOf(t *testing.T, command string) []string {
	var needs []string
	if goCommandRe.MatchString(command) {
		needs = append(needs, goPrograms)
	}
	if v2CallRe.MatchString(command) {
		needs = append(needs, runtimeV2)
	}
	for _, m := range scriptCallRe.FindAllStringSubmatch(command, -1) {
		use, ok := firstUse[m[1]]
		if !ok {
			continue // a script that builds nothing
		}
		sub := m[2]
		if strings.HasPrefix(sub, "-") || strings.HasPrefix(sub, "$") {
			sub = ""
		}
		if n, ok := use.builds[""]; ok {
			needs = append(needs, n...)
			continue
		}
		if n, ok := use.builds[sub]; ok {
			needs = append(needs, n...)
			continue
		}
		known := false
		for _, n := range use.not {
			known = known || n == sub
		}
		assert.True(t, known, "%q: is %q of scripts/%s a call that builds? say so in firstUse", command, sub, m[1])
	}
	return needs
}

func TestBuildsForChoosesWhatTheWalkedStepsBuild(t *testing.T) {
	dir := writeCourse(t, map[string]string{
		"README.md": "# C\n\n<!-- walk: run local -->\n```sh\nscripts/cluster.sh up\n```\n\n" +
			"<!-- walk: run -->\n```sh\nscripts/cluster.sh env\n```\n",
		"chapters/19-x/README.md": "# 19\n\n<!-- walk: run -->\n```console\n$ scripts/containerd.sh up\n…\n```\n\n" +
			"<!-- walk: skip reason=\"not here\" -->\n```sh\nscripts/conformance.sh\n```\n",
	})
	names := func(bs []Build) []string {
		var out []string
		for _, b := range bs {
			out = append(out, b.Prepare)
		}
		return out
	}
	readmes := []string{"README.md", "chapters/19-x/README.md"}
	got, err := BuildsFor(dir, readmes, Builds, false, true)
	require.NoError(t, err)
	assert.Equal(t, []string{Builds[0].Prepare, Builds[1].Prepare, Builds[2].Prepare}, names(got), "go programs, control plane, containerd; the skipped conformance.sh builds nothing")
	got, err = BuildsFor(dir, readmes, Builds, true, true)
	require.NoError(t, err)
	assert.Equal(t, []string{Builds[2].Prepare}, names(got), "on another cluster the local cluster.sh up is not walked")
	got, err = BuildsFor(dir, readmes, Builds, false, false)
	require.NoError(t, err)
	assert.Equal(t, []string{Builds[0].Prepare, Builds[1].Prepare}, names(got), "without root, containerd is not installed (its step refuses)")

	v2 := writeCourse(t, map[string]string{
		"chapters/19-x/README.md": "# 19\n\n<!-- walk: run -->\n```sh\nMYKUBELET_CONTAINERD=v2 scripts/containerd.sh up\n```\n",
	})
	got, err = BuildsFor(v2, []string{"chapters/19-x/README.md"}, Builds, false, true)
	require.NoError(t, err)
	assert.Equal(t, []string{Builds[2].Prepare, "MYKUBELET_CONTAINERD=v2 scripts/containerd.sh install"}, names(got), "the v2 flavour: its containerd built too")
}

// timedWriter records when each write arrived.
type timedWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	firsts map[string]time.Time
}

func (w *timedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range strings.Split(string(p), "\n") {
		if _, ok := w.firsts[l]; !ok && l != "" {
			w.firsts[l] = time.Now()
		}
	}
	return w.buf.Write(p)
}

// TestPrepareShowsABuildAsItGoes: a build's lines reach the transcript as
// it prints them, not when it ends.
func TestPrepareShowsABuildAsItGoes(t *testing.T) {
	out := &timedWriter{firsts: map[string]time.Time{}}
	b := Build{What: "a slow build", Prepare: "echo compiling one; sleep 2; echo compiling two", By: regexp.MustCompile(`x`)}
	require.NoError(t, Prepare(t.TempDir(), os.Environ(), []Build{b}, out, make(chan struct{})))
	end := time.Now()
	first, ok := out.firsts["compiling one"]
	require.True(t, ok, out.buf.String())
	assert.Greater(t, end.Sub(first), 1500*time.Millisecond, "the first line came only when the build ended")
	assert.Contains(t, out.buf.String(), "build 1 of 1: a slow build")

	bad := Build{What: "a failing build", Prepare: "echo nope; exit 3", By: regexp.MustCompile(`x`)}
	err := Prepare(t.TempDir(), os.Environ(), []Build{bad, b}, out, make(chan struct{}))
	require.ErrorContains(t, err, "a failing build")
}

// TestPrepareStopsABuildOnCtrlC: the build's process group ends with the
// tour; no build goes on orphaned.
func TestPrepareStopsABuildOnCtrlC(t *testing.T) {
	dir := t.TempDir()
	// child.pid appears whole (mv), not empty: the test stops the build
	// as soon as it is there (CI once read it empty, under load).
	b := Build{What: "a long build", Prepare: "sleep 300 & echo $! > child.pid.new && mv child.pid.new child.pid; wait", By: regexp.MustCompile(`x`)}
	stop := make(chan struct{})
	go func() {
		require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(dir, "child.pid")); return err == nil }, 10*time.Second, 50*time.Millisecond)
		close(stop)
	}()
	err := Prepare(dir, os.Environ(), []Build{b}, &bytes.Buffer{}, stop)
	require.ErrorIs(t, err, ErrInterrupted)
	assertGone(t, dir, "child.pid")
}

// assertGone reads a pid from dir/file and checks the process has ended.
func assertGone(t *testing.T, dir, file string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !alive(pid) }, 10*time.Second, 100*time.Millisecond, "pid %d (from %s) still runs", pid, file)
}

// TestAFailedStepStopsWhatItStarted: a step that times out ends with the
// processes it started (the build a timeout cut short), the README's
// undo= commands run, and the programs in the background stop.
func TestAFailedStepStopsWhatItStarted(t *testing.T) {
	bin := testcluster.BuildChapter(t, "./scripts/readmewalk/tour")
	dir := writeCourse(t, map[string]string{
		"README.md": "# C\n\n<!-- walk: run -->\n```sh\necho ok\n```\n",
		"chapters/01-x/README.md": "# 01\n\n" +
			"<!-- walk: run undo=\"echo undone > undone\" -->\n```sh\necho started\n```\n\n" +
			"<!-- walk: background name=prog ready=\"^up\" -->\n```sh\nbash -c 'echo $$ > prog.pid; echo up; exec sleep 300'\n```\n\n" +
			"<!-- walk: run timeout=2s -->\n```sh\nbash -c 'sleep 300 & echo $! > build.pid; wait'\n```\n",
	})
	out, err := runTour(t, bin, dir, nil)
	require.Error(t, err, out)
	assert.Contains(t, out, "timed out after 2s")
	assert.Contains(t, out, "(undo: what chapters/01-x/README.md started, after the failure)")
	assertGone(t, dir, "build.pid")
	assertGone(t, dir, "prog.pid")
	b, err := os.ReadFile(filepath.Join(dir, "undone"))
	require.NoError(t, err, "the undo did not run:\n%s", out)
	assert.Equal(t, "undone\n", string(b))
	_, err = os.Stat(filepath.Join(dir, ".state", "tour.journal"))
	assert.True(t, os.IsNotExist(err), "a tour that cleaned up leaves no journal")
}

// TestATourKilledOutrightIsCleanedUpByTheNext: SIGKILL leaves the
// background program, the step under way (its shell outlives the tour)
// and the README's undo to the journal; the next tour stops the program
// and the step and runs the undo before its first step, and walks.
func TestATourKilledOutrightIsCleanedUpByTheNext(t *testing.T) {
	bin := testcluster.BuildChapter(t, "./scripts/readmewalk/tour")
	files := map[string]string{
		"README.md": "# C\n\n<!-- walk: run -->\n```sh\necho ok\n```\n",
		"chapters/01-x/README.md": "# 01\n\n" +
			"<!-- walk: run undo=\"echo undone >> undone\" -->\n```sh\necho started\n```\n\n" +
			"<!-- walk: background name=prog ready=\"^up\" -->\n```sh\nbash -c 'echo $$ > prog.pid; echo up; exec sleep 300'\n```\n\n" +
			"<!-- walk: run -->\n```sh\ntest -e second-time || { touch second-time; sleep 300 & echo $! > step.pid; touch killme; wait; }\n```\n\n" +
			"<!-- walk: ctrl-c name=prog -->\n",
	}
	dir := writeCourse(t, files)
	cmd := tourCmd(bin, dir)
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(dir, "killme")); return err == nil }, 60*time.Second, 100*time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	b, err := os.ReadFile(filepath.Join(dir, "step.pid"))
	require.NoError(t, err)
	stepPID, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	t.Cleanup(func() { _ = syscall.Kill(stepPID, syscall.SIGKILL) })
	require.True(t, alive(stepPID), "the killed tour's step (under its shell, which outlives it) should still run before the next tour")
	first, err := os.ReadFile(filepath.Join(dir, "prog.pid"))
	require.NoError(t, err)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(first)))
	require.True(t, alive(pid), "the killed tour's program should still run before the next tour")
	_, err = os.Stat(filepath.Join(dir, ".state", "tour.journal"))
	require.NoError(t, err, "the killed tour left no journal")

	out, err := runTour(t, bin, dir, nil)
	require.NoError(t, err, out)
	assert.Contains(t, out, "the last tour did not end")
	require.Eventually(t, func() bool { return !alive(pid) }, 10*time.Second, 100*time.Millisecond, "the first tour's program still runs")
	assert.False(t, alive(stepPID), "the first tour's step still runs")
	b, err = os.ReadFile(filepath.Join(dir, "undone"))
	require.NoError(t, err, out)
	assert.Equal(t, "undone\n", string(b), "the undo ran once: for the killed tour, not for the one that passed")
	_, err = os.Stat(filepath.Join(dir, ".state", "tour.journal"))
	assert.True(t, os.IsNotExist(err))
}

// tourCmd is runTour's command, to start and signal.
func tourCmd(bin, dir string) *exec.Cmd {
	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(os.Environ(), "KUBECONFIG", "TMPDIR", "GREETING", "MYKUBELET_STATE_DIR"), "TMPDIR="+dir)
	return cmd
}

// TestGoProgressShowsABuildMoving: lib.sh's go_progress passes go's
// messages through at once, adds a line of packages compiled when go has
// been quiet for its interval, and keeps go's exit status. A stand-in go
// prints three package names, is quiet for 22 s, then fails.
func TestGoProgressShowsABuildMoving(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for go_progress's 20 s interval")
	}
	root := testcluster.RepoRoot(t)
	bin := t.TempDir()
	fakeGo := "#!/bin/bash\necho 'go: downloading example.com/m v1.0.0' >&2\nfor i in 1 2 3; do echo example.com/m/p$i >&2; done\nsleep 22\necho 'p3.go:1: syntax error' >&2\nexit 3\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "go"), []byte(fakeGo), 0o755))
	cmd := exec.Command("bash", "-c", `source scripts/lib.sh; go_progress "the thing" build -v ./...; echo "rc=$?"`)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	s := string(out)
	assert.Contains(t, s, "go: downloading example.com/m v1.0.0")
	assert.Contains(t, s, "==>   the thing: 2")
	assert.Contains(t, s, "s so far, 3 packages compiled")
	assert.Contains(t, s, "p3.go:1: syntax error")
	assert.NotContains(t, s, "example.com/m/p1\n", "package names are counted, not printed")
	assert.Contains(t, s, "rc=3", "go's status is kept")
}
