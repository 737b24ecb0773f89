package pleg

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/metrics"
)

// GenericPLEG finds changes by relisting: every RelistPeriod it asks the
// runtime for all pods (GetPods(all=true)), compares each container's state
// with the previous list, emits an event per change, and refreshes the pod
// cache for each pod that changed.
//
// It misses a container that is created, exits and is removed between two
// relists; the kubelet's periodic sync is the safety net for that.
type GenericPLEG struct {
	runtime      kubecontainer.Runtime
	eventChannel chan *PodLifecycleEvent
	cache        kubecontainer.Cache
	clock        clock.Clock
	duration     RelistDuration

	// relistMu serializes relists; podRecords and podsToReinspect belong
	// to the relist.
	relistMu        sync.Mutex
	podRecords      podRecords
	podsToReinspect map[types.UID]bool

	// relistTime is the start of the last successful relist (a time.Time).
	relistTime atomic.Value
	// discarded counts events dropped because the channel was full.
	discarded atomic.Int64
	// metrics records the relists (SetMetrics); nil records nothing.
	metrics *metrics.Metrics
}

var _ PodLifecycleEventGenerator = (*GenericPLEG)(nil)

// plegContainerState is a container's state as the PLEG compares it: the
// container states plus "non-existent".
type plegContainerState string

const (
	plegContainerRunning     plegContainerState = "running"
	plegContainerExited      plegContainerState = "exited"
	plegContainerUnknown     plegContainerState = "unknown"
	plegContainerNonExistent plegContainerState = "non-existent"
)

// convertState maps a container state to a PLEG state. "created" counts as
// unknown: the kubelet does not act on it.
func convertState(state kubecontainer.State) plegContainerState {
	switch state {
	case kubecontainer.ContainerStateRunning:
		return plegContainerRunning
	case kubecontainer.ContainerStateExited:
		return plegContainerExited
	default: // created, unknown, or anything a runtime might invent
		return plegContainerUnknown
	}
}

// podRecord is a pod as the previous relist (old) and this one (current)
// saw it.
type podRecord struct {
	old     *kubecontainer.Pod
	current *kubecontainer.Pod
}

type podRecords map[types.UID]*podRecord

// NewGenericPLEG returns a PLEG that sends events on eventChannel (make it
// ChannelCapacity long) and keeps cache up to date. Panics on a nil runtime,
// cache or clock, or a relist period or threshold that is not positive: that
// is a programming error (flags are checked before they get here).
func NewGenericPLEG(runtime kubecontainer.Runtime, eventChannel chan *PodLifecycleEvent,
	relistDuration *RelistDuration, cache kubecontainer.Cache, clk clock.Clock) *GenericPLEG {
	if runtime == nil || cache == nil || clk == nil || relistDuration == nil || eventChannel == nil {
		panic("pleg.NewGenericPLEG: runtime, eventChannel, relistDuration, cache and clock are required")
	}
	if relistDuration.RelistPeriod <= 0 || relistDuration.RelistThreshold <= 0 {
		panic(fmt.Sprintf("pleg.NewGenericPLEG: relist period (%v) and threshold (%v) must be positive", relistDuration.RelistPeriod, relistDuration.RelistThreshold))
	}
	return &GenericPLEG{
		runtime:         runtime,
		eventChannel:    eventChannel,
		cache:           cache,
		clock:           clk,
		duration:        *relistDuration,
		podRecords:      podRecords{},
		podsToReinspect: map[types.UID]bool{},
	}
}

// SetMetrics has the PLEG record its relists in m (upstream's
// kubelet_pleg_relist_duration_seconds and _interval_seconds,
// kubelet_pleg_discard_events, kubelet_pleg_last_seen_seconds) and the
// runtime's pods and containers (kubelet_running_pods,
// kubelet_running_containers). Call it before Run.
func (g *GenericPLEG) SetMetrics(m *metrics.Metrics) { g.metrics = m }

// Watch returns the channel events are sent on.
func (g *GenericPLEG) Watch() chan *PodLifecycleEvent { return g.eventChannel }

// Run relists at once, then RelistPeriod after the end of each relist, until
// ctx ends.
func (g *GenericPLEG) Run(ctx context.Context) {
	g.Relist(ctx)
	timer := g.clock.NewTimer(g.duration.RelistPeriod)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
			g.Relist(ctx)
			timer.Reset(g.duration.RelistPeriod)
		}
	}
}

// Healthy is false until the first successful relist, and when the last one
// started more than RelistThreshold ago (the runtime hangs, or the relist
// itself does): the kubelet then reports "PLEG is not healthy" and the node
// NotReady.
func (g *GenericPLEG) Healthy() (bool, error) {
	last := g.getRelistTime()
	if last.IsZero() {
		return false, fmt.Errorf("pleg has yet to be successful")
	}
	g.metrics.SetPLEGLastSeen(last) // so that one can alert on time() - kubelet_pleg_last_seen_seconds
	if elapsed := g.clock.Since(last); elapsed > g.duration.RelistThreshold {
		return false, fmt.Errorf("pleg was last seen active %v ago; threshold is %v", elapsed, g.duration.RelistThreshold)
	}
	return true, nil
}

// DiscardedEvents is how many events were dropped because the channel was
// full (upstream's pleg_discard_events metric).
func (g *GenericPLEG) DiscardedEvents() int64 { return g.discarded.Load() }

func (g *GenericPLEG) getRelistTime() time.Time {
	t, _ := g.relistTime.Load().(time.Time) // zero before the first relist
	return t
}

// generateEvents returns the events for one container whose state went from
// oldState to newState.
func generateEvents(podID types.UID, cid string, oldState, newState plegContainerState) []*PodLifecycleEvent {
	if newState == oldState {
		return nil
	}
	switch newState {
	case plegContainerRunning:
		return []*PodLifecycleEvent{{ID: podID, Type: ContainerStarted, Data: cid}}
	case plegContainerExited:
		return []*PodLifecycleEvent{{ID: podID, Type: ContainerDied, Data: cid}}
	case plegContainerUnknown:
		return []*PodLifecycleEvent{{ID: podID, Type: ContainerChanged, Data: cid}}
	case plegContainerNonExistent:
		if oldState == plegContainerExited {
			// Its death was reported already.
			return []*PodLifecycleEvent{{ID: podID, Type: ContainerRemoved, Data: cid}}
		}
		// It vanished without being seen dead: report both.
		return []*PodLifecycleEvent{{ID: podID, Type: ContainerDied, Data: cid}, {ID: podID, Type: ContainerRemoved, Data: cid}}
	}
	panic(fmt.Sprintf("pleg: unknown container state %q", newState))
}

// Relist lists the runtime once, emits the events of what changed since the
// previous relist, and updates the cache.
func (g *GenericPLEG) Relist(ctx context.Context) {
	g.relistMu.Lock()
	defer g.relistMu.Unlock()
	logger := klog.FromContext(ctx)

	timestamp := g.clock.Now()
	var interval time.Duration // since the previous successful relist began
	if last := g.getRelistTime(); !last.IsZero() {
		interval = timestamp.Sub(last)
	}
	defer func() { g.metrics.ObservePLEGRelist(g.clock.Since(timestamp), interval) }()
	pods, err := g.runtime.GetPods(ctx, true)
	if err != nil {
		logger.Error(err, "GenericPLEG: unable to retrieve pods")
		return // relistTime stays old: Healthy() will notice if this lasts
	}
	g.relistTime.Store(timestamp)
	g.updateRunningPodAndContainerMetrics(pods)
	g.podRecords.setCurrent(pods)

	// Upstream ranges over the map; we sort the UIDs so that the order of
	// events across pods is the same on every run.
	uids := make([]types.UID, 0, len(g.podRecords))
	for uid := range g.podRecords {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	for _, uid := range uids {
		g.reconcilePodRecord(ctx, uid)
	}

	// Every pod's cache entry is now at least as fresh as timestamp; this
	// wakes GetNewerThan callers of pods that did not change. It must come
	// after the per-pod updates above.
	g.cache.UpdateTime(timestamp)
}

// reconcilePodRecord compares the old and current records of one pod,
// refreshes its cache entry if anything changed (or it is due for
// reinspection), then sends its events.
func (g *GenericPLEG) reconcilePodRecord(ctx context.Context, uid types.UID) {
	logger := klog.FromContext(ctx)
	r := g.podRecords[uid]
	var events []*PodLifecycleEvent
	for _, c := range containersOf(r.old, r.current) {
		events = append(events, computeEvents(r.old, r.current, c.ID)...)
	}
	reinspect := g.podsToReinspect[uid]
	delete(g.podsToReinspect, uid)
	if len(events) == 0 && !reinspect {
		return
	}

	status, err := g.updateCache(ctx, r.current, uid)
	if err != nil {
		// Keep the old record so that the same changes are found again
		// next relist, and read the pod's status again then.
		logger.V(4).Info("PLEG: ignoring events for pod", "podUID", uid, "err", err)
		g.podsToReinspect[uid] = true
		return
	}
	if len(events) == 0 {
		events = append(events, &PodLifecycleEvent{ID: uid, Type: PodSync}) // always sync after a reinspection
	}
	g.podRecords.update(uid)

	for _, e := range events {
		if e.Type == ContainerChanged {
			continue // as upstream: not reliable, and no one uses it yet
		}
		select {
		case g.eventChannel <- e:
		default:
			g.discarded.Add(1)
			g.metrics.PLEGDiscardedEvent()
			logger.Error(nil, "Event channel is full, discarding this relist() cycle event", "podUID", e.ID, "event", e.Type)
		}
		if e.Type == ContainerDied && status != nil {
			for _, cs := range status.ContainerStatuses {
				if cs.ID.ID == e.Data {
					logger.V(2).Info("Generic (PLEG): container finished", "podUID", uid, "containerID", cs.ID.ID, "exitCode", cs.ExitCode)
				}
			}
		}
	}
}

// updateRunningPodAndContainerMetrics counts the pods with a running
// sandbox and the containers in each state, as upstream's function of
// that name.
func (g *GenericPLEG) updateRunningPodAndContainerMetrics(pods []*kubecontainer.Pod) {
	if g.metrics == nil {
		return
	}
	runningPods := 0
	containers := map[string]int{}
	for _, p := range pods {
		for _, c := range p.Containers {
			containers[string(c.State)]++
		}
		if slices.ContainsFunc(p.Sandboxes, func(s *kubecontainer.Container) bool { return s.State == kubecontainer.ContainerStateRunning }) {
			runningPods++
		}
	}
	g.metrics.SetRunningPodsAndContainers(runningPods, containers)
}

// updateCache reads the pod's status from the runtime into the cache, or
// deletes the pod from the cache when the runtime no longer has it.
func (g *GenericPLEG) updateCache(ctx context.Context, pod *kubecontainer.Pod, uid types.UID) (*kubecontainer.PodStatus, error) {
	if pod == nil {
		g.cache.Delete(uid)
		return nil, nil
	}
	status, err := g.runtime.GetPodStatus(ctx, pod)
	if err != nil {
		klog.FromContext(ctx).Error(err, "PLEG: write status", "pod", klog.KRef(pod.Namespace, pod.Name))
	} else {
		status.IPs = g.getPodIPs(uid, status)
	}
	// The status is stamped with the time GetPods read the pod: the status
	// cannot be newer than the list it was computed from.
	g.cache.Set(pod.ID, status, err, pod.Timestamp)
	return status, err
}

// getPodIPs keeps the pod's last known IPs when the new status has none
// because its sandbox is gone or stopped: the API expects a finished pod to
// keep its IP.
func (g *GenericPLEG) getPodIPs(uid types.UID, status *kubecontainer.PodStatus) []string {
	if len(status.IPs) != 0 {
		return status.IPs
	}
	for _, s := range status.SandboxStatuses {
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			return status.IPs // a ready sandbox without IP: believe it
		}
	}
	old, err := g.cache.Get(uid)
	if err != nil {
		return nil
	}
	return old.IPs
}

// containersOf returns the containers and sandboxes of the pods, each ID
// once.
func containersOf(pods ...*kubecontainer.Pod) []*kubecontainer.Container {
	// A pod has a handful of containers: looking for an ID in the list
	// built so far is cheaper than filling a set.
	n := 0
	for _, p := range pods {
		if p != nil {
			n += len(p.Containers) + len(p.Sandboxes)
		}
	}
	all := make([]*kubecontainer.Container, 0, n)
	add := func(cs []*kubecontainer.Container) {
		for _, c := range cs {
			if !slices.ContainsFunc(all, func(seen *kubecontainer.Container) bool { return seen.ID.ID == c.ID.ID }) {
				all = append(all, c)
			}
		}
	}
	for _, p := range pods {
		if p != nil {
			add(p.Containers)
			add(p.Sandboxes) // sandboxes are watched like containers
		}
	}
	return all
}

// computeEvents returns the events of the container cid between oldPod and
// newPod (either may be nil).
func computeEvents(oldPod, newPod *kubecontainer.Pod, cid kubecontainer.ContainerID) []*PodLifecycleEvent {
	var uid types.UID
	if oldPod != nil {
		uid = oldPod.ID
	} else if newPod != nil {
		uid = newPod.ID
	}
	return generateEvents(uid, cid.ID, getContainerState(oldPod, cid), getContainerState(newPod, cid))
}

// getContainerState is the state of the container or sandbox cid in pod,
// "non-existent" if it is not there.
func getContainerState(pod *kubecontainer.Pod, cid kubecontainer.ContainerID) plegContainerState {
	if pod == nil {
		return plegContainerNonExistent
	}
	if c := pod.FindContainerByID(cid); c != nil {
		return convertState(c.State)
	}
	if c := pod.FindSandboxByID(cid); c != nil {
		return convertState(c.State)
	}
	return plegContainerNonExistent
}

// setCurrent records this relist's pods; pods it did not list get a nil
// current record.
func (pr podRecords) setCurrent(pods []*kubecontainer.Pod) {
	for _, r := range pr {
		r.current = nil
	}
	for _, p := range pods {
		if r, ok := pr[p.ID]; ok {
			r.current = p
		} else {
			pr[p.ID] = &podRecord{current: p}
		}
	}
}

// update makes the pod's current record its old one, or forgets a pod that
// is gone.
func (pr podRecords) update(uid types.UID) {
	r, ok := pr[uid]
	if !ok {
		return
	}
	if r.current == nil {
		delete(pr, uid)
		return
	}
	r.old, r.current = r.current, nil
}

// UpdateCache reads one pod's status from the runtime into the cache now,
// as upstream's function of that name: for a change no container event
// shows (an in-place resize changes a running container's resources, not
// its state), which a relist would never write to the cache.
func (g *GenericPLEG) UpdateCache(ctx context.Context, uid types.UID) error {
	pod, err := g.runtime.GetPod(ctx, uid)
	if err != nil {
		return err
	}
	if len(pod.Sandboxes) == 0 && len(pod.Containers) == 0 {
		return nil // the runtime has nothing of it: the relist deletes it
	}
	_, err = g.updateCache(ctx, pod, uid)
	return err
}

// RelistPod lists one pod now and does for it what Relist does for every
// pod: the events of what changed since the pod was last seen, and its
// cache entry. The EventedPLEG calls it when the runtime says a pod
// changed; the next full relist then finds nothing new in that pod, so no
// event is sent twice. The pod is listed under the relist's lock: a full
// relist cannot come between the list and the comparison.
func (g *GenericPLEG) RelistPod(ctx context.Context, uid types.UID) {
	g.relistMu.Lock()
	defer g.relistMu.Unlock()
	pod, err := g.runtime.GetPod(ctx, uid)
	if err != nil {
		klog.FromContext(ctx).Error(err, "GenericPLEG: unable to retrieve pod", "podUID", uid)
		return // the next full relist will see it
	}
	if len(pod.Sandboxes) == 0 && len(pod.Containers) == 0 {
		pod = nil // the runtime has nothing of it: as a relist that does not list it
	}
	r, ok := g.podRecords[uid]
	if !ok {
		if pod == nil {
			return // never seen, and gone already
		}
		r = &podRecord{}
		g.podRecords[uid] = r
	}
	r.current = pod
	g.reconcilePodRecord(ctx, uid)
}
