package fakeruntime

import (
	"cmp"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerEventQueueSize is how many events each GetContainerEvents
// subscriber may have waiting to be sent, as containerd buffers 1000. A
// subscriber that falls further behind has its stream ended
// (ResourceExhausted): the runtime never waits for a reader.
const ContainerEventQueueSize = 1000

// containerEvents are the GetContainerEvents subscriptions. Every field is
// guarded by Runtime.mu.
type containerEvents struct {
	// queueSize is each new subscriber's queue (0: ContainerEventQueueSize;
	// tests make it small).
	queueSize int
	subs      map[*eventSubscriber]struct{}
	// stopped is closed when the runtime shuts down (stopContainerEvents):
	// every subscription ends, and a new one ends at once.
	stopped chan struct{}
}

// eventSubscriber is one GetContainerEvents call.
type eventSubscriber struct {
	queue chan *runtimeapi.ContainerEventResponse
	// overflowed is closed, and the subscriber forgotten, when an event
	// found its queue full.
	overflowed chan struct{}
}

// stoppedC returns the channel closed at shutdown. Caller holds r.mu.
func (e *containerEvents) stoppedC() chan struct{} {
	if e.stopped == nil {
		e.stopped = make(chan struct{})
	}
	return e.stopped
}

// GetContainerEvents streams the container and sandbox events that happen
// after the call, in the order they happened, as containerd does: each
// carries the sandbox's status and the statuses of all its containers
// after the change (a sandbox's events name the sandbox's ID as the
// container's). It returns nil when the caller's context ends or the
// runtime shuts down (Serve's context ends, or Close), and
// ResourceExhausted when the caller fell ContainerEventQueueSize events
// behind: the events are then lost, and the caller lists again.
//
// Unlike containerd, whose subscribers share one queue and whose full
// queue drops events silently, each call has a queue of its own and is
// told when it lost events.
func (r *Runtime) GetContainerEvents(_ *runtimeapi.GetEventsRequest, stream runtimeapi.RuntimeService_GetContainerEventsServer) error {
	r.mu.Lock()
	stopped := r.events.stoppedC()
	select {
	case <-stopped:
		r.mu.Unlock()
		return nil
	default:
	}
	size := r.events.queueSize
	if size <= 0 {
		size = ContainerEventQueueSize
	}
	sub := &eventSubscriber{queue: make(chan *runtimeapi.ContainerEventResponse, size), overflowed: make(chan struct{})}
	if r.events.subs == nil {
		r.events.subs = map[*eventSubscriber]struct{}{}
	}
	r.events.subs[sub] = struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.events.subs, sub)
		r.mu.Unlock()
	}()

	ctx := stream.Context()
	overflow := status.Errorf(codes.ResourceExhausted,
		"GetContainerEvents: the event queue overflowed (%d events not yet sent): events were lost, list the containers again", size)
	for {
		select { // an overflow wins over the events still queued: they have a gap
		case <-sub.overflowed:
			return overflow
		default:
		}
		select {
		case ev := <-sub.queue:
			if err := stream.Send(ev); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		case <-sub.overflowed:
			return overflow
		case <-ctx.Done():
			return nil
		case <-stopped:
			return nil
		}
	}
}

// stopContainerEvents ends every GetContainerEvents call, and those to
// come. Caller holds r.mu.
func (r *Runtime) stopContainerEvents() {
	stopped := r.events.stoppedC()
	select {
	case <-stopped:
	default:
		close(stopped)
	}
	clear(r.events.subs)
}

// generateAndSendContainerEvent hands an event about id (a container of
// s, or s itself) to every subscriber, without waiting: it is built here,
// under the lock, right after the change, so the events' order is the
// order of the changes. s may be gone already (its last status is sent);
// nil sends none. Caller holds r.mu.
func (r *Runtime) generateAndSendContainerEvent(eventType runtimeapi.ContainerEventType, s *sandbox, id string) {
	if len(r.events.subs) == 0 {
		return
	}
	ev := &runtimeapi.ContainerEventResponse{
		ContainerId:        id,
		ContainerEventType: eventType,
		CreatedAt:          r.now(),
	}
	if s != nil {
		ev.PodSandboxStatus = s.status()
		for _, c := range s.containersOldestFirst() {
			ev.ContainersStatuses = append(ev.ContainersStatuses, c.status())
		}
	}
	// The event is shared by the subscribers: gRPC only reads it.
	for sub := range r.events.subs {
		select {
		case sub.queue <- ev:
		default:
			close(sub.overflowed)
			delete(r.events.subs, sub)
		}
	}
}

// containerEvent sends eventType for container c. Caller holds r.mu.
func (r *Runtime) containerEvent(eventType runtimeapi.ContainerEventType, c *container) {
	r.generateAndSendContainerEvent(eventType, r.sandboxes[c.sandboxID], c.id)
}

// sandboxEvent sends eventType for sandbox s. Caller holds r.mu.
func (r *Runtime) sandboxEvent(eventType runtimeapi.ContainerEventType, s *sandbox) {
	r.generateAndSendContainerEvent(eventType, s, s.id)
}

// containersOldestFirst returns s's containers by creation time, then ID
// (a fake clock creates many at the same instant). Caller holds r.mu.
func (s *sandbox) containersOldestFirst() []*container {
	cs := make([]*container, 0, len(s.containers))
	for _, c := range s.containers {
		cs = append(cs, c)
	}
	slices.SortFunc(cs, func(a, b *container) int {
		return cmp.Or(cmp.Compare(a.createdAt, b.createdAt), cmp.Compare(a.id, b.id))
	})
	return cs
}

// EventSubscribers is how many GetContainerEvents streams are open: a
// client's stream misses the events before its subscription, so a test
// waits for it.
func (r *Runtime) EventSubscribers() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events.subs)
}
