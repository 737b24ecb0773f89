package pod

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mykubelet/mylib/kubetypes"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

// TestMirrorPodsWithNodeCredentials proves, against a real API server with
// the Node authorizer and NodeRestriction, that a node may create and delete
// the mirror pods of its own static pods, and nothing more.
func TestMirrorPodsWithNodeCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	c := testcluster.Start(t)
	ctx := context.Background()
	// Each node creates its own Node object with its own credentials.
	n1 := kubernetes.NewForConfigOrDie(chaptertest.RegisterNode(t, c, "n1"))
	n2 := kubernetes.NewForConfigOrDie(chaptertest.RegisterNode(t, c, "n2"))

	static := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-n1", Namespace: "default", UID: "0123456789abcdef",
			Annotations: map[string]string{
				kubetypes.ConfigSourceAnnotationKey: kubetypes.FileSource,
				kubetypes.ConfigHashAnnotationKey:   "0123456789abcdef",
			}},
		Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "web", Image: "nginx"}}},
	}

	t.Run("the node creates its mirror pod", func(t *testing.T) {
		require.NoError(t, NewBasicMirrorClient(n1, "n1", nil).CreateMirrorPod(ctx, static))
		got, err := c.Clientset(t).CoreV1().Pods("default").Get(ctx, "web-n1", metav1.GetOptions{})
		require.NoError(t, err)
		assert.True(t, kubetypes.IsMirrorPod(got))
		assert.True(t, IsMirrorPodOf(got, static))
		require.Len(t, got.OwnerReferences, 1)
		assert.Equal(t, "Node", got.OwnerReferences[0].Kind)
		assert.Equal(t, "n1", got.OwnerReferences[0].Name)
	})

	t.Run("NodeRestriction refuses a pod that is not a mirror pod", func(t *testing.T) {
		plain := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "default"}, Spec: static.Spec}
		_, err := n1.CoreV1().Pods("default").Create(ctx, plain, metav1.CreateOptions{})
		assert.True(t, apierrors.IsForbidden(err), "got %v", err)
		assert.ErrorContains(t, err, `node "n1" can only create mirror pods`)
	})

	t.Run("NodeRestriction refuses a mirror pod bound to another node", func(t *testing.T) {
		other := static.DeepCopy()
		other.Name = "web-n1-on-n2"
		other.Spec.NodeName = "n2"
		err := NewBasicMirrorClient(n1, "n1", nil).CreateMirrorPod(ctx, other)
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "got %v", err)
		assert.ErrorContains(t, err, `pods "web-n1-on-n2" is forbidden: node "n1" can only create pods with spec.nodeName set to itself`)
	})

	t.Run("another node may not delete it", func(t *testing.T) {
		_, err := NewBasicMirrorClient(n2, "n2", nil).DeleteMirrorPod(ctx, "web-n1_default", nil)
		assert.True(t, apierrors.IsForbidden(err), "got %v", err)
	})

	t.Run("the node deletes its mirror pod", func(t *testing.T) {
		deleted, err := NewBasicMirrorClient(n1, "n1", nil).DeleteMirrorPod(ctx, "web-n1_default", nil)
		require.NoError(t, err)
		assert.True(t, deleted)
		// Ask as admin: the Node authorizer forbids a node to get a pod that
		// is not bound to it, and a deleted pod is bound to nothing.
		admin := c.Clientset(t)
		require.Eventually(t, func() bool {
			_, err := admin.CoreV1().Pods("default").Get(ctx, "web-n1", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, 10*time.Second, 100*time.Millisecond, "grace period 0: gone at once")
	})
}
