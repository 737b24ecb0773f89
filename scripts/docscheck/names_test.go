package docscheck

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNameClaims(t *testing.T) {
	md := "## How the real kubelet does it\n\n" +
		"- `pkg/kubelet/a.go`: `doThing`, `Kind.Run` and `digestedName`\n" +
		"  (ours: `CSRName`). Ours: `mylib/a`, same names.\n" +
		"- The lease: upstream `newLease`. Ours is `mylib/b` (`Controller.Run`, `sync`).\n" +
		"- Unrelated: `mylib/c` reads `/proc`.\n\n## Exercise\n\n- `notClaimed` in `mylib/a`, same names.\n"
	var got []string
	for _, c := range NameClaims(md) {
		got = append(got, c.Name+"@"+c.Packages[0])
	}
	require.Equal(t, []string{"doThing@mylib/a", "Kind.Run@mylib/a", "CSRName@mylib/a", "Controller.Run@mylib/b", "sync@mylib/b"}, got)
}

func TestMissingNamesFindsAnUndeclaredName(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "mylib/a"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "mylib/a/a.go"), []byte("package a\n\ntype Kind struct{ Field int }\n\nfunc (k *Kind) Run() {}\n\nfunc doThing() {}\n"), 0o600))
	md := "## How the real kubelet does it\n\n- `doThing`, `Kind.Run`, `Kind.Field`, `gone`. Ours: `mylib/a`, same names.\n"
	require.NoError(t, os.WriteFile(filepath.Join(root, "README.md"), []byte(md), 0o600))
	missing, err := MissingNames(root, "README.md")
	require.NoError(t, err)
	require.Len(t, missing, 1)
	require.Contains(t, missing[0], "`gone`")
}
