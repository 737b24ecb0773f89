package kubelet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"mykubelet/mylib/fakeruntime"
	"mykubelet/scripts/testkit/testcluster"
)

// runningContainerID waits until container name of the pod runs and
// returns its runtime ID.
func runningContainerID(t *testing.T, admin kubernetes.Interface, ns, pod, name string) string {
	t.Helper()
	var id string
	require.Eventually(t, func() bool {
		p, err := admin.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
		require.NoError(t, err)
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == name && cs.State.Running != nil {
				_, id, _ = strings.Cut(cs.ContainerID, "://")
				return true
			}
		}
		return false
	}, 2*time.Minute, 100*time.Millisecond, "%s/%s's %s runs", ns, pod, name)
	return id
}

// TestShareProcessNamespaceOnARealControlPlane: the documentation's "Share
// Process Namespace between Containers in a Pod": with
// shareProcessNamespace: true, ps in one container lists the pause
// process as PID 1 and the other container's command, as on a real node;
// without it, a container sees its own processes alone.
func TestShareProcessNamespaceOnARealControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx := context.Background()
	c := testcluster.Start(t)
	admin := c.Clientset(t)
	rt := runKubeletOnMock(t, c, "pidns-node")
	pod := func(name string, share bool) {
		_, err := admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1.PodSpec{NodeName: "pidns-node", ShareProcessNamespace: ptr.To(share), TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []v1.Container{{Name: "nginx", Image: "nginx"}, {Name: "shell", Image: "busybox:1.37", Command: []string{"sleep", "3600"}}}}},
			metav1.CreateOptions{})
		require.NoError(t, err)
	}
	pod("shared", true)
	pod("private", false)
	ps := func(rt *fakeruntime.Runtime, id, want string) string {
		var out string
		require.Eventually(t, func() bool {
			resp, err := rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"ps"}, Timeout: 10})
			require.NoError(t, err)
			out = string(resp.Stdout)
			return strings.Contains(out, want)
		}, time.Minute, 100*time.Millisecond, "ps never listed %q", want)
		return out
	}

	runningContainerID(t, admin, "default", "shared", "nginx")
	out := ps(rt, runningContainerID(t, admin, "default", "shared", "shell"), "0:00 nginx -g daemon off;\n")
	assert.Regexp(t, `(?m)^PID   USER     TIME  COMMAND\n    1 65535     0:00 /pause\n( +\d+ root      0:00 (nginx -g daemon off;|sleep 3600)\n){2} +\d+ root      0:00 ps\n$`, out)

	runningContainerID(t, admin, "default", "private", "nginx")
	out = ps(rt, runningContainerID(t, admin, "default", "private", "shell"), "sleep 3600")
	assert.Regexp(t, `^PID   USER     TIME  COMMAND\n    1 root      0:00 sleep 3600\n +\d+ root      0:00 ps\n$`, out,
		"its own namespace: its command is PID 1, and nginx is not there")
}
