package app

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/options"
)

// TestRootDirAndItsCourseNameStateDir: --root-dir (upstream's name) and
// --state-dir (every chapter's) set the one root directory, and the
// defaults in it follow.
func TestRootDirAndItsCourseNameStateDir(t *testing.T) {
	for _, name := range []string{"--root-dir", "--state-dir"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "root")
			c := NewKubeletCommand("13-mykubelet")
			require.NoError(t, c.fs.Parse([]string{name, dir, "--hostname-override", "Node-1"}))
			s, err := c.complete()
			require.NoError(t, err)
			assert.Equal(t, dir, s.RootDirectory)
			assert.Equal(t, "node-1", s.NodeName)
			assert.Equal(t, "13-mykubelet", s.Annotations[options.ChapterAnnotation], "the program's name on its Node")
			assert.Equal(t, filepath.Join(dir, "kubelet.kubeconfig"), s.Kubeconfig)
			assert.Equal(t, filepath.Join(dir, "bootstrap-kubelet.kubeconfig"), s.BootstrapKubeconfig)
			assert.Equal(t, filepath.Join(dir, "pki"), s.CertDirectory)
			assert.Equal(t, filepath.Join(dir, "pod-logs"), s.KubeletConfiguration.PodLogsDir)
			assert.Equal(t, "unix://"+filepath.Join(dir, "mykubelet.sock"), s.KubeletConfiguration.ContainerRuntimeEndpoint)
			fi, err := os.Stat(dir)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
		})
	}
}

// TestStatusManagerForBursts: the capstone's status manager writes 4 pods
// at a time and holds a new pod's ContainerCreating back for a second
// (complete, unlike upstream); the library's defaults stay upstream's.
func TestStatusManagerForBursts(t *testing.T) {
	c := NewKubeletCommand("13-mykubelet")
	require.NoError(t, c.fs.Parse([]string{"--root-dir", filepath.Join(t.TempDir(), "root")}))
	s, err := c.complete()
	require.NoError(t, err)
	assert.Equal(t, 4, s.StatusWriters)
	assert.Equal(t, time.Second, s.CreatingStatusDelay)
	assert.Zero(t, kubelet.MainOptions{}.CreatingStatusDelay, "0 in the library: upstream's, every status at once")
	assert.True(t, s.EventedPLEG, "the capstone reads the runtime's container events")
	assert.False(t, kubelet.MainOptions{}.EventedPLEG, "off in the library, as upstream's feature gate")
}
