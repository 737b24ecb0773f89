package kubelet

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	kubecontainer "mykubelet/mylib/container"
)

// ReasonCache remembers, per pod and container, why the container's last
// start failed (e.g. CrashLoopBackOff, ErrImagePull), so the pod's status
// can show it as the container's waiting reason. Upstream
// pkg/kubelet/reason_cache.go keeps an LRU of 1000; this keeps a map that
// RemovePod empties when the pod goes.
type ReasonCache struct {
	mu    sync.RWMutex
	cache map[types.UID]map[string]ReasonItem
}

// ReasonItem is a start failure: the error (its text is the reason) and a
// message for people.
type ReasonItem struct {
	Err     error
	Message string
}

// NewReasonCache returns an empty ReasonCache.
func NewReasonCache() *ReasonCache {
	return &ReasonCache{cache: map[types.UID]map[string]ReasonItem{}}
}

// Update records the start failures of a sync and forgets those of
// containers that started.
func (c *ReasonCache) Update(uid types.UID, result kubecontainer.PodSyncResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range result.SyncResults {
		if r.Action != kubecontainer.StartContainer && r.Action != kubecontainer.InitContainer {
			continue
		}
		name, _ := r.Target.(string)
		if r.Error == nil {
			delete(c.cache[uid], name)
			continue
		}
		if c.cache[uid] == nil {
			c.cache[uid] = map[string]ReasonItem{}
		}
		c.cache[uid][name] = ReasonItem{Err: r.Error, Message: r.Message}
	}
}

// Get returns the last start failure of a container.
func (c *ReasonCache) Get(uid types.UID, name string) (ReasonItem, bool) {
	if c == nil {
		return ReasonItem{}, false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	r, ok := c.cache[uid][name]
	return r, ok
}

// RemovePod forgets a pod.
func (c *ReasonCache) RemovePod(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.cache, uid)
}
