package kubelet

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"mykubelet/scripts/testkit/testcluster"
)

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
	rt := runKubeletOnMockWith(t, c, "secretmode-node", true)
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
