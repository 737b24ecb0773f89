package manager

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
)

func newCache(client *fake.Clientset) *ObjectCache {
	return NewObjectCache(
		func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().ConfigMaps(ns).List(ctx, o)
		},
		func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
			return client.CoreV1().ConfigMaps(ns).Watch(ctx, o)
		},
		func() runtime.Object { return &v1.ConfigMap{} }, client, v1.Resource("configmap"), 0)
}

func TestOneReflectorPerObjectReferenceCounted(t *testing.T) {
	client := fake.NewClientset(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}})
	c := newCache(client)
	c.AddReference("ns", "a")
	c.AddReference("ns", "a")
	if _, err := c.Get("ns", "a"); err != nil {
		t.Fatal(err)
	}
	lists := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "list" {
			lists++
		}
	}
	if lists != 1 {
		t.Errorf("%d lists for two references, want one reflector's one list", lists)
	}
	c.DeleteReference("ns", "a")
	if !c.Watching("ns", "a") {
		t.Fatal("one reference left, but the reflector stopped")
	}
	c.DeleteReference("ns", "a")
	if c.Watching("ns", "a") {
		t.Fatal("no reference left, but the reflector runs")
	}
	if _, err := c.Get("ns", "a"); err == nil || err.Error() != `object "ns"/"a" not registered` {
		t.Errorf("err = %v", err)
	}
	c.DeleteReference("ns", "a") // one too many: harmless
}
