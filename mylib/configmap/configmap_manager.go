// Package configmap is the kubelet's ConfigMap manager, upstream's
// pkg/kubelet/configmap with its default change detection strategy,
// "Watch": for each ConfigMap a pod on the node references (a configMap
// volume, a projected volume's configMap source, env valueFrom or
// envFrom) one reflector watches that single object by name, and the
// volume plugins and the environment read it from there.
//
// Where it departs from upstream, and why: only the Watch strategy (no
// "Get" or "Cache" strategies: the course shows the default), and the
// watch-based cache's shortcuts listed in mylib/volume/util/manager.
package configmap

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"mykubelet/mylib/volume/util/manager"
)

// Manager serves the ConfigMaps the node's pods reference.
type Manager interface {
	// GetConfigMap is the ConfigMap from the watch, the cache's own copy
	// (never modify it); NotFound if the API has none, an error if no
	// registered pod references it.
	GetConfigMap(namespace, name string) (*v1.ConfigMap, error)
	// RegisterPod starts watching what the pod references (called again
	// when the pod changes).
	RegisterPod(pod *v1.Pod)
	// UnregisterPod stops watching what only this pod referenced.
	UnregisterPod(pod *v1.Pod)
}

type configMapManager struct{ m *manager.Manager }

// NewWatchingConfigMapManager returns the watch-based manager. client has
// the node's credentials; resyncInterval is the reflectors' resync period.
func NewWatchingConfigMapManager(client kubernetes.Interface, resyncInterval time.Duration) Manager {
	list := func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
		return client.CoreV1().ConfigMaps(ns).List(ctx, o)
	}
	watchFn := func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
		return client.CoreV1().ConfigMaps(ns).Watch(ctx, o)
	}
	c := manager.NewObjectCache(list, watchFn, func() runtime.Object { return &v1.ConfigMap{} }, client,
		v1.Resource("configmap"), resyncInterval)
	return &configMapManager{m: manager.NewManager(c, getConfigMapNames)}
}

func (c *configMapManager) GetConfigMap(namespace, name string) (*v1.ConfigMap, error) {
	obj, err := c.m.GetObject(namespace, name)
	if err != nil {
		return nil, err
	}
	cm, ok := obj.(*v1.ConfigMap)
	if !ok {
		return nil, fmt.Errorf("unexpected object type: %T", obj)
	}
	return cm, nil
}

func (c *configMapManager) RegisterPod(pod *v1.Pod)   { c.m.RegisterPod(pod) }
func (c *configMapManager) UnregisterPod(pod *v1.Pod) { c.m.UnregisterPod(pod) }

// getConfigMapNames is upstream's podutil.VisitPodConfigmapNames: every
// ConfigMap the pod's volumes and containers (init, regular, ephemeral)
// name.
func getConfigMapNames(pod *v1.Pod) sets.Set[string] {
	names := sets.New[string]()
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil {
			names.Insert(v.ConfigMap.Name)
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					names.Insert(s.ConfigMap.Name)
				}
			}
		}
	}
	visit := func(envFrom []v1.EnvFromSource, env []v1.EnvVar) {
		for _, e := range envFrom {
			if e.ConfigMapRef != nil {
				names.Insert(e.ConfigMapRef.Name)
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				names.Insert(e.ValueFrom.ConfigMapKeyRef.Name)
			}
		}
	}
	for _, c := range pod.Spec.InitContainers {
		visit(c.EnvFrom, c.Env)
	}
	for _, c := range pod.Spec.Containers {
		visit(c.EnvFrom, c.Env)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		visit(c.EnvFrom, c.Env)
	}
	names.Delete("")
	return names
}
