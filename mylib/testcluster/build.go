package testcluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// RepoRoot returns the root of the mykubelet checkout (the directory of the
// go.mod of module mykubelet) that holds the test's working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module mykubelet\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testcluster: not inside the mykubelet module")
		}
		dir = parent
	}
}

// BuildChapter builds a program of this module, e.g. "./chapters/01-node-lease",
// into the test's temporary directory and returns the binary's path, so an
// end-to-end test runs exactly what a learner runs with `go run`.
func BuildChapter(t testing.TB, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = RepoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}
