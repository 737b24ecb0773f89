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

// TestWriteFileSyncsTheDataBeforeTheRenameAndTheDirectoryAfter records
// every fsync: first the temporary file, complete, while path still holds
// the old content; then the directory, once path holds the new content.
func TestWriteFileSyncsTheDataBeforeTheRenameAndTheDirectoryAfter(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kubelet.kubeconfig")
	require.NoError(t, WriteFile(path, []byte("old")))

	type syncCall struct{ name, content, atPath string }
	var calls []syncCall
	fsync = func(f *os.File) error {
		c := syncCall{name: f.Name()}
		if b, err := os.ReadFile(f.Name()); err == nil {
			c.content = string(b)
		}
		b, _ := os.ReadFile(path)
		c.atPath = string(b)
		calls = append(calls, c)
		return f.Sync()
	}
	t.Cleanup(func() { fsync = (*os.File).Sync })

	require.NoError(t, WriteFile(path, []byte("new")))
	require.Len(t, calls, 2)
	require.Equal(t, dir, filepath.Dir(calls[0].name), "the temporary file is next to path")
	require.NotEqual(t, path, calls[0].name)
	require.Equal(t, "new", calls[0].content, "the temporary file is complete when synced")
	require.Equal(t, "old", calls[0].atPath, "and synced before the rename")
	require.Equal(t, dir, calls[1].name, "then the directory")
	require.Equal(t, "new", calls[1].atPath, "after the rename")
}
