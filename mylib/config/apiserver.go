package config

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"mykubelet/mylib/kubetypes"
)

// SourceApiserver sends the pods bound to this node: a ListWatch with the
// field selector spec.nodeName=<node> (the only pods the Node authorizer
// lets a node list) feeding an UndeltaStore, which hands over the whole list
// after every change.
type SourceApiserver struct {
	lw      cache.ListerWatcher
	updates chan<- kubetypes.PodUpdate
}

// NewSourceApiserver returns the API server source for nodeName. Run starts it.
func NewSourceApiserver(client kubernetes.Interface, nodeName string, updates chan<- kubetypes.PodUpdate) *SourceApiserver {
	selector := fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	pods := client.CoreV1().Pods(metav1.NamespaceAll)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return pods.Watch(ctx, o)
		},
	}
	return &SourceApiserver{lw: lw, updates: updates}
}

// Run lists and watches until ctx ends, relisting after any watch error.
func (s *SourceApiserver) Run(ctx context.Context) {
	send := func(objs []interface{}) {
		pods := make([]*v1.Pod, 0, len(objs))
		for _, o := range objs {
			pods = append(pods, o.(*v1.Pod))
		}
		select {
		case s.updates <- kubetypes.PodUpdate{Pods: pods, Op: kubetypes.SET, Source: kubetypes.ApiserverSource}:
		case <-ctx.Done():
		}
	}
	klog.InfoS("Watching apiserver")
	r := cache.NewReflectorWithOptions(s.lw, &v1.Pod{}, cache.NewUndeltaStore(send, cache.MetaNamespaceKeyFunc),
		cache.ReflectorOptions{Name: "pods (apiserver source)"})
	r.RunWithContext(ctx)
}
