package container

import (
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Cache holds the latest PodStatus of every pod the runtime knows, with the
// time it was read. The PLEG writes it; pod workers read it.
//
// Two clocks live in a cache: each entry's own timestamp (when that pod's
// status was read), and a global timestamp set by UpdateTime after a full
// relist, meaning "every entry is at least this fresh". A pod the runtime
// does not know has no entry; Get then returns an empty PodStatus with only
// the ID set, as upstream does.
type Cache interface {
	// Get returns the cached status of the pod without waiting.
	Get(types.UID) (*PodStatus, error)
	// GetNewerThan blocks until the cache holds a status of the pod that is
	// newer than minTime (its own timestamp, or the global one, is after
	// minTime), then returns it.
	GetNewerThan(uid types.UID, minTime time.Time) (*PodStatus, error)
	// GetNewerThanContext is GetNewerThan that gives up, with ctx's error,
	// when ctx ends first. Upstream has only GetNewerThan; a pod worker
	// waiting in it when the kubelet stops (the PLEG stopped too) would
	// wait forever, and our kubelet waits for its workers before it returns.
	GetNewerThanContext(ctx context.Context, uid types.UID, minTime time.Time) (*PodStatus, error)
	// Set stores the status (or the error met reading it) read at
	// timestamp, and wakes the GetNewerThan callers it satisfies. It returns
	// false, storing nothing, when the cache already holds a newer entry.
	Set(uid types.UID, status *PodStatus, err error, timestamp time.Time) (updated bool)
	// Delete forgets the pod.
	Delete(types.UID)
	// UpdateTime sets the global timestamp: every entry is at least this
	// fresh. It wakes every GetNewerThan caller it satisfies.
	UpdateTime(time.Time)
}

// entry is one pod's cached status.
type entry struct {
	status   *PodStatus
	err      error
	modified time.Time
}

// waiter is a blocked GetNewerThan call.
type waiter struct {
	minTime time.Time
	ch      chan *entry // buffered (1): notify never blocks
}

type cache struct {
	mu   sync.Mutex
	pods map[types.UID]*entry
	// global is the time of the last full relist; zero until the first.
	global time.Time
	// waiters are the GetNewerThan calls still blocked, by pod.
	waiters map[types.UID][]*waiter
}

// NewCache returns an empty Cache. Its global timestamp is unset until the
// first UpdateTime, so GetNewerThan of an unknown pod blocks until then.
func NewCache() Cache {
	return &cache{pods: map[types.UID]*entry{}, waiters: map[types.UID][]*waiter{}}
}

func (c *cache) Get(uid types.UID) (*PodStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.get(uid)
	return e.status, e.err
}

func (c *cache) GetNewerThan(uid types.UID, minTime time.Time) (*PodStatus, error) {
	return c.GetNewerThanContext(context.Background(), uid, minTime)
}

func (c *cache) GetNewerThanContext(ctx context.Context, uid types.UID, minTime time.Time) (*PodStatus, error) {
	c.mu.Lock()
	if e := c.getIfNewerThan(uid, minTime); e != nil {
		c.mu.Unlock()
		return e.status, e.err
	}
	w := &waiter{minTime: minTime, ch: make(chan *entry, 1)}
	c.waiters[uid] = append(c.waiters[uid], w)
	c.mu.Unlock()
	select {
	case e := <-w.ch:
		return e.status, e.err
	case <-ctx.Done():
		c.mu.Lock()
		defer c.mu.Unlock()
		ws := slices.DeleteFunc(c.waiters[uid], func(x *waiter) bool { return x == w })
		if len(ws) == 0 {
			delete(c.waiters, uid)
		} else {
			c.waiters[uid] = ws
		}
		return nil, ctx.Err()
	}
}

func (c *cache) Set(uid types.UID, status *PodStatus, err error, timestamp time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.pods[uid]; ok && old.modified.After(timestamp) {
		return false // an older read must not overwrite a newer one
	}
	c.pods[uid] = &entry{status: status, err: err, modified: timestamp}
	c.notify(uid, timestamp)
	return true
}

func (c *cache) Delete(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pods, uid)
}

func (c *cache) UpdateTime(timestamp time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.global = timestamp
	for uid := range c.waiters {
		c.notify(uid, timestamp)
	}
}

// get returns the pod's entry, or an empty status when there is none: no
// entry means the runtime has nothing of this pod. Caller holds mu.
func (c *cache) get(uid types.UID) *entry {
	if e, ok := c.pods[uid]; ok {
		return e
	}
	return &entry{status: &PodStatus{ID: uid}}
}

// getIfNewerThan returns the pod's entry if it is known to be newer than
// minTime, else nil. Caller holds mu.
func (c *cache) getIfNewerThan(uid types.UID, minTime time.Time) *entry {
	globalNewer := !c.global.IsZero() && c.global.After(minTime)
	e, ok := c.pods[uid]
	switch {
	case ok && (globalNewer || e.modified.After(minTime)):
		return e
	case !ok && globalNewer:
		return c.get(uid)
	}
	return nil
}

// notify wakes the pod's waiters whose minTime is before timestamp (a status
// read at timestamp is newer than they asked for). Caller holds mu.
func (c *cache) notify(uid types.UID, timestamp time.Time) {
	var still []*waiter
	for _, w := range c.waiters[uid] {
		if timestamp.After(w.minTime) {
			w.ch <- c.get(uid)
			continue
		}
		still = append(still, w)
	}
	if len(still) == 0 {
		delete(c.waiters, uid)
	} else {
		c.waiters[uid] = still
	}
}
