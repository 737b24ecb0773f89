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

// TestHostPathRoot: --host-path-root is where a hostPath volume's path is
// found. Unset, the kubelet leaves it to the runtime (mainOptions: the
// machine's own "/" with a real one, <root-dir>/host with the mock); the
// mock's pods never get the machine's own "/".
func TestHostPathRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	complete := func(args ...string) (*KubeletServer, error) {
		c := NewKubeletCommand("13-mykubelet")
		require.NoError(t, c.fs.Parse(append([]string{"--root-dir", root}, args...)))
		return c.complete()
	}
	s, err := complete()
	require.NoError(t, err)
	assert.Empty(t, mainOptions(s).HostPathRoot, "the mock's: <root-dir>/host")
	s, err = complete("--fake-runtime=false")
	require.NoError(t, err)
	assert.Equal(t, "/", mainOptions(s).HostPathRoot, "a real runtime's: the machine's own path")
	s, err = complete("--host-path-root", "/srv/pods-host")
	require.NoError(t, err)
	assert.Equal(t, "/srv/pods-host", mainOptions(s).HostPathRoot)
	_, err = complete("--host-path-root", "/")
	require.ErrorContains(t, err, "--host-path-root /: the mock runtime's pods never reach the machine's own files")
}
