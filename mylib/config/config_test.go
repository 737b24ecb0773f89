package config

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"mykubelet/mylib/kubetypes"
)

func apiPod(name, uid string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid)},
		Spec:       v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "nginx"}}},
	}
}

func set(pods ...*v1.Pod) kubetypes.PodUpdate {
	if pods == nil {
		pods = []*v1.Pod{}
	}
	return kubetypes.PodUpdate{Op: kubetypes.SET, Pods: pods, Source: kubetypes.ApiserverSource}
}

// drain returns the updates Merge produced, as "OP name name…".
func drain(c *PodConfig) []string {
	var out []string
	for {
		select {
		case u := <-c.Updates():
			s := u.Op.String()
			for _, p := range u.Pods {
				s += " " + p.Name
			}
			out = append(out, s)
		default:
			return out
		}
	}
}

func newConfig() *PodConfig {
	return NewPodConfig(clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
}

func TestMergeSetProducesAddThenNothing(t *testing.T) {
	c := newConfig()
	ctx := context.Background()
	c.Merge(ctx, "api", set(apiPod("a", "1"), apiPod("b", "2")))
	assert.Equal(t, []string{"ADD a b"}, drain(c))

	c.Merge(ctx, "api", set(apiPod("a", "1"), apiPod("b", "2")))
	assert.Empty(t, drain(c), "the same SET again is de-duplicated")
}

func TestMergeAnnotatesSourceAndFirstSeen(t *testing.T) {
	c := newConfig()
	c.Merge(context.Background(), "api", set(apiPod("a", "1")))
	u := <-c.Updates()
	p := u.Pods[0]
	assert.Equal(t, "api", u.Source)
	assert.Equal(t, "api", p.Annotations[kubetypes.ConfigSourceAnnotationKey])
	assert.Equal(t, "2026-01-01T00:00:00.000000000Z", p.Annotations[kubetypes.ConfigFirstSeenAnnotationKey])
	assert.False(t, kubetypes.IsStaticPod(p))
}

func TestMergeFirstEmptySetSignalsReady(t *testing.T) {
	c := newConfig()
	ctx := context.Background()
	c.Merge(ctx, "file", kubetypes.PodUpdate{Op: kubetypes.SET, Pods: []*v1.Pod{}})
	assert.Equal(t, []string{"ADD"}, drain(c), "an empty ADD tells the listener the source is ready")
	c.Merge(ctx, "file", kubetypes.PodUpdate{Op: kubetypes.SET, Pods: []*v1.Pod{}})
	assert.Empty(t, drain(c))
}

func TestMergeUpdateDeleteReconcileRemove(t *testing.T) {
	c := newConfig()
	ctx := context.Background()
	a, b, d := apiPod("a", "1"), apiPod("b", "2"), apiPod("d", "3")
	c.Merge(ctx, "api", set(a, b, d))
	drain(c)

	a2 := a.DeepCopy()
	a2.Spec.Containers[0].Image = "nginx:2" // spec change → UPDATE
	b2 := b.DeepCopy()
	now := metav1.Now()
	b2.DeletionTimestamp = &now // graceful deletion → DELETE
	d2 := d.DeepCopy()
	d2.Status.Phase = v1.PodRunning // status only → RECONCILE
	c.Merge(ctx, "api", set(a2, b2, d2))
	assert.Equal(t, []string{"UPDATE a", "DELETE b", "RECONCILE d"}, drain(c))

	c.Merge(ctx, "api", set(a2))
	assert.Equal(t, []string{"REMOVE b d"}, drain(c))
}

func TestMergeLabelAndAnnotationChangesAreUpdates(t *testing.T) {
	c := newConfig()
	ctx := context.Background()
	a := apiPod("a", "1")
	c.Merge(ctx, "api", set(a))
	drain(c)

	a2 := a.DeepCopy()
	a2.Labels = map[string]string{"x": "y"}
	c.Merge(ctx, "api", set(a2))
	assert.Equal(t, []string{"UPDATE a"}, drain(c))

	a3 := a2.DeepCopy()
	a3.Annotations = map[string]string{"note": "hi"}
	c.Merge(ctx, "api", set(a3))
	assert.Equal(t, []string{"UPDATE a"}, drain(c))

	// The kubelet's own annotations are not a change.
	a4 := a3.DeepCopy()
	a4.Annotations[kubetypes.ConfigFirstSeenAnnotationKey] = "another time"
	c.Merge(ctx, "api", set(a4))
	assert.Empty(t, drain(c))
}

func TestMergeIncrementalOps(t *testing.T) {
	c := newConfig()
	ctx := context.Background()
	a, b := apiPod("a", "1"), apiPod("b", "2")
	c.Merge(ctx, "api", kubetypes.PodUpdate{Op: kubetypes.ADD, Pods: []*v1.Pod{a}})
	c.Merge(ctx, "api", kubetypes.PodUpdate{Op: kubetypes.ADD, Pods: []*v1.Pod{b}})
	assert.Equal(t, []string{"ADD a", "ADD b"}, drain(c), "ADD adds to what the source sent before")
	assert.False(t, c.sourcesSeen["api"], "only a SET marks a source as seen")

	a2 := a.DeepCopy()
	a2.Spec.Containers[0].Image = "nginx:2"
	c.Merge(ctx, "api", kubetypes.PodUpdate{Op: kubetypes.UPDATE, Pods: []*v1.Pod{a2}})
	assert.Equal(t, []string{"UPDATE a"}, drain(c))

	c.Merge(ctx, "api", kubetypes.PodUpdate{Op: kubetypes.REMOVE, Pods: []*v1.Pod{{ObjectMeta: metav1.ObjectMeta{UID: "2"}}}})
	assert.Equal(t, []string{"REMOVE b"}, drain(c), "REMOVE needs only the UID")
}

func TestMergeSourcesAreSeparate(t *testing.T) {
	c := newConfig()
	ctx := context.Background()
	c.Merge(ctx, "api", set(apiPod("a", "1")))
	c.Merge(ctx, "file", kubetypes.PodUpdate{Op: kubetypes.SET, Pods: []*v1.Pod{apiPod("s", "9")}})
	assert.Equal(t, []string{"ADD a", "ADD s"}, drain(c))
	c.Merge(ctx, "file", kubetypes.PodUpdate{Op: kubetypes.SET, Pods: []*v1.Pod{}})
	assert.Equal(t, []string{"REMOVE s"}, drain(c), "a SET from file never removes the api's pods")
}

func TestMergeDropsDuplicateNames(t *testing.T) {
	c := newConfig()
	c.Merge(context.Background(), "file", set(apiPod("a", "1"), apiPod("a", "2")))
	assert.Equal(t, []string{"ADD a"}, drain(c))
}

func TestMergeDoesNotShareObjects(t *testing.T) {
	c := newConfig()
	a := apiPod("a", "1")
	c.Merge(context.Background(), "api", set(a))
	u := <-c.Updates()
	u.Pods[0].Labels = map[string]string{"changed": "by listener"}
	assert.Nil(t, a.Labels, "the source's object is untouched")
	c.Merge(context.Background(), "api", set(apiPod("a", "1")))
	assert.Empty(t, drain(c), "the listener's change did not leak into the stored pod")
}

func TestChannelAndSeenAllSources(t *testing.T) {
	c := newConfig()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fileCh := c.Channel(ctx, "file")
	apiCh := c.Channel(ctx, "api")
	assert.Equal(t, fileCh, c.Channel(ctx, "file"), "one channel per source")
	assert.False(t, c.SeenAllSources())

	fileCh <- kubetypes.PodUpdate{Op: kubetypes.SET, Pods: []*v1.Pod{}}
	u := <-c.Updates()
	assert.Equal(t, "file", u.Source)
	assert.False(t, c.SeenAllSources(), "api has not sent a SET yet")

	apiCh <- set(apiPod("a", "1"))
	u = <-c.Updates()
	assert.Equal(t, kubetypes.ADD, u.Op)
	require.Len(t, u.Pods, 1)
	assert.True(t, c.SeenAllSources())
}

// TestMergeTrustsTheResourceVersion: a pod the API server sends again at
// the same resourceVersion is not copied or compared (it cannot have
// changed); a new resourceVersion is compared as before.
func TestMergeTrustsTheResourceVersion(t *testing.T) {
	c := newConfig()
	ctx := context.Background()
	a := apiPod("a", "1")
	a.ResourceVersion = "10"
	c.Merge(ctx, "api", set(a))
	assert.Equal(t, []string{"ADD a"}, drain(c))
	stored := c.pods["api"]["1"]

	same := a.DeepCopy()
	same.Spec.Containers[0].Image = "not-compared" // a change no API server sends without a new version
	c.Merge(ctx, "api", set(same))
	assert.Empty(t, drain(c), "same resourceVersion: no change")
	assert.Same(t, stored, c.pods["api"]["1"], "kept, not copied")
	assert.Equal(t, "nginx", stored.Spec.Containers[0].Image)

	newer := a.DeepCopy()
	newer.ResourceVersion = "11"
	newer.Status.Phase = v1.PodRunning
	c.Merge(ctx, "api", set(newer))
	assert.Equal(t, []string{"RECONCILE a"}, drain(c), "a new version is compared")
	assert.Equal(t, "11", c.pods["api"]["1"].ResourceVersion, "and remembered")

	again := newer.DeepCopy()
	again.ResourceVersion = "12" // a new version with nothing the kubelet looks at changed
	c.Merge(ctx, "api", set(again))
	assert.Empty(t, drain(c))
	assert.Equal(t, "12", c.pods["api"]["1"].ResourceVersion)
}

// BenchmarkMergeSetOf100Pods: one pod of 100 changes, as each watch event
// of a burst does; the API server source sends all 100 every time.
//
//	go test -run '^$' -bench BenchmarkMergeSetOf100Pods ./mylib/config/
func BenchmarkMergeSetOf100Pods(b *testing.B) {
	c := newConfig()
	ctx := context.Background()
	pods := make([]*v1.Pod, 100)
	for i := range pods {
		pods[i] = apiPod(fmt.Sprintf("p%03d", i), fmt.Sprintf("uid-%03d", i))
		pods[i].ResourceVersion = "1"
	}
	c.Merge(ctx, "api", set(pods...))
	drain(c)
	b.ResetTimer()
	for i := range b.N {
		p := pods[i%len(pods)].DeepCopy()
		p.ResourceVersion = fmt.Sprint(i + 2)
		p.Status.Phase = v1.PodRunning
		pods[i%len(pods)] = p
		c.Merge(ctx, "api", set(pods...))
		drain(c)
	}
}
