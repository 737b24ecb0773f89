package eviction

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/lifecycle"
)

// MonitoringInterval is how often the manager looks at the node
// (upstream's evictionMonitoringPeriod).
const MonitoringInterval = 10 * time.Second

const (
	// podCleanupTimeout and podCleanupPollFreq: after an eviction the
	// manager waits, polling, for the pod's resources to be released.
	podCleanupTimeout  = 30 * time.Second
	podCleanupPollFreq = time.Second
	// immediateEvictionGracePeriodSeconds is the grace period of a pod
	// evicted on a hard threshold (upstream's).
	immediateEvictionGracePeriodSeconds = 1
)

// nodeReclaimFunc frees a node-level resource without evicting a pod.
type nodeReclaimFunc func(ctx context.Context) error

// managerImpl is the Manager and its admission handler.
type managerImpl struct {
	clock           clock.WithTicker
	config          Config
	killPodFunc     KillPodFunc
	summaryProvider SummaryProvider
	recorder        record.EventRecorder
	nodeRef         *v1.ObjectReference
	// signalToNodeReclaimFuncs: what to try before evicting, per signal.
	signalToNodeReclaimFuncs map[Signal][]nodeReclaimFunc

	mu sync.RWMutex
	// nodeConditions: the pressure conditions the node reports now.
	nodeConditions []v1.NodeConditionType
	// nodeConditionsLastObservedAt: when each condition's threshold was
	// last met (the transition period counts from there).
	nodeConditionsLastObservedAt map[v1.NodeConditionType]time.Time
	// thresholdsFirstObservedAt: when each met threshold was first met
	// (a soft threshold's grace period counts from there).
	thresholdsFirstObservedAt map[Threshold]time.Time
	// thresholdsMet: met past their grace period, not yet resolved with
	// their minimum reclaim.
	thresholdsMet []Threshold
	// lastObservations: the previous pass's readings.
	lastObservations signalObservations
}

var _ Manager = &managerImpl{}
var _ lifecycle.PodAdmitHandler = &managerImpl{}

// NewManager returns the manager and its admission handler (upstream's
// NewManager). summaryProvider, killPodFunc, recorder and nodeRef are
// required; a nil imageGC or containerGC reclaims nothing; a nil clk is the
// real clock. A threshold on a signal the manager does not watch is an error.
func NewManager(summaryProvider SummaryProvider, config Config, killPodFunc KillPodFunc, imageGC ImageGC, containerGC ContainerGC,
	recorder record.EventRecorder, nodeRef *v1.ObjectReference, clk clock.WithTicker) (Manager, lifecycle.PodAdmitHandler, error) {
	switch {
	case summaryProvider == nil:
		return nil, nil, errors.New("eviction: NewManager needs a summary provider")
	case killPodFunc == nil:
		return nil, nil, errors.New("eviction: NewManager needs a kill pod func")
	case recorder == nil:
		return nil, nil, errors.New("eviction: NewManager needs an event recorder")
	case nodeRef == nil:
		return nil, nil, errors.New("eviction: NewManager needs the node's reference")
	}
	for _, t := range config.Thresholds {
		if !validSignal(t.Signal) {
			return nil, nil, fmt.Errorf("eviction: "+unsupportedEvictionSignal, t.Signal)
		}
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	// Dead containers first (their images then count as unused), then
	// the images; for every disk signal, as upstream does when images,
	// writable layers and the kubelet's files share one filesystem.
	var reclaim []nodeReclaimFunc
	if containerGC != nil {
		reclaim = append(reclaim, containerGC.DeleteAllUnusedContainers)
	}
	if imageGC != nil {
		reclaim = append(reclaim, imageGC.DeleteUnusedImages)
	}
	m := &managerImpl{
		clock:           clk,
		config:          config,
		killPodFunc:     killPodFunc,
		summaryProvider: summaryProvider,
		recorder:        recorder,
		nodeRef:         nodeRef,
		signalToNodeReclaimFuncs: map[Signal][]nodeReclaimFunc{
			SignalNodeFsAvailable:   reclaim,
			SignalNodeFsInodesFree:  reclaim,
			SignalImageFsAvailable:  reclaim,
			SignalImageFsInodesFree: reclaim,
		},
		nodeConditionsLastObservedAt: map[v1.NodeConditionType]time.Time{},
		thresholdsFirstObservedAt:    map[Threshold]time.Time{},
	}
	return m, m, nil
}

// Admit refuses a pod while the node is under pressure: under memory
// pressure alone a BestEffort pod that does not tolerate the
// memory-pressure taint; under disk or PID pressure every pod. A critical
// pod is always admitted.
func (m *managerImpl) Admit(_ context.Context, attrs *lifecycle.PodAdmitAttributes) lifecycle.PodAdmitResult {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if len(m.nodeConditions) == 0 || kubetypes.IsCriticalPod(attrs.Pod) {
		return lifecycle.PodAdmitResult{Admit: true}
	}
	if len(m.nodeConditions) == 1 && m.nodeConditions[0] == v1.NodeMemoryPressure {
		if !isBestEffort(attrs.Pod) || toleratesMemoryPressure(attrs.Pod) {
			return lifecycle.PodAdmitResult{Admit: true}
		}
	}
	klog.InfoS("Failed to admit pod to node", "pod", klog.KObj(attrs.Pod), "nodeCondition", m.nodeConditions)
	return lifecycle.PodAdmitResult{
		Admit:   false,
		Reason:  Reason,
		Message: fmt.Sprintf(nodeConditionMessageFmt, m.nodeConditions),
	}
}

// Run synchronizes every monitoringInterval (zero: MonitoringInterval) on
// the manager's clock until ctx ends. After an eviction it waits, up to
// 30 s, for podCleanedUpFunc to report the pod's resources released, then
// looks again at once (upstream's Start).
func (m *managerImpl) Run(ctx context.Context, podFunc ActivePodsFunc, podCleanedUpFunc PodCleanedUpFunc, monitoringInterval time.Duration) {
	if monitoringInterval <= 0 {
		monitoringInterval = MonitoringInterval
	}
	klog.InfoS("Eviction manager: starting control loop")
	for ctx.Err() == nil {
		evicted, err := m.synchronize(ctx, podFunc)
		if err != nil {
			klog.ErrorS(err, "Eviction manager: failed to synchronize")
		}
		if len(evicted) > 0 && podCleanedUpFunc != nil {
			klog.InfoS("Eviction manager: pods evicted, waiting for pod to be cleaned up", "pods", klog.KObjSlice(evicted))
			m.waitForPodsCleanup(ctx, podCleanedUpFunc, evicted)
			continue
		}
		t := m.clock.NewTimer(monitoringInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

func (m *managerImpl) waitForPodsCleanup(ctx context.Context, cleanedUp PodCleanedUpFunc, pods []*v1.Pod) {
	timeout := m.clock.NewTimer(podCleanupTimeout)
	defer timeout.Stop()
	ticker := m.clock.NewTicker(podCleanupPollFreq)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timeout.C():
			klog.InfoS("Eviction manager: timed out waiting for pods to be cleaned up", "pods", klog.KObjSlice(pods))
			return
		case <-ticker.C():
			all := true
			for _, p := range pods {
				if !cleanedUp(p) {
					all = false
					break
				}
			}
			if all {
				klog.InfoS("Eviction manager: pods successfully cleaned up", "pods", klog.KObjSlice(pods))
				return
			}
		}
	}
}

// IsUnderMemoryPressure reports the MemoryPressure condition.
func (m *managerImpl) IsUnderMemoryPressure() bool { return m.hasCondition(v1.NodeMemoryPressure) }

// IsUnderDiskPressure reports the DiskPressure condition.
func (m *managerImpl) IsUnderDiskPressure() bool { return m.hasCondition(v1.NodeDiskPressure) }

// IsUnderPIDPressure reports the PIDPressure condition.
func (m *managerImpl) IsUnderPIDPressure() bool { return m.hasCondition(v1.NodePIDPressure) }

func (m *managerImpl) hasCondition(c v1.NodeConditionType) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return hasNodeCondition(m.nodeConditions, c)
}

// synchronize is one pass: observe, update the conditions, and if a
// threshold is met past its grace period, reclaim node-level resources or
// evict one pod. It returns the pod evicted, if any.
func (m *managerImpl) synchronize(ctx context.Context, podFunc ActivePodsFunc) ([]*v1.Pod, error) {
	if len(m.config.Thresholds) == 0 {
		return nil, nil
	}
	klog.V(3).InfoS("Eviction manager: synchronize housekeeping")
	activePods := podFunc()
	summary, err := m.summaryProvider.Get(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("eviction manager: failed to get summary stats: %w", err)
	}
	observations, stats := makeSignalObservations(summary)

	// Met now, grace periods aside; plus those met before whose minimum
	// reclaim is not reached yet.
	thresholds := thresholdsMet(m.config.Thresholds, observations, false)
	m.mu.RLock()
	previouslyMet := m.thresholdsMet
	firstObserved := m.thresholdsFirstObservedAt
	lastObserved := m.nodeConditionsLastObservedAt
	lastObservations := m.lastObservations
	m.mu.RUnlock()
	if len(previouslyMet) > 0 {
		thresholds = mergeThresholds(thresholds, thresholdsMet(previouslyMet, observations, true))
	}

	now := m.clock.Now()
	firstObserved = thresholdsFirstObservedAt(thresholds, firstObserved, now)
	conditions := nodeConditions(thresholds)
	if len(conditions) > 0 {
		klog.V(3).InfoS("Eviction manager: node conditions - observed", "nodeCondition", conditions)
	}
	lastObserved = nodeConditionsLastObservedAt(conditions, lastObserved, now)
	// A condition stays for the transition period after its last sighting.
	conditions = nodeConditionsObservedSince(lastObserved, m.config.PressureTransitionPeriod, now)
	if len(conditions) > 0 {
		klog.V(3).InfoS("Eviction manager: node conditions - transition period not met", "nodeCondition", conditions)
	}
	thresholds = thresholdsMetGracePeriod(firstObserved, now)

	m.mu.Lock()
	m.nodeConditions = conditions
	m.thresholdsFirstObservedAt = firstObserved
	m.nodeConditionsLastObservedAt = lastObserved
	m.thresholdsMet = thresholds
	m.lastObservations = observations
	m.mu.Unlock()

	thresholds = thresholdsUpdatedStats(thresholds, observations, lastObservations)
	if len(thresholds) == 0 {
		klog.V(3).InfoS("Eviction manager: no resources are starved")
		return nil, nil
	}

	byEvictionPriority(thresholds)
	thresholdToReclaim := thresholds[0]
	resourceToReclaim := signalToResource[thresholdToReclaim.Signal]
	klog.InfoS("Eviction manager: attempting to reclaim", "resourceName", resourceToReclaim)
	m.recorder.Eventf(m.nodeRef, v1.EventTypeWarning, "EvictionThresholdMet", "Attempting to reclaim %s", resourceToReclaim)

	if m.reclaimNodeLevelResources(ctx, thresholdToReclaim.Signal, resourceToReclaim) {
		klog.InfoS("Eviction manager: able to reduce resource pressure without evicting pods.", "resourceName", resourceToReclaim)
		return nil, nil
	}
	klog.InfoS("Eviction manager: must evict pod(s) to reclaim", "resourceName", resourceToReclaim)

	if len(activePods) == 0 {
		klog.ErrorS(nil, "Eviction manager: eviction thresholds have been met, but no pods are active to evict")
		return nil, nil
	}
	pods := append([]*v1.Pod{}, activePods...)
	signalToRankFunc[thresholdToReclaim.Signal](pods, stats)
	klog.InfoS("Eviction manager: pods ranked for eviction", "pods", klog.KObjSlice(pods))

	// One pod per pass: the next pass sees what this one freed.
	for _, pod := range pods {
		grace := int64(immediateEvictionGracePeriodSeconds)
		if !isHardEvictionThreshold(thresholdToReclaim) {
			// A soft threshold leaves the pod its own grace period, up
			// to evictionMaxPodGracePeriod.
			grace = m.config.MaxPodGracePeriodSeconds
			if pod.Spec.TerminationGracePeriodSeconds != nil {
				grace = min(grace, *pod.Spec.TerminationGracePeriodSeconds)
			}
		}
		message, annotations := evictionMessage(resourceToReclaim, pod, stats, thresholds, observations)
		condition := &v1.PodCondition{
			Type:               v1.DisruptionTarget,
			ObservedGeneration: pod.Generation,
			Status:             v1.ConditionTrue,
			Reason:             v1.PodReasonTerminationByKubelet,
			Message:            message,
		}
		if m.evictPod(pod, grace, message, annotations, condition) {
			return []*v1.Pod{pod}, nil
		}
	}
	klog.InfoS("Eviction manager: unable to evict any pods from the node")
	return nil, nil
}

// reclaimNodeLevelResources runs the signal's reclaim funcs (container GC,
// image GC), observes again, and reports whether every threshold, with its
// minimum reclaim, is now clear: then no pod need be evicted.
func (m *managerImpl) reclaimNodeLevelResources(ctx context.Context, signal Signal, resourceToReclaim v1.ResourceName) bool {
	funcs := m.signalToNodeReclaimFuncs[signal]
	if len(funcs) == 0 {
		return false
	}
	for _, f := range funcs {
		if err := f(ctx); err != nil {
			klog.InfoS("Eviction manager: unexpected error when attempting to reduce resource pressure", "resourceName", resourceToReclaim, "err", err)
		}
	}
	summary, err := m.summaryProvider.Get(ctx, true)
	if err != nil {
		klog.ErrorS(err, "Eviction manager: failed to get summary stats after resource reclaim")
		return false
	}
	observations, _ := makeSignalObservations(summary)
	return len(thresholdsMet(m.config.Thresholds, observations, true)) == 0
}

// evictPod kills the pod with the eviction's status, after a Warning
// "Evicted" event on it. A critical pod is left alone (false). Like
// upstream it reports true once it tried, even if the kill failed.
func (m *managerImpl) evictPod(pod *v1.Pod, gracePeriodOverride int64, message string, annotations map[string]string, condition *v1.PodCondition) bool {
	if kubetypes.IsCriticalPod(pod) {
		klog.ErrorS(nil, "Eviction manager: cannot evict a critical pod", "pod", klog.KObj(pod))
		return false
	}
	m.recorder.AnnotatedEventf(pod, annotations, v1.EventTypeWarning, Reason, "%s", message)
	klog.V(3).InfoS("Evicting pod", "pod", klog.KObj(pod), "podUID", pod.UID, "message", message)
	now := metav1.NewTime(m.clock.Now())
	statusFn := func(status *v1.PodStatus) {
		status.Phase = v1.PodFailed
		status.Reason = Reason
		status.Message = message
		if condition != nil {
			setPodCondition(status, *condition, now)
		}
	}
	if err := m.killPodFunc(pod, true, &gracePeriodOverride, statusFn); err != nil {
		klog.ErrorS(err, "Eviction manager: pod failed to evict", "pod", klog.KObj(pod))
	} else {
		klog.InfoS("Eviction manager: pod is evicted successfully", "pod", klog.KObj(pod))
	}
	return true
}

// setPodCondition puts c into the status, replacing one of its type.
func setPodCondition(status *v1.PodStatus, c v1.PodCondition, now metav1.Time) {
	for i := range status.Conditions {
		if status.Conditions[i].Type == c.Type {
			if status.Conditions[i].Status != c.Status {
				c.LastTransitionTime = now
			} else {
				c.LastTransitionTime = status.Conditions[i].LastTransitionTime
			}
			status.Conditions[i] = c
			return
		}
	}
	c.LastTransitionTime = now
	status.Conditions = append(status.Conditions, c)
}
