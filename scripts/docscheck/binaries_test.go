package docscheck_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"mykubelet/scripts/testkit/testcluster"
)

// TestNoBinaryIsCommitted: git holds no executable that a build made (ELF),
// and what `go build` leaves at the top of the checkout, for each command
// of the module (a chapter, a script's program), is ignored by git.
func TestNoBinaryIsCommitted(t *testing.T) {
	root := testcluster.RepoRoot(t)
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	require.NoError(t, err)
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	require.Greater(t, len(files), 100)
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue // deleted in the working tree
		}
		assert.False(t, bytes.HasPrefix(b, []byte("\x7fELF")), "%s is a compiled binary: remove it from git (git rm --cached %s)", f, f)
	}

	// go build ./X/Y names its binary Y, in the directory it runs in.
	list := exec.Command("go", "list", "-f", `{{if eq .Name "main"}}{{.Dir}}{{end}}`, "./...")
	list.Dir = root
	mains, err := list.Output()
	require.NoError(t, err)
	var names []string
	for _, dir := range strings.Fields(string(mains)) {
		names = append(names, filepath.Base(dir))
	}
	require.Contains(t, names, "conformance")
	require.Contains(t, names, "13-mykubelet")
	check := exec.Command("git", append([]string{"-C", root, "check-ignore", "--no-index", "-v", "-n"}, names...)...)
	res, _ := check.Output()
	for _, l := range strings.Split(strings.TrimSpace(string(res)), "\n") {
		// "::\tNAME" is a path no rule ignores.
		if strings.HasPrefix(l, "::") {
			assert.Fail(t, "not ignored by git", "go build of ./…/%s leaves %s at the top of the checkout, and .gitignore does not ignore it", strings.TrimSpace(strings.TrimPrefix(l, "::")), strings.TrimSpace(strings.TrimPrefix(l, "::")))
		}
	}
}
