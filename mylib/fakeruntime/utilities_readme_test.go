package fakeruntime

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestChapter18ListsTheUtilities: chapter 18's README lists the commands
// of the mock's containers on one line; it is Utilities, so that the two
// cannot drift apart.
func TestChapter18ListsTheUtilities(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "chapters", "18-what-kubectl-expects", "README.md"))
	require.NoError(t, err)
	const prefix = "Commands (`fakeruntime.Utilities`):"
	var line string
	for l := range strings.Lines(string(b)) {
		if strings.HasPrefix(l, prefix) {
			require.Empty(t, line, "one line starts with %q", prefix)
			line = strings.TrimPrefix(l, prefix)
		}
	}
	require.NotEmpty(t, line, "chapter 18's README has a line starting with %q", prefix)
	var listed []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(line, -1) {
		listed = append(listed, m[1])
	}
	assert.Equal(t, slices.Sorted(slices.Values(Utilities)), listed, "the README's list, in alphabetical order, is fakeruntime.Utilities")
}

// TestWhatIsNotListedIsNotFound: the programs chapter 18 says a docs
// example does without are not found, exit code 127, with the README's
// message.
func TestWhatIsNotListedIsNotFound(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "app", "sh", "-c", "sleep 1000")
	startContainer(t, r, c)
	waitSleeping(t, r)
	for _, prog := range []string{"wget", "curl", "grep", "sed", "awk", "head"} {
		resp, err := r.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: c, Cmd: []string{prog, "-qO-", "http://localhost/"}})
		require.NoError(t, err)
		assert.EqualValues(t, ExitCodeNotFound, resp.ExitCode, prog)
		assert.Equal(t, "sh: "+prog+": command not found (the fake runtime runs no programs: see fakeruntime.Utilities)\n", string(resp.Stderr), prog)
	}
}
