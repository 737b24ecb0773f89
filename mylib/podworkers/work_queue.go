package podworkers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// WorkQueue holds pod UIDs to resync, each with the time it becomes due.
// Pod workers put a pod back after each sync (resync interval, or backoff
// after an error); the kubelet's sync loop takes the due ones every second.
// Upstream: pkg/kubelet/util/queue/work_queue.go.
type WorkQueue interface {
	// GetWork removes and returns the UIDs that are due.
	GetWork() []types.UID
	// Enqueue makes uid due after delay (replacing an earlier entry).
	Enqueue(uid types.UID, delay time.Duration)
}

type basicWorkQueue struct {
	clock clock.Clock
	lock  sync.Mutex
	queue map[types.UID]time.Time
}

// NewBasicWorkQueue returns an empty WorkQueue.
func NewBasicWorkQueue(clk clock.Clock) WorkQueue {
	return &basicWorkQueue{clock: clk, queue: map[types.UID]time.Time{}}
}

func (q *basicWorkQueue) GetWork() []types.UID {
	q.lock.Lock()
	defer q.lock.Unlock()
	now := q.clock.Now()
	var due []types.UID
	for uid, at := range q.queue {
		if !at.After(now) {
			due = append(due, uid)
			delete(q.queue, uid)
		}
	}
	return due
}

func (q *basicWorkQueue) Enqueue(uid types.UID, delay time.Duration) {
	q.lock.Lock()
	defer q.lock.Unlock()
	q.queue[uid] = q.clock.Now().Add(delay)
}
