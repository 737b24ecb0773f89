// Package pleg is the Pod Lifecycle Event Generator: it notices what changed
// in the container runtime and tells the kubelet's sync loop, one
// PodLifecycleEvent per change. Named after upstream's pkg/kubelet/pleg;
// GenericPLEG (generic.go) finds changes by listing everything every second
// ("relisting") and comparing with the list before; EventedPLEG
// (evented.go), when the kubelet turns it on, also reads the runtime's
// container events and relists a pod as soon as it changes.
//
//	cache := kubecontainer.NewCache()
//	p := pleg.NewGenericPLEG(runtime, make(chan *pleg.PodLifecycleEvent, pleg.ChannelCapacity),
//		&pleg.RelistDuration{RelistPeriod: pleg.RelistPeriod, RelistThreshold: pleg.RelistThreshold},
//		cache, clock.RealClock{})
//	go p.Run(ctx)
//	for e := range p.Watch() { … }
//
// Where it departs from upstream, and why (one line each):
//   - the EventedPLEG relists the pod an event names rather than
//     building its status from the event, and the relisting goes on every
//     second underneath (see EventedPLEG);
//   - Run(ctx) instead of Start, Stop and Update: the context stops it, and
//     nothing changes the relist period while it runs (upstream's Update
//     stretches it while its EventedPLEG works);
//   - the events of several pods are sent in the order of their UIDs
//     (upstream ranges over a map), so that a run repeats;
//   - its metrics are recorded into the *metrics.Metrics SetMetrics gives
//     it (a kubelet's own registry), not into process-wide series.
package pleg

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The kubelet's defaults (pkg/kubelet/kubelet.go).
const (
	// RelistPeriod is how often GenericPLEG lists the runtime.
	RelistPeriod = 1 * time.Second
	// RelistThreshold: Healthy() turns false when the last successful
	// relist is older than this.
	RelistThreshold = 3 * time.Minute
	// ChannelCapacity is the capacity of the event channel; when it is full,
	// events are dropped (with a warning), never waited for.
	ChannelCapacity = 1000
)

// RelistDuration holds the relist period and the health threshold.
type RelistDuration struct {
	// RelistPeriod is the time between two relists.
	RelistPeriod time.Duration
	// RelistThreshold must exceed RelistPeriod plus the time a relist takes.
	// A relist against a hung runtime ends at the CRI client's request
	// timeout (2 min by default), which is below the default threshold
	// (3 min): the PLEG logs the failed relist before it turns unhealthy.
	RelistThreshold time.Duration
}

// PodLifeCycleEventType is the kind of change an event reports.
type PodLifeCycleEventType string

// The event types, as upstream names them.
const (
	// ContainerStarted: the container (or sandbox) is now running.
	ContainerStarted PodLifeCycleEventType = "ContainerStarted"
	// ContainerDied: the container (or sandbox) is now exited.
	ContainerDied PodLifeCycleEventType = "ContainerDied"
	// ContainerRemoved: the container (or sandbox) is gone from the runtime.
	ContainerRemoved PodLifeCycleEventType = "ContainerRemoved"
	// PodSync: sync the pod, for a change no single event above describes
	// (e.g. its status could only now be read).
	PodSync PodLifeCycleEventType = "PodSync"
	// ContainerChanged: the container's state is now unknown (or created).
	// Generated, but, as upstream, never sent: nothing uses it yet.
	ContainerChanged PodLifeCycleEventType = "ContainerChanged"
)

// PodLifecycleEvent is one change of one pod.
type PodLifecycleEvent struct {
	// ID is the pod's UID.
	ID types.UID
	// Type is what happened.
	Type PodLifeCycleEventType
	// Data is the container (or sandbox) ID, as a string, for the container
	// events; unused for PodSync.
	Data any
}

// PodLifecycleEventGenerator is what the kubelet's sync loop needs of a PLEG.
type PodLifecycleEventGenerator interface {
	// Watch returns the channel the events arrive on.
	Watch() chan *PodLifecycleEvent
	// Healthy reports whether the PLEG relisted recently enough.
	Healthy() (bool, error)
}
