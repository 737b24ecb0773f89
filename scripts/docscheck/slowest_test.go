package docscheck_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"mykubelet/scripts/testkit/testcluster"
)

// TestTheSlowestListEndsWell checks scripts/test.sh's closing report on a
// long `go test` output: 3,000 packages, under `set -euo pipefail` as in
// the script. The list is the ten slowest, slowest first, and printing it
// exits 0. With `sort | head -n 10` it exited 141 (sort killed by SIGPIPE
// once head had its ten lines): CI once failed so after every test passed.
func TestTheSlowestListEndsWell(t *testing.T) {
	var out strings.Builder
	for i := range 3000 {
		// Package i took i/10 seconds: the slowest are 2999 down to 2990.
		fmt.Fprintf(&out, "ok  \tmykubelet/a/rather/long/package/path/p%04d\t%d.%ds\n", i, i/10, i%10)
	}
	out.WriteString("?   \tmykubelet/no/tests\t[no test files]\n--- FAIL: TestX (1.00s)\nFAIL\tmykubelet/failed\t9999.5s\n")
	results := filepath.Join(t.TempDir(), "results")
	require.NoError(t, os.WriteFile(results, []byte(out.String()), 0o644))

	want := []string{fmt.Sprintf("    %8.1fs  FAIL mykubelet/failed", 9999.5)}
	for i := 2999; len(want) < 10; i-- {
		want = append(want, fmt.Sprintf("    %8.1fs  ok mykubelet/a/rather/long/package/path/p%04d", float64(i)/10, i))
	}
	lib := filepath.Join(testcluster.RepoRoot(t), "scripts", "lib.sh")
	for range 20 {
		cmd := exec.Command("bash", "-c", `set -euo pipefail; source "$1"; slowest_packages "$2"`, "_", lib, results)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), stderr.String())
		assert.Equal(t, want, strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n"))
	}
	src, err := os.ReadFile(filepath.Join(testcluster.RepoRoot(t), "scripts", "test.sh"))
	require.NoError(t, err)
	assert.Contains(t, string(src), "\n    slowest_packages \"$results\"\n", "scripts/test.sh prints its list with slowest_packages")
}
