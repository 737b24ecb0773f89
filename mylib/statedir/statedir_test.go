package statedir

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteFileIsPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new", "secret.key")
	require.NoError(t, WriteFile(path, []byte("one")))
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	dir, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), dir.Mode().Perm())

	// Replacing keeps the mode and leaves no temporary file behind.
	require.NoError(t, os.Chmod(path, 0o644))
	require.NoError(t, WriteFile(path, []byte("two")))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "two", string(b))
	info, _ = os.Stat(path)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	entries, _ := os.ReadDir(filepath.Dir(path))
	require.Len(t, entries, 1)
}

func TestDefault(t *testing.T) {
	t.Setenv(EnvVar, "/somewhere/else")
	require.Equal(t, "/somewhere/else", Default())

	t.Setenv(EnvVar, "")
	// The test runs inside the checkout: .state at the module root.
	d := Default()
	require.Equal(t, ".state", filepath.Base(d))
	_, err := os.Stat(filepath.Join(filepath.Dir(d), "go.mod"))
	require.NoError(t, err)
}
