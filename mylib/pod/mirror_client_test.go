package pod

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"mykubelet/mylib/kubetypes"
)

func TestCreateMirrorPod(t *testing.T) {
	ctx := context.Background()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}}
	client := fake.NewClientset(node)
	mc := NewBasicMirrorClient(client, "n1", nil)
	static := staticPod("web-n1", "static-uid", "static-uid")

	require.NoError(t, mc.CreateMirrorPod(ctx, static))
	got, err := client.CoreV1().Pods("default").Get(ctx, "web-n1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "static-uid", got.Annotations[kubetypes.ConfigMirrorAnnotationKey])
	assert.NotEqual(t, static.UID, got.UID)
	require.Len(t, got.OwnerReferences, 1)
	ref := got.OwnerReferences[0]
	assert.Equal(t, metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "node-uid", Controller: ref.Controller}, ref)
	assert.True(t, *ref.Controller)
	assert.NotContains(t, static.Annotations, kubetypes.ConfigMirrorAnnotationKey, "the static pod is not changed")

	assert.ErrorIs(t, mc.CreateMirrorPod(ctx, static), ErrMirrorPodExists, "creating the same mirror pod twice says so")
	action, err := SyncMirrorPod(ctx, mc, static, nil)
	assert.NoError(t, err)
	assert.Equal(t, MirrorUnchanged, action, "SyncMirrorPod with a stale view does not report a creation")
	other := staticPod("web-n1", "new-uid", "new-uid")
	err = mc.CreateMirrorPod(ctx, other)
	assert.Error(t, err, "a different mirror pod in the way is an error")
	assert.NotErrorIs(t, err, ErrMirrorPodExists)
}

func TestCreateMirrorPodWithoutNode(t *testing.T) {
	mc := NewBasicMirrorClient(fake.NewClientset(), "n1", nil)
	err := mc.CreateMirrorPod(context.Background(), staticPod("web-n1", "s", "s"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "default/web-n1")
	assert.Contains(t, err.Error(), "get node n1")
}

func TestDeleteMirrorPod(t *testing.T) {
	ctx := context.Background()
	m := mirrorOf(staticPod("web-n1", "s", "s"), "m")
	client := fake.NewClientset(m)
	mc := NewBasicMirrorClient(client, "n1", nil)

	ok, err := mc.DeleteMirrorPod(ctx, "web-n1_default", nil)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = mc.DeleteMirrorPod(ctx, "web-n1_default", nil)
	require.NoError(t, err)
	assert.False(t, ok, "already gone is not an error")
	_, err = mc.DeleteMirrorPod(ctx, "no-namespace", nil)
	assert.Error(t, err)
}

// recordingClient records what SyncMirrorPod asks for.
type recordingClient struct{ calls []string }

func (r *recordingClient) CreateMirrorPod(_ context.Context, p *v1.Pod) error {
	r.calls = append(r.calls, "create "+p.Name)
	return nil
}

func (r *recordingClient) DeleteMirrorPod(_ context.Context, name string, uid *types.UID) (bool, error) {
	r.calls = append(r.calls, "delete "+name+" "+string(*uid))
	return true, nil
}

func TestSyncMirrorPod(t *testing.T) {
	static := staticPod("web-n1", "s2", "s2")
	current := mirrorOf(static, "m")
	outdated := mirrorOf(staticPod("web-n1", "s1", "s1"), "m-old")
	deleting := mirrorOf(static, "m-del")
	now := metav1.NewTime(time.Now())
	deleting.DeletionTimestamp = &now

	for _, tc := range []struct {
		name   string
		mirror *v1.Pod
		want   MirrorAction
		calls  []string
	}{
		{"missing", nil, MirrorCreated, []string{"create web-n1"}},
		{"up to date", current, MirrorUnchanged, nil},
		{"outdated hash", outdated, MirrorReplaced, []string{"delete web-n1_default m-old", "create web-n1"}},
		{"being deleted", deleting, MirrorRecreated, []string{"delete web-n1_default m-del", "create web-n1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := &recordingClient{}
			got, err := SyncMirrorPod(context.Background(), rc, static, tc.mirror)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.calls, rc.calls)
		})
	}
}

func TestOrphanedMirrorPods(t *testing.T) {
	a, b := staticPod("a-n1", "a", "a"), staticPod("b-n1", "b", "b")
	notMirror := apiPod("c", "c")
	assert.Equal(t, []string{"b-n1_default"}, OrphanedMirrorPods([]*v1.Pod{a}, []*v1.Pod{mirrorOf(a, "ma"), mirrorOf(b, "mb"), notMirror}))
}
