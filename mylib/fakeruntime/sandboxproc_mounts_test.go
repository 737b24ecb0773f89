package fakeruntime

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/fakeruntime/sandboxproc"
)

// sandboxMountRuntime is sandboxRuntime with the kubelet's mount roots.
func sandboxMountRuntime(t *testing.T, d kubeletDirs) *Runtime {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the sandbox process needs root")
	}
	r, err := NewRuntime(Config{Clock: clock.RealClock{}, StateDir: t.TempDir(), MountRoots: []string{d.pods, d.host}})
	require.NoError(t, err)
	require.NotNil(t, r.sandbox)
	t.Cleanup(func() { _ = r.Close() })
	for _, img := range []string{"busybox:1.36", "registry.k8s.io/pause:3.10"} {
		_, err = r.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img}})
		require.NoError(t, err)
	}
	return r
}

// TestSandboxProcessMapsTheMounts: the same suite as in-process, scripts
// running as nobody in the chroot, the mount roots bound inside it.
func TestSandboxProcessMapsTheMounts(t *testing.T) {
	d := newKubeletDirs(t)
	mountSuite(t, sandboxMountRuntime(t, d), d)
}

// TestSandboxProcessWritesOnlyWhereTheModesAllow: behind the mount table,
// the kernel's wall: the sandbox process's user (nobody) writes only where
// the kubelet's modes let it, whatever the mount says.
func TestSandboxProcessWritesOnlyWhereTheModesAllow(t *testing.T) {
	d := newKubeletDirs(t)
	r := sandboxMountRuntime(t, d)
	sb := mountPod(t, r)
	// Mounted read-write on purpose: only the modes stand in the way.
	c, err := createMounted(r, sb, "app", []*runtimeapi.Mount{
		{ContainerPath: "/etc/config", HostPath: d.config},
		{ContainerPath: "/plain", HostPath: d.plain},
		{ContainerPath: "/shared", HostPath: d.shared},
		{ContainerPath: "/etc/hosts", HostPath: d.hosts},
		{ContainerPath: "/dev/termination-log", HostPath: d.term},
		{ContainerPath: "/ro", HostPath: d.secret, Readonly: true},
	}, "sleep", "3600")
	require.NoError(t, err)
	startContainer(t, r, c)

	for _, script := range []string{
		`echo x >> /etc/config/game.properties`, // 0644, root's, through ..data
		`echo x > /etc/config/new`,              // a 0755 directory of root's
		`rm /etc/config/ui.properties`,
		`echo x >> /plain/file`,
		`touch /plain/new`,
		`echo x >> /shared/roots`, // a 0644 file of root's in a 0777 emptyDir
		`echo x >> /etc/hosts`,    // 0644
	} {
		_, errOut, code := sh(t, r, c, script)
		assert.NotZero(t, code, script)
		assert.Contains(t, errOut, "permission denied", script)
	}
	_, errOut, code := sh(t, r, c, `echo x > /ro/token`)
	assert.NotZero(t, code)
	assert.Contains(t, errOut, "read-only file system")
	out, errOut, code := sh(t, r, c, `cat /etc/config/game.properties /plain/file /shared/roots /ro/token; echo ok > /dev/termination-log; echo mine > /shared/mine`)
	assert.Zero(t, code, errOut)
	assert.Equal(t, "lives=3\nroot's\nroot's, 0644\nthe pod's other secret\n", out, "nobody reads what the modes let it read")
	b, err := os.ReadFile(d.term)
	require.NoError(t, err)
	assert.Equal(t, "ok\n", string(b), "the termination-message file is 0666")
	fi, err := os.Stat(filepath.Join(d.shared, "mine"))
	require.NoError(t, err)
	assert.Equal(t, uint32(sandboxUIDOf(t, r, sb)), statUID(fi), "written by the user of the pod's sandbox process")

	// The bind mounts are above the container's root: no path of a
	// script's reaches them but its own mounts.
	for _, script := range []string{`ls /.mounts`, `cat /../.mounts/0/uid-1/etc-hosts`, `cd /etc/config/../../.. && ls .mounts`, `cat /shared/../../.mounts/0/uid-1/etc-hosts`} {
		out, errOut, code := sh(t, r, c, script)
		assert.NotZero(t, code, script)
		assert.Contains(t, errOut, "no such file or directory", script)
		assert.NotContains(t, out, "localhost", script)
	}

	b, err = os.ReadFile(filepath.Join(d.shared, "roots"))
	require.NoError(t, err)
	assert.Equal(t, "root's, 0644\n", string(b))

	// The bind mounts are the sandbox process's own, in its own root:
	// the host sees none of them under the containers' directory.
	r.mu.Lock()
	containers, err := r.containersDir()
	r.mu.Unlock()
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(containers, sandboxproc.MountsDir))
	assert.ErrorIs(t, err, os.ErrNotExist)
	entries, err := os.ReadDir(filepath.Join(containers, c))
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, "rootfs", entries[0].Name())
}

// TestSandboxProcessReadsA0400SecretAsRoot: a Secret volume with
// defaultMode 0400 (files root's, readable by their owner alone): the
// container, root in its image, reads them, as on a real node, and still
// writes nothing the modes keep from its user.
func TestSandboxProcessReadsA0400SecretAsRoot(t *testing.T) {
	d := newKubeletDirs(t)
	r := sandboxMountRuntime(t, d)
	sb := mountPod(t, r)
	writeMode(t, filepath.Join(d.secret, "password"), "s3cr3t\n", 0o400)
	private := filepath.Join(d.plain, "private")
	mkdirMode(t, private, 0o700)
	writeMode(t, filepath.Join(private, "key"), "root's alone\n", 0o600)
	c, err := createMounted(r, sb, "app", []*runtimeapi.Mount{
		{ContainerPath: "/etc/secret", HostPath: d.secret, Readonly: true},
		{ContainerPath: "/plain", HostPath: d.plain},
	}, "sleep", "3600")
	require.NoError(t, err)
	startContainer(t, r, c)

	out, errOut, code := sh(t, r, c, `cat /etc/secret/password; ls /plain/private; cat /plain/private/key`)
	assert.Zero(t, code, errOut)
	assert.Equal(t, "s3cr3t\nkey\nroot's alone\n", out, "root in the container reads its pod's 0400, 0600 and 0700")
	for _, script := range []string{`echo x >> /plain/private/key`, `echo x > /plain/private/new`, `echo x >> /plain/file`} {
		_, errOut, code := sh(t, r, c, script)
		assert.NotZero(t, code, script)
		assert.Contains(t, errOut, "permission denied", script+": reading is all it was given")
	}
}

// TestSandboxProcessSeesAnUpdateWhileRunning: a container's main script,
// running, reads a configMap volume the kubelet's atomic writer updated.
func TestSandboxProcessSeesAnUpdateWhileRunning(t *testing.T) {
	d := newKubeletDirs(t)
	r := sandboxMountRuntime(t, d)
	sb := mountPod(t, r)
	c, err := createMounted(r, sb, "app", d.appMounts(), "sh", "-c",
		`cat /etc/config/game.properties; echo started > /shared/started; while [ ! -e /shared/go ]; do sleep 0.01; done; cat /etc/config/game.properties`)
	require.NoError(t, err)
	startContainer(t, r, c)
	r.mu.Lock()
	done := r.containers[c].done
	r.mu.Unlock()
	// Wait for the script to have read the first version (a poll on the
	// file, bounded by the script's own end).
	for {
		if _, err := os.Stat(filepath.Join(d.shared, "started")); err == nil {
			break
		}
		select {
		case <-done:
			t.Fatalf("the script ended early: %s", logOf(t, r, c))
		case <-time.After(5 * time.Millisecond):
		}
	}
	atomicWrite(t, d.config, map[string]string{"game.properties": "lives=4\n"})
	writeMode(t, filepath.Join(d.shared, "go"), "", 0o644)
	waitDone(t, r, c)
	assert.Equal(t, "lives=3\nlives=4\n", logOf(t, r, c))
	assert.Zero(t, containerStatus(t, r, c).ExitCode)
}

func statUID(fi os.FileInfo) uint32 { return fi.Sys().(*syscall.Stat_t).Uid }
