// Package secret is the kubelet's Secret manager, upstream's
// pkg/kubelet/secret with its default change detection strategy,
// "Watch": for each Secret a pod on the node references (a secret
// volume, a projected volume's secret source, env valueFrom or envFrom,
// imagePullSecrets) one reflector watches that single object by name, and
// the volume plugins, the environment and image pulls read it from there.
//
// Where it departs from upstream, and why: only the Watch strategy (no
// "Get" or "Cache" strategies: the course shows the default); the secret
// references of volume kinds this node has no plugin for (csi, rbd,
// cephfs, …) are not followed; and the watch-based cache's shortcuts
// listed in mylib/volume/util/manager.
package secret

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

// Manager serves the Secrets the node's pods reference.
type Manager interface {
	// GetSecret is the Secret from the watch, the cache's own copy
	// (never modify it); NotFound if the API has none, an error if no
	// registered pod references it.
	GetSecret(namespace, name string) (*v1.Secret, error)
	// RegisterPod starts watching what the pod references (called again
	// when the pod changes).
	RegisterPod(pod *v1.Pod)
	// UnregisterPod stops watching what only this pod referenced.
	UnregisterPod(pod *v1.Pod)
}

type secretManager struct{ m *manager.Manager }

// NewWatchingSecretManager returns the watch-based manager. client has
// the node's credentials; resyncInterval is the reflectors' resync period.
func NewWatchingSecretManager(client kubernetes.Interface, resyncInterval time.Duration) Manager {
	list := func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
		return client.CoreV1().Secrets(ns).List(ctx, o)
	}
	watchFn := func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
		return client.CoreV1().Secrets(ns).Watch(ctx, o)
	}
	c := manager.NewObjectCache(list, watchFn, func() runtime.Object { return &v1.Secret{} }, client,
		v1.Resource("secret"), resyncInterval)
	return &secretManager{m: manager.NewManager(c, getSecretNames)}
}

func (s *secretManager) GetSecret(namespace, name string) (*v1.Secret, error) {
	obj, err := s.m.GetObject(namespace, name)
	if err != nil {
		return nil, err
	}
	sec, ok := obj.(*v1.Secret)
	if !ok {
		return nil, fmt.Errorf("unexpected object type: %T", obj)
	}
	return sec, nil
}

func (s *secretManager) RegisterPod(pod *v1.Pod)   { s.m.RegisterPod(pod) }
func (s *secretManager) UnregisterPod(pod *v1.Pod) { s.m.UnregisterPod(pod) }

// getSecretNames is upstream's podutil.VisitPodSecretNames for the kinds
// this node serves: imagePullSecrets, secret volumes, projected secret
// sources, and the containers' (init, regular, ephemeral) env and envFrom.
func getSecretNames(pod *v1.Pod) sets.Set[string] {
	names := sets.New[string]()
	for _, r := range pod.Spec.ImagePullSecrets {
		names.Insert(r.Name)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil {
			names.Insert(v.Secret.SecretName)
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					names.Insert(s.Secret.Name)
				}
			}
		}
	}
	visit := func(envFrom []v1.EnvFromSource, env []v1.EnvVar) {
		for _, e := range envFrom {
			if e.SecretRef != nil {
				names.Insert(e.SecretRef.Name)
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				names.Insert(e.ValueFrom.SecretKeyRef.Name)
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
