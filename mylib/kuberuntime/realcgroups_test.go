package kuberuntime

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"mykubelet/mylib/cm"
)

// realCgroupRoot is this machine's cgroup filesystem and a cgroup root of
// the test's own (/mykubelet-test-<random>, removed with all under it
// when the test ends); the test is skipped unless it runs as root on a
// writable cgroup filesystem.
func realCgroupRoot(t *testing.T) (*cm.CgroupSubsystems, cm.CgroupName) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it makes cgroups on this machine")
	}
	cs, err := cm.GetCgroupSubsystems()
	if err != nil {
		t.Skipf("no cgroup filesystem: %v", err)
	}
	writable := cs.Unified
	if writable == "" {
		writable = cs.MountPoints["memory"]
	}
	if err := unix.Access(writable, unix.W_OK); err != nil {
		t.Skipf("cgroup filesystem %s not writable: %v", writable, err)
	}
	cgm, err := cm.NewCgroupManager(cs, cm.CgroupfsDriver)
	require.NoError(t, err)
	root := cm.CgroupName{fmt.Sprintf("mykubelet-test-%08x", rand.Uint32())}
	t.Cleanup(func() {
		assert.NoError(t, cgm.Destroy(&cm.CgroupConfig{Name: root}), "the test's cgroups are removed")
		assert.False(t, cgm.Exists(root))
	})
	require.NoError(t, cgm.Create(&cm.CgroupConfig{Name: root, ResourceParameters: &cm.ResourceConfig{}}))
	return cs, root
}

func readCgroupFile(t *testing.T, path ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(path...))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}
