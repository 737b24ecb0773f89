package docscheck_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"mykubelet/scripts/docscheck"
	"mykubelet/scripts/readmewalk"
	"mykubelet/scripts/testkit/testcluster"
)

// readmes returns every README.md of the repository, relative to root.
func readmes(t *testing.T, root string) []string {
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != root) {
			return filepath.SkipDir
		}
		if d.Name() == "README.md" {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// TestReadmesNameOnlyWhatExists checks every README: each path it names
// (scripts/…, chapters/…, yaml/…, mylib/…) exists, and each flag it passes to
// `go run ./chapters/NN-slug` is a flag of that chapter.
func TestReadmesNameOnlyWhatExists(t *testing.T) {
	root := testcluster.RepoRoot(t)
	files := readmes(t, root)
	require.Contains(t, files, "README.md")

	flags := map[string][]string{}
	for _, f := range files {
		missing, err := docscheck.MissingPaths(root, filepath.Join(root, f))
		require.NoError(t, err)
		require.Empty(t, missing, docscheck.FormatMissing(f, missing))

		b, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		for ch, fl := range docscheck.ChapterFlags(string(b)) {
			flags[ch] = append(flags[ch], fl...)
		}
	}
	for ch, fl := range flags {
		_, err := os.Stat(filepath.Join(root, "chapters", ch, "main.go"))
		require.NoError(t, err, "a README runs chapters/%s, which has no main.go", ch)
		bin := testcluster.BuildChapter(t, "./chapters/"+ch)
		help, _ := exec.Command(bin, "-h").CombinedOutput() // -h exits 0 or 2 depending on the flag package; the text is what counts
		for _, name := range fl {
			require.True(t, docscheck.HelpDefines(string(help), name), "a README passes --%s to chapters/%s, which has no such flag; its flags:\n%s", name, ch, help)
		}
	}
}

// TestEveryChapterHasItsParts checks the shape every chapter shares: a
// README.md with its sections, and a main.go, the program the chapter
// builds. A chapter without a main.go is allowed only when it runs another
// chapter's program instead (chapter 19 runs chapter 13's capstone on a
// real runtime): its README's walked blocks run `go run ./chapters/NN-…`,
// or a binary built from one with `go build -o`, of a chapter that has a
// main.go. A chapter that merely lacks its program fails.
func TestEveryChapterHasItsParts(t *testing.T) {
	root := testcluster.RepoRoot(t)
	dirs, err := filepath.Glob(filepath.Join(root, "chapters", "[0-9][0-9]-*"))
	require.NoError(t, err)
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "README.md"))
		require.NoError(t, err, "%s needs README.md", filepath.Base(d))
		if _, err := os.Stat(filepath.Join(d, "main.go")); err != nil {
			require.True(t, os.IsNotExist(err), "%s/main.go: %v", filepath.Base(d), err)
			runs, err := chapterProgramsRun(string(b))
			require.NoError(t, err, "%s/README.md", filepath.Base(d))
			var others []string
			for _, c := range runs {
				if _, err := os.Stat(filepath.Join(root, "chapters", c, "main.go")); err == nil && c != filepath.Base(d) {
					others = append(others, c)
				}
			}
			require.NotEmpty(t, others, "%s needs main.go, or a README whose walked blocks run another chapter's program (go run ./chapters/NN-…, or a binary go build -o makes of it)", filepath.Base(d))
		}
		for _, section := range []string{"Expected output", "How the real kubelet does it", "Cleanup", "Troubleshooting", "Next"} {
			require.Contains(t, string(b), section, "%s/README.md has no %q section", filepath.Base(d), section)
		}
		_, err = docscheck.ExpectedOutput(filepath.Join(d, "README.md"))
		require.NoError(t, err, filepath.Base(d))
	}
}

// chapterProgram is a chapter's package in a command: ./chapters/NN-slug.
var chapterProgram = regexp.MustCompile(`^\./chapters/([0-9][0-9]-[a-z0-9-]+)/?$`)

// chapterProgramsRun returns the chapters (NN-slug) whose programs a
// README's walked blocks run: `go run ./chapters/NN-slug …`, or the binary
// an earlier walked `go build -o BIN ./chapters/NN-slug` made, run as BIN.
// A program built and never run does not count.
func chapterProgramsRun(markdown string) ([]string, error) {
	steps, err := readmewalk.Parse(markdown)
	if err != nil {
		return nil, err
	}
	built := map[string]string{} // binary -> chapter
	var runs []string
	for _, st := range steps {
		var cmds []string
		switch {
		case st.Action == readmewalk.Run && readmewalk.IsConsole(st.Block):
			for _, c := range readmewalk.Console(st.Block) {
				cmds = append(cmds, c.Command)
			}
		case st.Action == readmewalk.Run || st.Action == readmewalk.Background:
			cmds = readmewalk.Commands(st.Block)
		}
		for _, c := range cmds {
			f := strings.Fields(c)
			switch {
			case len(f) >= 3 && f[0] == "go" && f[1] == "run":
				for _, a := range f[2:] {
					if m := chapterProgram.FindStringSubmatch(a); m != nil {
						runs = append(runs, m[1])
						break
					}
				}
			case len(f) >= 5 && f[0] == "go" && f[1] == "build" && f[2] == "-o":
				if m := chapterProgram.FindStringSubmatch(f[len(f)-1]); m != nil {
					built[f[3]] = m[1]
				}
			case len(f) >= 1 && built[f[0]] != "":
				runs = append(runs, built[f[0]])
			}
		}
	}
	return runs, nil
}

func TestChapterProgramsRun(t *testing.T) {
	for _, tc := range []struct {
		name, md string
		want     []string
	}{
		{"go run", "<!-- walk: run -->\n```sh\ngo run ./chapters/05-pleg --pleg=false\n```\n", []string{"05-pleg"}},
		{"built, then run in the background",
			"<!-- walk: run -->\n```sh\ngo build -o .state/bin/mykubelet ./chapters/13-mykubelet\n```\n\n" +
				"<!-- walk: background name=k ready=\"up\" -->\n```sh\n.state/bin/mykubelet --config x \\\n  --state-dir y\n```\n",
			[]string{"13-mykubelet"}},
		{"built, never run", "<!-- walk: run -->\n```sh\ngo build -o .state/bin/mykubelet ./chapters/13-mykubelet\n```\n", nil},
		{"run, but not walked", "```sh\ngo run ./chapters/05-pleg\n```\n", nil},
		{"a console transcript", "<!-- walk: run -->\n```console\n$ go run ./chapters/02-bootstrap-token\ntoken: …\n```\n", []string{"02-bootstrap-token"}},
		{"a script, not a chapter", "<!-- walk: run -->\n```sh\ngo run ./scripts/readmewalk/tour\n```\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := chapterProgramsRun(tc.md)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// forEachLibraryFile calls fn with every Go file of mylib (its path from
// the repository's root, and its source); an error fails the test.
func forEachLibraryFile(t *testing.T, root string, fn func(rel string, src []byte) error) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join(root, "mylib"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return fn(rel, src)
	})
	require.NoError(t, err)
}

// TestLibraryNamesNoChapterNumber checks every Go comment and string in
// mylib: none names a chapter by its number (a renumbering would stale it).
func TestLibraryNamesNoChapterNumber(t *testing.T) {
	root := testcluster.RepoRoot(t)
	var found []string
	forEachLibraryFile(t, root, func(rel string, src []byte) error {
		found = append(found, docscheck.ChapterNumbers(rel, src)...)
		return nil
	})
	require.Empty(t, found, "library comments and strings must not name chapter numbers:\n%s", strings.Join(found, "\n"))
}

// TestReadmesNameOnlyGoIdentifiersThatExist checks every mylib/<pkg>.<Ident>
// a README names: the package declares it.
func TestReadmesNameOnlyGoIdentifiersThatExist(t *testing.T) {
	root := testcluster.RepoRoot(t)
	var missing []string
	for _, f := range readmes(t, root) {
		b, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		for _, r := range docscheck.GoRefs(string(b)) {
			ok, err := docscheck.PackageDeclares(filepath.Join(root, r.Pkg), r.Ident)
			require.NoError(t, err)
			if !ok {
				missing = append(missing, f+" names "+r.Pkg+"."+r.Ident+", which does not exist")
			}
		}
	}
	require.Empty(t, missing, strings.Join(missing, "\n"))
}

// TestMapOfTheHouseListsEveryPackage checks the top-level README's map of
// the house: every mylib package is in it, and every row names one.
func TestMapOfTheHouseListsEveryPackage(t *testing.T) {
	root := testcluster.RepoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	rows := docscheck.HouseMap(string(b))
	require.NotEmpty(t, rows, "README.md needs a \"## Map of the house\" table")
	pkgs, err := docscheck.GoPackages(root, "mylib")
	require.NoError(t, err)
	require.ElementsMatch(t, pkgs, rows, "the map of the house lists exactly the mylib packages")
}

// TestUpstreamNamesExistInMylib holds every name a README's "How the real
// kubelet does it" promises ("same names", "Ours is `mylib/x` (`a`, `b`)")
// against the Go code of those packages.
func TestUpstreamNamesExistInMylib(t *testing.T) {
	root := testcluster.RepoRoot(t)
	claims := 0
	for _, r := range readmes(t, root) {
		b, err := os.ReadFile(filepath.Join(root, r))
		require.NoError(t, err)
		claims += len(docscheck.NameClaims(string(b)))
		missing, err := docscheck.MissingNames(root, r)
		require.NoError(t, err)
		for _, m := range missing {
			t.Errorf("%s: %s", r, m)
		}
	}
	require.Greater(t, claims, 20, "the READMEs should promise upstream names; did the parser stop finding them?")
}

// TestChapterReadmesOpenTheSameWay holds every chapter README to the shape
// /work/shared/STYLE.md gives (and the top-level README repeats): a title,
// "In this chapter you will…", then the same sections in the same order,
// Cleanup split for the path, and a Next: line.
func TestChapterReadmesOpenTheSameWay(t *testing.T) {
	root := testcluster.RepoRoot(t)
	want := []string{"Where to run", "Run", "Expected output", "What to observe",
		"How the real kubelet does it", "Exercise", "Cleanup", "Troubleshooting"}
	chapters, err := filepath.Glob(filepath.Join(root, "chapters", "[0-9][0-9]-*", "README.md"))
	require.NoError(t, err)
	require.NotEmpty(t, chapters)
	for _, c := range chapters {
		b, err := os.ReadFile(c)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, c)
		require.NoError(t, docscheck.CheckShape(string(b), want), rel)
	}
}

// Every chapter's README ends by pointing to the next chapter that exists
// (the last one to the chapter map), so a learner never reads "the end"
// in the middle of the course.
func TestEachChapterPointsToTheNext(t *testing.T) {
	root := testcluster.RepoRoot(t)
	dirs, err := filepath.Glob(filepath.Join(root, "chapters", "[0-9][0-9]-*"))
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	for i, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "README.md"))
		require.NoError(t, err)
		var next string
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "Next:") {
				next = line
			}
		}
		want := "](../../README.md#chapters)"
		if i+1 < len(dirs) {
			want = "](../" + filepath.Base(dirs[i+1]) + "/README.md)"
		}
		assert.Contains(t, next, want, "%s: its Next: line", filepath.Base(d))
	}
}

// TestLibrarySaysNoPartIsMissing holds every comment in mylib against the
// parts of the kubelet that exist: none may say one is missing ("there is
// no prober yet") once its package is there (docscheck.Subsystems).
func TestLibrarySaysNoPartIsMissing(t *testing.T) {
	root := testcluster.RepoRoot(t)
	exists := func(s docscheck.Subsystem) bool { return docscheck.SubsystemExists(root, s) }
	require.True(t, exists(docscheck.Subsystem{Dir: "mylib/prober"}), "the check needs a part that exists")
	var found []string
	forEachLibraryFile(t, root, func(rel string, src []byte) error {
		stale, err := docscheck.StaleAbsences(rel, src, docscheck.Subsystems, exists)
		found = append(found, stale...)
		return err
	})
	require.Empty(t, found, "library comments say a part is missing that exists; say what is true now:\n%s", strings.Join(found, "\n"))
}

// TestEveryPackageHasOneDoc checks every Go package of the repository: one
// file, and only one, carries the package's doc comment (two are run
// together by go doc, and they drift apart).
func TestEveryPackageHasOneDoc(t *testing.T) {
	root := testcluster.RepoRoot(t)
	var bad []string
	checked := 0
	for _, top := range []string{"mylib", "chapters", "scripts"} {
		pkgs, err := docscheck.GoPackages(root, top)
		require.NoError(t, err)
		for _, p := range pkgs {
			docs, err := docscheck.PackageDocs(filepath.Join(root, p))
			require.NoError(t, err)
			checked++
			if len(docs) != 1 {
				bad = append(bad, fmt.Sprintf("%s: %d package doc comments %q (want exactly one; make the others file comments, with a blank line before the package clause)", p, len(docs), docs))
			}
		}
	}
	require.Greater(t, checked, 30, "GoPackages should find the repository's packages")
	require.Empty(t, bad, strings.Join(bad, "\n"))
}
