// Package manager is upstream's pkg/kubelet/util/manager in small: the
// watch-based object cache behind the kubelet's ConfigMap and Secret
// managers (mylib/configmap, mylib/secret). For every object a pod on the
// node references it runs one reflector that lists and watches exactly
// that object (fieldSelector metadata.name=<name>), with the node's
// credentials: the Node authorizer lets a node list and watch a Secret or
// ConfigMap by name only when a pod bound to it references it.
//
// Where it departs from upstream, and why: an immutable object keeps its
// reflector (upstream stops it: a saving the course does not need), and
// an idle reflector is not stopped after a while without Get (upstream's
// maxIdleTime); the reflector goes when the last pod that references the
// object is unregistered. It lives under mylib/volume/util because the
// course's library has no kubelet/util package.
package manager

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// SyncTimeout is how long Get waits for an object's first list (upstream:
// one second, polled every 10 ms).
const SyncTimeout = time.Second

// ListFunc and WatchFunc reach the API for one namespace.
type (
	ListFunc  func(ctx context.Context, namespace string, opts metav1.ListOptions) (runtime.Object, error)
	WatchFunc func(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
)

type objectKey struct{ namespace, name string }

// cacheStore remembers whether the reflector has listed once (Replace is
// what a list ends in).
type cacheStore struct {
	cache.Store
	mu     sync.Mutex
	synced bool
}

func (s *cacheStore) Replace(list []interface{}, rv string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.synced = true
	return s.Store.Replace(list, rv)
}

func (s *cacheStore) hasSynced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.synced
}

type objectCacheItem struct {
	refCount int
	store    *cacheStore
	cancel   context.CancelFunc
	done     chan struct{}
}

// ObjectCache keeps one reflector per referenced object.
type ObjectCache struct {
	list          ListFunc
	watch         WatchFunc
	newObject     func() runtime.Object
	client        any // tells the reflector whether the client can stream lists
	groupResource schema.GroupResource
	resync        time.Duration

	mu    sync.Mutex
	items map[objectKey]*objectCacheItem
}

// NewObjectCache returns a cache of objects of groupResource (for the
// NotFound error: `configmap "x" not found`). client is the clientset the
// functions use; a fake one makes the reflector fall back to list+watch.
func NewObjectCache(list ListFunc, watchFn WatchFunc, newObject func() runtime.Object, client any, groupResource schema.GroupResource, resync time.Duration) *ObjectCache {
	return &ObjectCache{list: list, watch: watchFn, newObject: newObject, client: client,
		groupResource: groupResource, resync: resync, items: map[objectKey]*objectCacheItem{}}
}

// AddReference counts one more reference to the object and starts its
// reflector on the first.
func (c *ObjectCache) AddReference(namespace, name string) {
	key := objectKey{namespace, name}
	c.mu.Lock()
	defer c.mu.Unlock()
	if item, ok := c.items[key]; ok {
		item.refCount++
		return
	}
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return c.list(ctx, namespace, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return c.watch(ctx, namespace, o)
		},
	}
	store := &cacheStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc)}
	r := cache.NewReflectorWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, c.client), c.newObject(), store,
		cache.ReflectorOptions{Name: fmt.Sprintf("object-%q/%q", namespace, name), ResyncPeriod: c.resync})
	ctx, cancel := context.WithCancel(context.Background())
	item := &objectCacheItem{refCount: 1, store: store, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(item.done)
		r.RunWithContext(ctx)
	}()
	c.items[key] = item
}

// DeleteReference drops one reference; the last one stops the reflector
// and waits for it.
func (c *ObjectCache) DeleteReference(namespace, name string) {
	key := objectKey{namespace, name}
	c.mu.Lock()
	item, ok := c.items[key]
	if !ok {
		c.mu.Unlock()
		return
	}
	item.refCount--
	if item.refCount > 0 {
		c.mu.Unlock()
		return
	}
	delete(c.items, key)
	c.mu.Unlock()
	item.cancel()
	<-item.done
}

// Watching tells whether a reflector runs for the object.
func (c *ObjectCache) Watching(namespace, name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.items[objectKey{namespace, name}]
	return ok
}

// Get is the object from its reflector's store, after waiting up to
// SyncTimeout for the first list. An object no pod references is an
// error; one the API does not have is NotFound.
func (c *ObjectCache) Get(namespace, name string) (runtime.Object, error) {
	c.mu.Lock()
	item, ok := c.items[objectKey{namespace, name}]
	c.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("object %q/%q not registered", namespace, name)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, SyncTimeout, true,
		func(context.Context) (bool, error) { return item.store.hasSynced(), nil })
	if err != nil {
		return nil, fmt.Errorf("failed to sync %s cache: %w", c.groupResource.String(), err)
	}
	obj, exists, err := item.store.GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, apierrors.NewNotFound(c.groupResource, name)
	}
	return obj.(runtime.Object), nil
}

// Manager is upstream's cacheBasedManager: it registers the objects a pod
// references (names from getReferencedObjects) with the cache.
type Manager struct {
	cache                *ObjectCache
	getReferencedObjects func(*v1.Pod) sets.Set[string]

	mu             sync.Mutex
	registeredPods map[objectKey]*v1.Pod
}

// NewManager returns a manager over cache.
func NewManager(c *ObjectCache, getReferencedObjects func(*v1.Pod) sets.Set[string]) *Manager {
	return &Manager{cache: c, getReferencedObjects: getReferencedObjects, registeredPods: map[objectKey]*v1.Pod{}}
}

// GetObject reads through the cache.
func (m *Manager) GetObject(namespace, name string) (runtime.Object, error) {
	return m.cache.Get(namespace, name)
}

// RegisterPod references the pod's objects, then releases what its
// previous version referenced (in that order, so a name both reference
// keeps its reflector).
func (m *Manager) RegisterPod(pod *v1.Pod) {
	names := m.getReferencedObjects(pod)
	m.mu.Lock()
	defer m.mu.Unlock()
	for name := range names {
		m.cache.AddReference(pod.Namespace, name)
	}
	key := objectKey{pod.Namespace, pod.Name}
	prev := m.registeredPods[key]
	m.registeredPods[key] = pod
	if prev != nil {
		for name := range m.getReferencedObjects(prev) {
			m.cache.DeleteReference(prev.Namespace, name)
		}
	}
}

// UnregisterPod releases the pod's objects.
func (m *Manager) UnregisterPod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := objectKey{pod.Namespace, pod.Name}
	prev := m.registeredPods[key]
	delete(m.registeredPods, key)
	if prev != nil {
		for name := range m.getReferencedObjects(prev) {
			m.cache.DeleteReference(prev.Namespace, name)
		}
	}
}

// Watching tells whether the object's reflector runs (for tests and
// debugging).
func (m *Manager) Watching(namespace, name string) bool { return m.cache.Watching(namespace, name) }
