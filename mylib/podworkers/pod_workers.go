// Package podworkers runs one goroutine per pod: each pod's updates are
// handled in order, one at a time, while different pods sync in parallel.
//
// A pod moves through three phases, each ending in a call to the PodSyncer:
//
//	SyncPod            → SyncPod, again and again (updates, resyncs)
//	TerminatingPod     → SyncTerminatingPod (stop the containers)
//	TerminatedPod      → SyncTerminatedPod (clean up), then the worker exits
//
// Updates that arrive while a sync runs are coalesced: only the latest one
// waits, the earlier ones are dropped. Before each sync the worker waits in
// the pod cache for a status newer than its last sync (GetNewerThan), so it
// never acts on what it already saw. After a sync the pod is queued for a
// resync: after the resync interval, or after a backoff if the sync failed.
//
// Wiring (as mylib/kubelet does it):
//
//	pw := podworkers.New(syncer, podworkers.NewBasicWorkQueue(clk), cache, clk)
//	pw.UpdatePod(ctx, podworkers.UpdatePodOptions{UpdateType: kubetypes.SyncPodCreate, Pod: pod})
//	pw.SyncKnownPods(podManager.GetPods()) // in housekeeping: finish and drop workers of pods that are gone
//
// Upstream: pkg/kubelet/pod_workers.go (podWorkers, UpdatePod,
// podWorkerLoop, completeWork, SyncKnownPods). This version leaves out
// runtime-only pods, static-pod start ordering and in-place resize.
package podworkers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/metrics"
)

// Upstream defaults.
const (
	// DefaultBackOffPeriod is the wait after a failed sync (kubelet.go backOffPeriod).
	DefaultBackOffPeriod = 10 * time.Second
	// DefaultResyncInterval is --sync-frequency.
	DefaultResyncInterval = time.Minute
	// Jitter factors: a wait of d becomes d to d*1.5.
	workerResyncIntervalJitterFactor = 0.5
	workerBackOffPeriodJitterFactor  = 0.5
	// defaultGracePeriod when the pod says nothing (the API server's default).
	defaultGracePeriod int64 = 30
	// backOffOnTransientErrorPeriod is the wait after a sync that found
	// the network not ready: it may be ready soon.
	backOffOnTransientErrorPeriod = time.Second
	// NetworkNotReadyErrorMsg starts the error of such a sync.
	NetworkNotReadyErrorMsg = "network is not ready"
)

// PodWorkerState is the phase a pod worker is in.
type PodWorkerState int

// The phases.
const (
	SyncPod PodWorkerState = iota
	TerminatingPod
	TerminatedPod
)

func (s PodWorkerState) String() string {
	switch s {
	case SyncPod:
		return "sync"
	case TerminatingPod:
		return "terminating"
	case TerminatedPod:
		return "terminated"
	}
	return "unknown"
}

// PodStatusFunc changes the status a pod has while it terminates (the
// eviction manager's: phase Failed, reason Evicted, a DisruptionTarget
// condition).
type PodStatusFunc func(podStatus *v1.PodStatus)

// KillPodOptions are the options of a termination (upstream's, whole).
type KillPodOptions struct {
	// CompletedCh is closed once the pod has terminated (its containers
	// stopped): at once if it already has, and also if the update finds the
	// pod not terminating (the kill was refused). killPodNow waits on it.
	CompletedCh chan<- struct{}
	// Evict: the pod is evicted, so its content may be removed once it has
	// terminated, though it is not deleted (ShouldPodContentBeRemoved).
	Evict bool
	// PodStatusFunc, if set, is applied to the status SyncTerminatingPod
	// writes before it stops the containers; the last one given wins.
	PodStatusFunc PodStatusFunc
	// PodTerminationGracePeriodSecondsOverride shortens the grace period.
	PodTerminationGracePeriodSecondsOverride *int64
}

// UpdatePodOptions is one update for a pod's worker.
type UpdatePodOptions struct {
	UpdateType kubetypes.SyncPodType
	// StartTime is when the update was made (for latency measurements).
	StartTime time.Time
	Pod       *v1.Pod
	// MirrorPod is the static pod's mirror pod, if any.
	MirrorPod      *v1.Pod
	KillPodOptions *KillPodOptions
}

// PodSyncer does the work; the kubelet implements it.
type PodSyncer interface {
	// SyncPod makes the pod run as specified. isTerminal reports that the
	// pod has finished (succeeded or failed) and should terminate.
	SyncPod(ctx context.Context, updateType kubetypes.SyncPodType, pod, mirrorPod *v1.Pod, podStatus *kubecontainer.PodStatus) (isTerminal bool, err error)
	// SyncTerminatingPod stops the pod's containers within gracePeriod
	// seconds; podStatusFn, if not nil, changes the status it writes
	// (KillPodOptions.PodStatusFunc).
	SyncTerminatingPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus, gracePeriod *int64, podStatusFn PodStatusFunc) error
	// SyncTerminatedPod releases what the pod held, once nothing runs.
	SyncTerminatedPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus) error
}

// PodCache is the part of the pod cache (mylib/container) the workers read.
type PodCache interface {
	GetNewerThanContext(ctx context.Context, uid types.UID, minTime time.Time) (*kubecontainer.PodStatus, error)
}

// PodWorkerSync is what SyncKnownPods reports about a worker it kept.
type PodWorkerSync struct {
	State  PodWorkerState
	Orphan bool // no longer among the desired pods: it is being terminated
}

// PodWorkers is the pod workers' interface, as the kubelet uses it.
type PodWorkers interface {
	UpdatePod(ctx context.Context, options UpdatePodOptions)
	SyncKnownPods(desiredPods []*v1.Pod) map[types.UID]PodWorkerSync
	IsPodTerminationRequested(uid types.UID) bool
	IsPodKnownTerminated(uid types.UID) bool
	// Wait returns once every worker goroutine has returned: they return
	// when the ctx given to UpdatePod ends (after the sync they are in).
	// Upstream has no Wait (its process just exits); ours lets Run return
	// only after the last sync, so a kubelet's "stopped" is its last line.
	Wait()
}

// podSyncStatus is what the workers know about one pod.
type podSyncStatus struct {
	ctx      context.Context // the running sync's; cancelled when termination starts
	cancelFn context.CancelFunc
	fullname string

	working       bool              // a sync runs or is about to
	pendingUpdate *UpdatePodOptions // the next update (the latest wins)
	activeUpdate  *UpdatePodOptions // the update being (or last) synced
	syncedAt      time.Time         // first seen
	terminatingAt time.Time         // termination requested
	terminatedAt  time.Time         // SyncTerminatingPod succeeded
	gracePeriod   int64             // for SyncTerminatingPod, only ever decreasing
	deleted       bool              // the pod was deleted (or orphaned)
	evicted       bool              // a kill with KillPodOptions.Evict
	finished      bool              // SyncTerminatedPod succeeded; the worker has exited
	// notifyPostTerminating are closed, and statusPostTerminating
	// dropped, once SyncTerminatingPod succeeds (KillPodOptions'
	// CompletedCh and PodStatusFunc).
	notifyPostTerminating []chan<- struct{}
	statusPostTerminating []PodStatusFunc
}

func (s *podSyncStatus) IsTerminationRequested() bool { return !s.terminatingAt.IsZero() }
func (s *podSyncStatus) IsTerminated() bool           { return !s.terminatedAt.IsZero() }

// WorkType is the phase the next sync runs in.
func (s *podSyncStatus) WorkType() PodWorkerState {
	switch {
	case s.IsTerminated():
		return TerminatedPod
	case s.IsTerminationRequested():
		return TerminatingPod
	}
	return SyncPod
}

type podWorkers struct {
	podLock sync.Mutex
	// podUpdates wakes each pod's worker goroutine; buffered (1), so a
	// wake-up is never lost and never blocks.
	podUpdates      map[types.UID]chan struct{}
	podSyncStatuses map[types.UID]*podSyncStatus
	running         sync.WaitGroup // the worker goroutines

	syncer         PodSyncer
	workQueue      WorkQueue
	podCache       PodCache
	clock          clock.Clock
	resyncInterval time.Duration
	backOffPeriod  time.Duration
	// podsSynced: SyncKnownPods ran once, so a pod no worker knows is one
	// the kubelet does not want (see pod_state.go).
	podsSynced bool
	// metrics records each sync's duration (WithMetrics); nil: none.
	metrics *metrics.Metrics
}

// Option changes pod workers as New makes them.
type Option func(*podWorkers)

// WithMetrics has the workers record, once each update is processed, the
// time since it was made (UpdatePodOptions.StartTime) in
// kubelet_pod_worker_duration_seconds, by update type, as upstream's
// podWorkerLoop.
func WithMetrics(m *metrics.Metrics) Option { return func(p *podWorkers) { p.metrics = m } }

// New returns pod workers with upstream's resync interval (1 min) and
// backoff (10 s); see NewWithIntervals.
func New(syncer PodSyncer, workQueue WorkQueue, podCache PodCache, clk clock.Clock, opts ...Option) PodWorkers {
	return NewWithIntervals(syncer, workQueue, podCache, clk, DefaultResyncInterval, DefaultBackOffPeriod, opts...)
}

// NewWithIntervals returns pod workers. Every argument is required, and the
// intervals must be positive; anything else is a programming error (panic).
func NewWithIntervals(syncer PodSyncer, workQueue WorkQueue, podCache PodCache, clk clock.Clock, resyncInterval, backOffPeriod time.Duration, opts ...Option) PodWorkers {
	if syncer == nil || workQueue == nil || podCache == nil || clk == nil {
		panic("podworkers: syncer, workQueue, podCache and clock are required")
	}
	if resyncInterval <= 0 || backOffPeriod <= 0 {
		panic(fmt.Sprintf("podworkers: resync interval (%v) and backoff period (%v) must be positive", resyncInterval, backOffPeriod))
	}
	p := &podWorkers{
		podUpdates:      map[types.UID]chan struct{}{},
		podSyncStatuses: map[types.UID]*podSyncStatus{},
		syncer:          syncer,
		workQueue:       workQueue,
		podCache:        podCache,
		clock:           clk,
		resyncInterval:  resyncInterval,
		backOffPeriod:   backOffPeriod,
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func (p *podWorkers) Wait() { p.running.Wait() }

func (p *podWorkers) IsPodTerminationRequested(uid types.UID) bool {
	p.podLock.Lock()
	defer p.podLock.Unlock()
	s, ok := p.podSyncStatuses[uid]
	return ok && s.IsTerminationRequested()
}

func (p *podWorkers) IsPodKnownTerminated(uid types.UID) bool {
	p.podLock.Lock()
	defer p.podLock.Unlock()
	s, ok := p.podSyncStatuses[uid]
	return ok && s.IsTerminated()
}

// UpdatePod hands an update to the pod's worker, starting the worker if
// needed, and returns at once. ctx is the parent of the worker's syncs.
func (p *podWorkers) UpdatePod(ctx context.Context, options UpdatePodOptions) {
	pod := options.Pod
	uid := pod.UID
	p.podLock.Lock()
	defer p.podLock.Unlock()

	now := p.clock.Now()
	status, ok := p.podSyncStatuses[uid]
	if !ok {
		status = &podSyncStatus{syncedAt: now, fullname: kubetypes.GetPodFullName(pod)}
		p.podSyncStatuses[uid] = status
	}
	if status.finished {
		klog.V(4).InfoS("Pod is finished processing, no further updates", "pod", klog.KObj(pod), "podUID", uid)
		// Unlike upstream, which leaves it to time out, a kill of a pod
		// already finished is answered at once: it has terminated.
		closeCompleted(options.KillPodOptions)
		return
	}

	// Does this update start the termination?
	becameTerminating := false
	if !status.IsTerminationRequested() {
		switch {
		case pod.DeletionTimestamp != nil:
			status.deleted = true
			becameTerminating = true
		case pod.Status.Phase == v1.PodFailed, pod.Status.Phase == v1.PodSucceeded:
			becameTerminating = true
		case options.UpdateType == kubetypes.SyncPodKill:
			becameTerminating = true
		}
		if becameTerminating {
			status.terminatingAt = now
			status.gracePeriod = 0
		}
	}
	// Once terminating, every update is a kill whose grace period can only shrink.
	gracePeriodShortened := false
	switch {
	case status.IsTerminated(): // nothing left to kill: a waiting killer is told so
		closeCompleted(options.KillPodOptions)
		options.KillPodOptions = nil
	case status.IsTerminationRequested():
		if o := options.KillPodOptions; o != nil {
			if o.CompletedCh != nil {
				status.notifyPostTerminating = append(status.notifyPostTerminating, o.CompletedCh)
			}
			if o.PodStatusFunc != nil {
				status.statusPostTerminating = append(status.statusPostTerminating, o.PodStatusFunc)
			}
			if o.Evict {
				status.evicted = true
			}
		}
		before := status.gracePeriod
		status.gracePeriod = effectiveGracePeriod(status.gracePeriod, pod, options.KillPodOptions)
		gracePeriodShortened = before > 0 && status.gracePeriod < before
		options.KillPodOptions = &KillPodOptions{PodTerminationGracePeriodSecondsOverride: ptr(status.gracePeriod)}
	default: // a sync: kill options mean nothing here
		closeCompleted(options.KillPodOptions)
		options.KillPodOptions = nil
	}

	if _, ok := p.podUpdates[uid]; !ok {
		ch := make(chan struct{}, 1)
		p.podUpdates[uid] = ch
		p.running.Go(func() { p.podWorkerLoop(ctx, uid, ch) })
	}
	status.pendingUpdate = &options // coalescing: an older pending update is dropped
	status.working = true
	select {
	case p.podUpdates[uid] <- struct{}{}:
	default: // a wake-up is already waiting
	}
	if (becameTerminating || gracePeriodShortened) && status.cancelFn != nil {
		// Stop a running SyncPod early; or a running SyncTerminatingPod,
		// which starts again with the shorter grace period (a second delete).
		status.cancelFn()
	}
}

// closeCompleted closes the kill's CompletedCh, if any.
func closeCompleted(o *KillPodOptions) {
	if o != nil && o.CompletedCh != nil {
		close(o.CompletedCh)
	}
}

// effectiveGracePeriod: the override, else the pod's deletion grace period,
// else its spec, else 30 s; never more than current (if set), never below 1.
func effectiveGracePeriod(current int64, pod *v1.Pod, opts *KillPodOptions) int64 {
	gp := defaultGracePeriod
	switch {
	case opts != nil && opts.PodTerminationGracePeriodSecondsOverride != nil:
		gp = *opts.PodTerminationGracePeriodSecondsOverride
	case pod.DeletionGracePeriodSeconds != nil:
		gp = *pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		gp = *pod.Spec.TerminationGracePeriodSeconds
	}
	if current > 0 && gp > current {
		gp = current
	}
	if gp < 1 {
		gp = 1
	}
	return gp
}

// podWork is one sync to do.
type podWork struct {
	WorkType PodWorkerState
	Options  UpdatePodOptions
	// podStatusFn is the terminating pod's PodStatusFunc, if any.
	podStatusFn PodStatusFunc
}

// startPodSync takes the pending update for the worker.
func (p *podWorkers) startPodSync(parentCtx context.Context, uid types.UID) (context.Context, podWork, bool) {
	p.podLock.Lock()
	defer p.podLock.Unlock()
	status, ok := p.podSyncStatuses[uid]
	if !ok || status.pendingUpdate == nil {
		if ok {
			status.working = false
		}
		return nil, podWork{}, false
	}
	work := podWork{WorkType: status.WorkType(), Options: *status.pendingUpdate}
	status.pendingUpdate = nil
	if work.WorkType == TerminatingPod && work.Options.KillPodOptions == nil {
		// queued before SyncKnownPods orphaned the pod
		status.gracePeriod = effectiveGracePeriod(status.gracePeriod, work.Options.Pod, nil)
		work.Options.KillPodOptions = &KillPodOptions{PodTerminationGracePeriodSecondsOverride: ptr(status.gracePeriod)}
	}
	status.activeUpdate = &work.Options
	if work.WorkType == TerminatingPod { // upstream's acknowledgeTerminating: the last status function wins
		work.podStatusFn = nil
		if n := len(status.statusPostTerminating); n > 0 {
			work.podStatusFn = status.statusPostTerminating[n-1]
		}
	}
	if status.ctx == nil || status.ctx.Err() != nil {
		status.ctx, status.cancelFn = context.WithCancel(parentCtx)
	}
	return status.ctx, work, true
}

// podWorkerLoop is one pod's goroutine. It exits after SyncTerminatedPod
// succeeds, when the channel is closed, or when parentCtx ends (then the
// sync under way ends first: its ctx is a child of parentCtx).
func (p *podWorkers) podWorkerLoop(parentCtx context.Context, uid types.UID, podUpdates <-chan struct{}) {
	var lastSyncTime time.Time
	for {
		select {
		case <-parentCtx.Done():
			p.forgetWorker(uid, podUpdates)
			return // the kubelet stops; the pod keeps running in the runtime
		case _, open := <-podUpdates:
			if !open {
				return
			}
		}
		ctx, work, ok := p.startPodSync(parentCtx, uid)
		if !ok {
			continue
		}
		pod := work.Options.Pod
		isTerminal := false
		err := func() error {
			// Wait for a status newer than what the last sync saw (the PLEG
			// writes the cache every relist).
			status, err := p.podCache.GetNewerThanContext(ctx, uid, lastSyncTime)
			if err != nil {
				return err
			}
			switch work.WorkType {
			case TerminatedPod:
				err = p.syncer.SyncTerminatedPod(ctx, pod, status)
			case TerminatingPod:
				err = p.syncer.SyncTerminatingPod(ctx, pod, status, work.Options.KillPodOptions.PodTerminationGracePeriodSecondsOverride, work.podStatusFn)
			default:
				isTerminal, err = p.syncer.SyncPod(ctx, work.Options.UpdateType, pod, work.Options.MirrorPod, status)
			}
			lastSyncTime = p.clock.Now()
			return err
		}()

		phaseTransition := false
		switch {
		case errors.Is(err, context.Canceled):
			klog.V(2).InfoS("Sync exited with context cancellation error", "pod", klog.KObj(pod), "podUID", uid)
		case err != nil:
			klog.ErrorS(err, "Error syncing pod, skipping", "pod", klog.KObj(pod), "podUID", uid)
		case work.WorkType == TerminatedPod:
			p.completeTerminated(uid)
			p.observeDuration("terminated", work.Options.StartTime)
			return
		case work.WorkType == TerminatingPod:
			p.completeTerminating(uid)
			phaseTransition = true
		case isTerminal:
			p.completeSync(uid)
			phaseTransition = true
		}
		p.completeWork(uid, phaseTransition, err)
		p.observeDuration(work.Options.UpdateType.String(), work.Options.StartTime)
	}
}

// observeDuration records the time since an update of operationType was
// made, when it says when.
func (p *podWorkers) observeDuration(operationType string, start time.Time) {
	if !start.IsZero() {
		p.metrics.ObservePodWorkerDuration(operationType, p.clock.Since(start))
	}
}

// forgetWorker: the worker's goroutine ends with its ctx; a later UpdatePod
// (with a live ctx) starts a new one.
func (p *podWorkers) forgetWorker(uid types.UID, podUpdates <-chan struct{}) {
	p.podLock.Lock()
	defer p.podLock.Unlock()
	if ch, ok := p.podUpdates[uid]; ok && (<-chan struct{})(ch) == podUpdates {
		delete(p.podUpdates, uid)
	}
}

// completeSync: SyncPod said the pod is terminal; terminate it next.
func (p *podWorkers) completeSync(uid types.UID) {
	p.podLock.Lock()
	defer p.podLock.Unlock()
	if s, ok := p.podSyncStatuses[uid]; ok && !s.IsTerminationRequested() {
		s.terminatingAt = p.clock.Now()
		s.gracePeriod = effectiveGracePeriod(0, s.activeUpdate.Pod, nil)
		p.requeueLastPodUpdate(uid, s)
	}
}

// completeTerminating: the containers are stopped; clean up next.
func (p *podWorkers) completeTerminating(uid types.UID) {
	p.podLock.Lock()
	defer p.podLock.Unlock()
	if s, ok := p.podSyncStatuses[uid]; ok {
		s.terminatedAt = p.clock.Now()
		for _, ch := range s.notifyPostTerminating {
			close(ch) // killPodNow returns
		}
		s.notifyPostTerminating, s.statusPostTerminating = nil, nil
		p.requeueLastPodUpdate(uid, s)
	}
}

// completeTerminated: the pod is done; the worker exits and its channel
// goes. The status stays (so a late update cannot restart the pod) until
// SyncKnownPods sees the pod gone from the desired pods.
func (p *podWorkers) completeTerminated(uid types.UID) {
	p.podLock.Lock()
	defer p.podLock.Unlock()
	if ch, ok := p.podUpdates[uid]; ok {
		close(ch)
		delete(p.podUpdates, uid)
	}
	if s, ok := p.podSyncStatuses[uid]; ok {
		s.finished = true
		s.working = false
		s.pendingUpdate = nil
	}
}

// completeWork queues the next resync and wakes the worker again if an
// update came in meanwhile. The next resync: at once after a phase change;
// after a jittered resync interval after success; after a second when the
// network was not ready; when a container's CrashLoopBackOff ends if the
// error says so (a BackoffError), else after the jittered backOffPeriod —
// never later than the resync interval.
func (p *podWorkers) completeWork(uid types.UID, phaseTransition bool, syncErr error) {
	switch {
	case phaseTransition:
		p.workQueue.Enqueue(uid, 0)
	case syncErr == nil:
		p.workQueue.Enqueue(uid, wait.Jitter(p.resyncInterval, workerResyncIntervalJitterFactor))
	case strings.Contains(syncErr.Error(), NetworkNotReadyErrorMsg):
		p.workQueue.Enqueue(uid, wait.Jitter(backOffOnTransientErrorPeriod, workerBackOffPeriodJitterFactor))
	default:
		backoff := p.backOffPeriod
		if end, ok := kubecontainer.MinBackoffExpiration(syncErr); ok {
			backoff = end.Sub(p.clock.Now())
		}
		backoff = min(max(backoff, 0), p.resyncInterval)
		p.workQueue.Enqueue(uid, wait.Jitter(backoff, workerBackOffPeriodJitterFactor))
	}
	p.podLock.Lock()
	defer p.podLock.Unlock()
	s, ok := p.podSyncStatuses[uid]
	if !ok {
		return
	}
	if s.pendingUpdate != nil {
		select {
		case p.podUpdates[uid] <- struct{}{}:
		default:
		}
		return
	}
	s.working = false
}

// requeueLastPodUpdate replays the last update (for a phase change nobody
// sent an update for). Call with podLock held.
func (p *podWorkers) requeueLastPodUpdate(uid types.UID, s *podSyncStatus) {
	if s.pendingUpdate != nil || s.activeUpdate == nil {
		return
	}
	copied := *s.activeUpdate
	if s.IsTerminationRequested() {
		copied.KillPodOptions = &KillPodOptions{PodTerminationGracePeriodSecondsOverride: ptr(s.gracePeriod)}
	}
	s.pendingUpdate = &copied
	s.working = true
	select {
	case p.podUpdates[uid] <- struct{}{}:
	default:
	}
}

// SyncKnownPods is housekeeping: workers of pods missing from desiredPods
// are driven to termination, and once finished they are forgotten. It
// returns the workers that remain.
func (p *podWorkers) SyncKnownPods(desiredPods []*v1.Pod) map[types.UID]PodWorkerSync {
	desired := make(map[types.UID]bool, len(desiredPods))
	for _, pod := range desiredPods {
		desired[pod.UID] = true
	}
	p.podLock.Lock()
	defer p.podLock.Unlock()
	p.podsSynced = true
	workers := map[types.UID]PodWorkerSync{}
	for uid, s := range p.podSyncStatuses {
		orphan := !desired[uid]
		if orphan {
			if s.finished {
				delete(p.podSyncStatuses, uid) // the worker has exited: forget the pod
				continue
			}
			s.deleted = true
			if !s.IsTerminationRequested() {
				s.terminatingAt = p.clock.Now()
				if s.activeUpdate != nil {
					s.gracePeriod = effectiveGracePeriod(0, s.activeUpdate.Pod, nil)
				} else {
					s.gracePeriod = 1
				}
			}
			p.requeueLastPodUpdate(uid, s)
		}
		workers[uid] = PodWorkerSync{State: s.WorkType(), Orphan: orphan}
	}
	return workers
}

func ptr[T any](v T) *T { return &v }
