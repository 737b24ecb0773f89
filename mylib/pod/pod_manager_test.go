package pod

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"mykubelet/mylib/kubetypes"
)

func staticPod(name, uid, hash string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid),
		Annotations: map[string]string{kubetypes.ConfigSourceAnnotationKey: "file", kubetypes.ConfigHashAnnotationKey: hash}}}
}

func mirrorOf(p *v1.Pod, uid string) *v1.Pod {
	m := p.DeepCopy()
	m.UID = types.UID(uid)
	m.Annotations[kubetypes.ConfigMirrorAnnotationKey] = p.Annotations[kubetypes.ConfigHashAnnotationKey]
	return m
}

func apiPod(name, uid string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid),
		Annotations: map[string]string{kubetypes.ConfigSourceAnnotationKey: "api"}}}
}

func TestManagerTranslatesStaticAndMirrorPods(t *testing.T) {
	for _, mirrorFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("mirrorFirst=%v", mirrorFirst), func(t *testing.T) {
			pm := NewBasicPodManager()
			static := staticPod("web-n1", "static-uid", "static-uid")
			mirror := mirrorOf(static, "mirror-uid")
			if mirrorFirst {
				pm.AddPod(mirror)
				pm.AddPod(static)
			} else {
				pm.AddPod(static)
				pm.AddPod(mirror)
			}

			got, ok := pm.GetMirrorPodByPod(static)
			assert.True(t, ok)
			assert.Equal(t, mirror, got)
			got, ok = pm.GetPodByMirrorPod(mirror)
			assert.True(t, ok)
			assert.Equal(t, static, got)
			assert.Equal(t, types.UID("static-uid"), pm.TranslatePodUID("mirror-uid"))
			assert.Equal(t, types.UID("other"), pm.TranslatePodUID("other"))

			p, m, wasMirror := pm.GetPodAndMirrorPod(mirror)
			assert.Equal(t, static, p)
			assert.Equal(t, mirror, m)
			assert.True(t, wasMirror)
			p, m, wasMirror = pm.GetPodAndMirrorPod(static)
			assert.Equal(t, static, p)
			assert.Equal(t, mirror, m)
			assert.False(t, wasMirror)

			_, ok = pm.GetPodByUID("mirror-uid")
			assert.False(t, ok, "mirror pods are not pods")
			assert.Equal(t, []*v1.Pod{static}, pm.GetPods())
		})
	}
}

func TestManagerLookups(t *testing.T) {
	pm := NewBasicPodManager()
	a, b := apiPod("b-pod", "1"), apiPod("a-pod", "2")
	pm.SetPods([]*v1.Pod{a, b})
	got, ok := pm.GetPodByName("default", "b-pod")
	assert.True(t, ok)
	assert.Equal(t, a, got)
	got, ok = pm.GetPodByFullName("a-pod_default")
	assert.True(t, ok)
	assert.Equal(t, b, got)
	got, ok = pm.GetPodByUID("1")
	assert.True(t, ok)
	assert.Equal(t, a, got)
	assert.Equal(t, []*v1.Pod{b, a}, pm.GetPods(), "sorted by namespace/name")

	a2 := a.DeepCopy()
	a2.Labels = map[string]string{"v": "2"}
	pm.UpdatePod(a2)
	got, _ = pm.GetPodByUID("1")
	assert.Equal(t, a2, got)

	pm.RemovePod(a)
	_, ok = pm.GetPodByUID("1")
	assert.False(t, ok)
	_, ok = pm.GetPodByName("default", "b-pod")
	assert.False(t, ok)
}

func TestManagerOrphanedMirrorPods(t *testing.T) {
	pm := NewBasicPodManager()
	static := staticPod("web-n1", "s", "s")
	mirror := mirrorOf(static, "m")
	pm.SetPods([]*v1.Pod{static, mirror})
	_, _, orphans := pm.GetPodsAndMirrorPods()
	assert.Empty(t, orphans)

	pm.RemovePod(static)
	pods, mirrors, orphans := pm.GetPodsAndMirrorPods()
	assert.Empty(t, pods)
	assert.Equal(t, []*v1.Pod{mirror}, mirrors)
	assert.Equal(t, []string{"web-n1_default"}, orphans)
	assert.Equal(t, types.UID("m"), pm.TranslatePodUID("m"), "no translation once the static pod is gone")

	pm.RemovePod(mirror)
	_, ok := pm.GetMirrorPodByPod(static)
	assert.False(t, ok)
}

func TestManagerRemovingOldMirrorKeepsNewOne(t *testing.T) {
	pm := NewBasicPodManager()
	static := staticPod("web-n1", "s", "s")
	oldMirror, newMirror := mirrorOf(static, "m1"), mirrorOf(static, "m2")
	pm.AddPod(static)
	pm.AddPod(oldMirror)
	pm.AddPod(newMirror) // the replacement arrives before the old one's REMOVE
	pm.RemovePod(oldMirror)
	got, ok := pm.GetMirrorPodByPod(static)
	assert.True(t, ok)
	assert.Equal(t, newMirror, got)
}

func TestManagerConcurrentUse(t *testing.T) {
	pm := NewBasicPodManager()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				p := staticPod(fmt.Sprintf("p%d-%d", i, j), fmt.Sprintf("%d-%d", i, j), "h")
				pm.AddPod(p)
				pm.AddPod(mirrorOf(p, fmt.Sprintf("m%d-%d", i, j)))
				pm.GetMirrorPodByPod(p)
				pm.GetPodsAndMirrorPods()
				pm.RemovePod(p)
			}
		}()
	}
	wg.Wait()
	pods, mirrors, orphans := pm.GetPodsAndMirrorPods()
	assert.Empty(t, pods)
	assert.Len(t, mirrors, 8*200)
	assert.Len(t, orphans, 8*200)
}
