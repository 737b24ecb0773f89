package pleg

import (
	"context"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// EventedPLEGMaxStreamRetries is how many times in a row the EventedPLEG
// opens the runtime's event stream before it gives up and leaves the
// relisting alone to find changes (upstream's eventedPlegMaxStreamRetries).
const EventedPLEGMaxStreamRetries = 5

// EventedPLEG hears of a change when it happens instead of at the next
// relist: it reads the runtime's stream of container events (the CRI's
// GetContainerEvents: a container or sandbox was created, started,
// stopped or deleted) and relists the pod each event names at once
// (GenericPLEG.RelistPod). The events and the cache entry are the ones the
// relist would have made, up to a second sooner; the GenericPLEG keeps
// relisting every period underneath, as the safety net and the health
// check. Upstream's EventedPLEG (pkg/kubelet/pleg/evented.go, behind the
// EventedPLEG feature gate, off by default) differs in two ways:
//   - upstream builds the pod's status from the event alone, which holds
//     only that event's sandbox; we list the whole pod, so a pod with an
//     old sandbox is never taken for one without;
//   - upstream stretches the relist period to 300 s while the stream
//     works; we keep relisting every second, so that a pod worker waiting
//     for the cache (GetNewerThan) never waits longer than it did before.
type EventedPLEG struct {
	generic *GenericPLEG
	runtime runtimeapi.RuntimeServiceClient

	// mu guards dirty, the pods events named that are not relisted yet;
	// wake (capacity 1) tells the relisting goroutine there are some.
	mu    sync.Mutex
	dirty []types.UID
	wake  chan struct{}
}

// NewEventedPLEG returns an EventedPLEG that reads runtime's events and
// relists pods through generic (whose Run must run too).
func NewEventedPLEG(generic *GenericPLEG, runtime runtimeapi.RuntimeServiceClient) *EventedPLEG {
	if generic == nil || runtime == nil {
		panic("pleg.NewEventedPLEG: generic and runtime are required")
	}
	return &EventedPLEG{generic: generic, runtime: runtime, wake: make(chan struct{}, 1)}
}

// Run reads the event stream until ctx ends. When the stream cannot be
// opened, or breaks, it opens it again after a relist period; after
// EventedPLEGMaxStreamRetries failures in a row it logs that it falls back
// to relisting and returns.
func (e *EventedPLEG) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { e.relistDirty(ctx) })

	for failures := 0; ; {
		heard, err := e.watch(ctx)
		if ctx.Err() != nil {
			return
		}
		if heard {
			failures = 0 // the stream worked: a new failure starts a new count
		}
		failures++
		if failures >= EventedPLEGMaxStreamRetries {
			logger.Error(err, "Fall back to Generic PLEG relisting since Evented PLEG is not working")
			e.stopRelisting()
			return
		}
		logger.Info("Evented PLEG: Failed to get container events, retrying", "err", err, "attempt", failures)
		t := e.generic.clock.NewTimer(e.generic.duration.RelistPeriod)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// watch opens the stream and marks the pod of each event dirty until the
// stream ends. heard is true when at least one event came.
func (e *EventedPLEG) watch(ctx context.Context) (heard bool, err error) {
	stream, err := e.runtime.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		return false, err
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			return heard, err
		}
		heard = true
		if uid := types.UID(ev.GetPodSandboxStatus().GetMetadata().GetUid()); uid != "" && worthARelist(ev) {
			e.markDirty(uid)
		}
	}
}

// worthARelist: the event says something the kubelet acts on. A container
// or sandbox that was only created is not (the relist's ContainerChanged
// is never sent either), nor is a sandbox that started: the kubelet
// started it itself and goes on with its containers in the same sync. A
// container that started, or anything that stopped or was deleted, is.
func worthARelist(ev *runtimeapi.ContainerEventResponse) bool {
	switch ev.GetContainerEventType() {
	case runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT:
		return false
	case runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
		return ev.GetContainerId() != ev.GetPodSandboxStatus().GetId()
	}
	return true
}

func (e *EventedPLEG) markDirty(uid types.UID) {
	e.mu.Lock()
	if !slices.Contains(e.dirty, uid) {
		e.dirty = append(e.dirty, uid)
	}
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// stopRelisting has relistDirty return once the pods marked are relisted.
func (e *EventedPLEG) stopRelisting() { close(e.wake) }

// relistDirty relists the pods events named, each once however many
// events named it meanwhile, in the order they were first named.
func (e *EventedPLEG) relistDirty(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case _, open := <-e.wake:
			e.mu.Lock()
			uids := e.dirty
			e.dirty = nil
			e.mu.Unlock()
			for _, uid := range uids {
				if ctx.Err() != nil {
					return
				}
				e.generic.RelistPod(ctx, uid)
			}
			if !open {
				return
			}
		}
	}
}
