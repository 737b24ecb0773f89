package fakeruntime

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCreateContainerErrorsShowNoHostPath: what a pod's author can make
// CreateContainer refuse (a subPath that is missing, a symlink out of its
// volume or to the runtime's containers, a hostPath outside the roots, a
// working directory through a file), the kubelet shows them in a
// CreateContainerError event: the message names the mount's path in the
// container, never the host's directories (the kubelet's root, the
// runtime's state).
func TestCreateContainerErrorsShowNoHostPath(t *testing.T) {
	d := newKubeletDirs(t)
	r := mountRuntime(t, d, IsolationInProcess)
	sb := mountPod(t, r)
	outside := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(d.shared, "out")))
	r.mu.Lock()
	containers, err := r.containersDir()
	state := r.stateDir
	r.mu.Unlock()
	require.NoError(t, err)
	require.NoError(t, os.Symlink(containers, filepath.Join(d.shared, "containers")))
	kubeletRoot := filepath.Dir(d.pods)

	for _, tc := range []struct {
		mount *runtimeapi.Mount
		want  string
	}{
		{&runtimeapi.Mount{ContainerPath: "/steal", HostPath: filepath.Join(d.shared, "missing")}, "mount /steal: host path <volume of /steal> does not exist"},
		{&runtimeapi.Mount{ContainerPath: "/steal", HostPath: filepath.Join(d.shared, "out")}, "mount /steal: host path <volume of /steal> is outside the runtime's mount roots (<mount root>, <mount root>)"},
		{&runtimeapi.Mount{ContainerPath: "/steal", HostPath: filepath.Join(d.shared, "containers")}, "mount /steal: host path <volume of /steal> holds the runtime's containers"},
		{&runtimeapi.Mount{ContainerPath: "/steal", HostPath: "/etc"}, "mount /steal: host path <volume of /steal> is outside the runtime's mount roots"},
	} {
		_, err := createMounted(r, sb, "bad", []*runtimeapi.Mount{tc.mount}, "sleep", "1")
		require.Error(t, err)
		assert.Equal(t, codes.InvalidArgument, status.Code(err), err.Error())
		assert.Contains(t, err.Error(), tc.want)
		for _, host := range []string{kubeletRoot, state, outside, containers} {
			assert.NotContains(t, err.Error(), host)
		}
	}

	resp, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "workdir"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		Command: []string{"sleep", "1"}, WorkingDir: "/etc/hostname/srv"}})
	require.Error(t, err, "%v", resp)
	assert.Contains(t, err.Error(), `working directory "/etc/hostname/srv"`)
	for _, host := range []string{kubeletRoot, state, containers} {
		assert.NotContains(t, err.Error(), host)
	}
}

// TestALogPathOutOfTheLogDirectoryIsRefused: a CRI log_path with `..`
// that leads out of the sandbox's log directory, or an absolute one, is
// InvalidArgument, and no file is made; one that stays inside works.
func TestALogPathOutOfTheLogDirectoryIsRefused(t *testing.T) {
	r, _ := fixture(t)
	logDir := filepath.Join(t.TempDir(), "pods", "default_web_uid-1")
	require.NoError(t, os.MkdirAll(logDir, 0o755))
	sb, err := r.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1"}, LogDirectory: logDir}})
	require.NoError(t, err)
	create := func(name, logPath string) error {
		_, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
			Command: []string{"sleep", "1"}, LogPath: logPath}})
		return err
	}
	for _, p := range []string{"../escaped.log", "app/../../escaped.log", "../../escaped.log", "/tmp/escaped.log"} {
		err := create("bad", p)
		require.Error(t, err, p)
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "%s: %v", p, err)
		assert.Contains(t, err.Error(), "is not a path inside the sandbox's log directory")
	}
	for _, f := range []string{filepath.Join(filepath.Dir(logDir), "escaped.log"), filepath.Join(filepath.Dir(filepath.Dir(logDir)), "escaped.log")} {
		_, err := os.Stat(f)
		assert.ErrorIs(t, err, os.ErrNotExist, "no file made outside the log directory")
	}
	require.NoError(t, create("app", "app/../app/0.log"), "a path that stays inside")
	_, err = os.Stat(filepath.Join(logDir, "app", "0.log"))
	assert.NoError(t, err)
}
