package configmap

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func podWithVolume(name, cm string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: "uid-" + "name"},
		Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "config", VolumeSource: v1.VolumeSource{
			ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: cm}}}}}}}
}

func cm(name, v string) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string]string{"k": v}}
}

// eventually polls cond; the bound is generous (the watch is asynchronous)
// and only a broken watch reaches it.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestUpdateSeenThroughTheWatch(t *testing.T) {
	client := fake.NewClientset(cm("game", "1"))
	m := NewWatchingConfigMapManager(client, 0)
	pod := podWithVolume("p", "game")
	m.RegisterPod(pod)
	defer m.UnregisterPod(pod)

	got, err := m.GetConfigMap("ns", "game")
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["k"] != "1" {
		t.Fatalf("k = %q", got.Data["k"])
	}
	if _, err := client.CoreV1().ConfigMaps("ns").Update(context.Background(), cm("game", "2"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the update reaches the manager", func() bool {
		got, err := m.GetConfigMap("ns", "game")
		return err == nil && got.Data["k"] == "2"
	})
	// One object, by name: what the Node authorizer allows.
	var lists, watches int
	for _, a := range client.Actions() {
		lw, ok := a.(k8stesting.ListAction)
		if !ok {
			if w, ok := a.(k8stesting.WatchAction); ok {
				watches++
				if s := w.GetWatchRestrictions().Fields.String(); s != "metadata.name=game" {
					t.Errorf("watch with field selector %q, want metadata.name=game", s)
				}
			}
			continue
		}
		lists++
		if s := lw.GetListRestrictions().Fields.String(); s != "metadata.name=game" {
			t.Errorf("list with field selector %q, want metadata.name=game", s)
		}
	}
	if lists == 0 || watches == 0 {
		t.Errorf("%d lists and %d watches, want at least one of each", lists, watches)
	}
}

func TestMissingObjectIsNotFound(t *testing.T) {
	m := NewWatchingConfigMapManager(fake.NewClientset(), 0)
	pod := podWithVolume("p", "x")
	m.RegisterPod(pod)
	defer m.UnregisterPod(pod)
	_, err := m.GetConfigMap("ns", "x")
	if !apierrors.IsNotFound(err) || err.Error() != `configmap "x" not found` {
		t.Errorf("err = %v, want configmap \"x\" not found", err)
	}
}

func TestNotReferencedGetErrorsAndUnregisterStops(t *testing.T) {
	client := fake.NewClientset(cm("game", "1"), cm("other", "1"))
	m := NewWatchingConfigMapManager(client, 0)
	if _, err := m.GetConfigMap("ns", "game"); err == nil {
		t.Error("Get of an object no pod references succeeded")
	}
	a, b := podWithVolume("a", "game"), podWithVolume("b", "game")
	m.RegisterPod(a)
	m.RegisterPod(b)
	if _, err := m.GetConfigMap("ns", "other"); err == nil || apierrors.IsNotFound(err) {
		t.Errorf("Get of an unreferenced object: %v, want a not-registered error", err)
	}
	m.UnregisterPod(a)
	if _, err := m.GetConfigMap("ns", "game"); err != nil {
		t.Errorf("b still references game: %v", err)
	}
	m.UnregisterPod(b)
	if _, err := m.GetConfigMap("ns", "game"); err == nil {
		t.Error("Get after the last pod went succeeded")
	}
	if m.(*configMapManager).m.Watching("ns", "game") {
		t.Error("the reflector still runs")
	}
}

func TestReRegisterFollowsThePodsReferences(t *testing.T) {
	m := NewWatchingConfigMapManager(fake.NewClientset(cm("one", "1"), cm("two", "2")), 0)
	m.RegisterPod(podWithVolume("p", "one"))
	m.RegisterPod(podWithVolume("p", "two"))
	mm := m.(*configMapManager).m
	if mm.Watching("ns", "one") || !mm.Watching("ns", "two") {
		t.Errorf("watching one=%v two=%v, want only two", mm.Watching("ns", "one"), mm.Watching("ns", "two"))
	}
	m.UnregisterPod(podWithVolume("p", "two"))
}

func TestReferencesFromEnvAndProjected(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		Volumes: []v1.Volume{{VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"}}}}}}}},
		InitContainers: []v1.Container{{EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "init-env"}}}}}},
		Containers: []v1.Container{{Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{
			ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "key-env"}, Key: "k"}}}}}},
	}}
	got := getConfigMapNames(pod)
	for _, n := range []string{"kube-root-ca.crt", "init-env", "key-env"} {
		if !got.Has(n) {
			t.Errorf("%s not referenced (got %v)", n, got.UnsortedList())
		}
	}
	if got.Len() != 3 {
		t.Errorf("got %v", got.UnsortedList())
	}
}
