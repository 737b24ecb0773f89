package kubelet

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"mykubelet/mylib/events"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/secret"
	secretvolume "mykubelet/mylib/volume/secret"
	"mykubelet/scripts/testkit/testcluster"
)

// runKubeletWithSecretVolumes is runKubeletOnMock with the volume manager
// and the secret plugin, the mock mapping mounts from the pods' directory.
func runKubeletWithSecretVolumes(t *testing.T, c *testcluster.Cluster, name string) *fakeruntime.Runtime {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	client, eventClient, err := NewClients(c.UserConfig(t, "system:node:"+name, "system:nodes"))
	require.NoError(t, err)
	clk := clock.RealClock{}
	root := t.TempDir()
	rt, err := fakeruntime.NewRuntime(fakeruntime.Config{Clock: clk, MountRoots: []string{filepath.Join(root, "pods")}})
	require.NoError(t, err)
	runtime, err := kuberuntime.Connect(ctx, "unix://"+fakeruntimetest.Serve(t, rt), clk)
	require.NoError(t, err)
	t.Cleanup(func() { runtime.Close() })
	podConfig, err := MakePodSourceConfig(ctx, &wg, PodSources{Client: client, NodeName: name, Clock: clk})
	require.NoError(t, err)
	recorder, stopEvents := events.NewRecorder(ctx, eventClient, name)
	t.Cleanup(stopEvents)
	kl, err := New(Config{Client: client, NodeName: name, Clock: clk,
		Node: &NodeConfig{Status: &NodeStatusOptions{RootDir: root}, NodeStatusUpdateFrequency: time.Second},
		Pods: &PodsConfig{Updates: podConfig.Updates(), SourcesReady: podConfig.SeenAllSources, RemoteRuntimeService: runtime.RuntimeService(),
			RemoteImageService: runtime.ImageService(), RunContainers: true, Recorder: recorder, PodLogsDirectory: t.TempDir(),
			Volumes: true, RootDirectory: root, VolumePlugins: secretvolume.ProbeVolumePlugins(),
			SecretManager: secret.NewWatchingSecretManager(client, time.Minute)}})
	require.NoError(t, err)
	wg.Go(func() { _ = kl.Run(ctx) })
	return rt
}

// TestSecretDefaultMode0400OnARealControlPlane: the documentation's Secret
// volume with defaultMode 0400 ("Distribute Credentials Securely Using
// Secrets"): the kubelet writes the files root's, readable by their owner
// alone, and the container, root in its image, reads them, as on a real
// node (on the mock, its sandbox process keeps root's reading of any file
// of its pod); ls -l shows the mode the pod asked for.
func TestSecretDefaultMode0400OnARealControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx := context.Background()
	c := testcluster.Start(t)
	admin := c.Clientset(t)
	rt := runKubeletWithSecretVolumes(t, c, "secretmode-node")
	_, err := admin.CoreV1().Secrets("default").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "test-secret"},
		StringData: map[string]string{"username": "my-app", "password": "39528$vdg7Jb"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "secret-test-pod"},
		Spec: v1.PodSpec{NodeName: "secretmode-node", TerminationGracePeriodSeconds: ptr.To[int64](1), AutomountServiceAccountToken: ptr.To(false),
			Containers: []v1.Container{{Name: "test-container", Image: "busybox:1.37", Command: []string{"sleep", "3600"},
				VolumeMounts: []v1.VolumeMount{{Name: "secret-volume", MountPath: "/etc/secret-volume", ReadOnly: true}}}},
			Volumes: []v1.Volume{{Name: "secret-volume", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{
				SecretName: "test-secret", DefaultMode: ptr.To[int32](0o400)}}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	id := runningContainerID(t, admin, "default", "secret-test-pod", "test-container")

	sh := func(script string) (string, string, int32) {
		resp, err := rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"sh", "-c", script}, Timeout: 10})
		require.NoError(t, err)
		return string(resp.Stdout), string(resp.Stderr), resp.ExitCode
	}
	out, errOut, code := sh("cat /etc/secret-volume/password; echo; cat /etc/secret-volume/username")
	assert.Zero(t, code, errOut)
	assert.Equal(t, "39528$vdg7Jb\nmy-app", out, "root in the container reads the 0400 files")
	out, errOut, code = sh("ls -l /etc/secret-volume/..data/") // the files behind the atomic writer's links
	assert.Zero(t, code, errOut)
	assert.Regexp(t, `(?m)^-r-------- +12 .* password$`, out, "the mode the pod asked for")
	_, errOut, code = sh("echo x > /etc/secret-volume/password")
	assert.NotZero(t, code)
	assert.Contains(t, errOut, "read-only file system")
}
