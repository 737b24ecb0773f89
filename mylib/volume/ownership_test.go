package volume

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
)

// A volume laid out as the atomic writer leaves it: a timestamped
// directory with the files, ..data pointing at it, and a symlink per key.
func atomicLayout(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ts := filepath.Join(dir, "..2026_11_28")
	require.NoError(t, os.Mkdir(ts, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ts, "password"), []byte("s3cr3t"), 0o400))
	require.NoError(t, os.Chmod(filepath.Join(ts, "password"), 0o400))
	require.NoError(t, os.Symlink("..2026_11_28", filepath.Join(dir, "..data")))
	require.NoError(t, os.Symlink("..data/password", filepath.Join(dir, "password")))
	return dir
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	return fi.Mode()
}

func TestSetVolumeOwnershipGivesTheGroupReadAndTheDirectoriesSetgid(t *testing.T) {
	dir := atomicLayout(t)
	require.NoError(t, SetVolumeOwnership(dir, ptr.To[int64](1234), true))
	file := filepath.Join(dir, "..2026_11_28", "password")
	assert.Equal(t, os.FileMode(0o440), mode(t, file).Perm(), "defaultMode 0400 and an fsGroup: 0440, as upstream")
	ts := mode(t, filepath.Join(dir, "..2026_11_28"))
	assert.Equal(t, os.FileMode(0o755), ts.Perm())
	assert.NotZero(t, ts&os.ModeSetgid, "a directory is setgid")
	assert.NotZero(t, mode(t, filepath.Join(dir, "password"))&os.ModeSymlink, "a symlink stays one")
	if os.Geteuid() == 0 {
		fi, err := os.Stat(file)
		require.NoError(t, err)
		assert.Equal(t, uint32(1234), fi.Sys().(*syscall.Stat_t).Gid)
	}

	// Writable (an emptyDir): the group writes too.
	rw := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(rw, "f"), nil, 0o600))
	require.NoError(t, os.Chmod(filepath.Join(rw, "f"), 0o600))
	require.NoError(t, SetVolumeOwnership(rw, ptr.To[int64](1234), false))
	assert.Equal(t, os.FileMode(0o660), mode(t, filepath.Join(rw, "f")).Perm())
}

func TestSetVolumeOwnershipWithoutAnFSGroupChangesNothing(t *testing.T) {
	dir := atomicLayout(t)
	require.NoError(t, SetVolumeOwnership(dir, nil, true))
	assert.Equal(t, os.FileMode(0o400), mode(t, filepath.Join(dir, "..2026_11_28", "password")).Perm())
	assert.Zero(t, mode(t, filepath.Join(dir, "..2026_11_28"))&os.ModeSetgid)
}
