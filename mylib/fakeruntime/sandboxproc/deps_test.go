package sandboxproc

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTheSandboxBinaryLinksNoKubernetesPackage: a pod's sandbox process
// is a process per pod; it stays small by linking the interpreter only,
// no k8s.io package and no other package of this module.
func TestTheSandboxBinaryLinksNoKubernetesPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "mykubelet/mylib/fakeruntime/sandboxproc/cmd/sandbox").CombinedOutput()
	require.NoError(t, err, "%s", out)
	var bad []string
	deps := strings.Fields(string(out))
	for _, p := range deps {
		ours := p == "mykubelet/mylib/fakeruntime/sandboxproc" || strings.HasPrefix(p, "mykubelet/mylib/fakeruntime/sandboxproc/")
		if strings.Contains(p, "k8s.io/") || (strings.HasPrefix(p, "mykubelet/") && !ours) {
			bad = append(bad, p)
		}
	}
	require.Contains(t, deps, "mykubelet/mylib/fakeruntime/sandboxproc", "go list lists the binary's packages")
	require.Empty(t, bad, "the sandbox binary links these")
}
