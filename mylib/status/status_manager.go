package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/metrics"
)

// SyncPeriod is how often every status is checked against the API server,
// as upstream's syncPeriod. Changed statuses are sent at once.
const SyncPeriod = 10 * time.Second

// PodManager is what the status manager asks the pod manager
// (mylib/pod.Manager satisfies it).
type PodManager interface {
	GetPodByUID(uid types.UID) (*v1.Pod, bool)
	GetMirrorPodByPod(pod *v1.Pod) (*v1.Pod, bool)
	// TranslatePodUID maps a mirror pod's UID to its static pod's.
	TranslatePodUID(uid types.UID) types.UID
}

// PodDeletionSafetyProvider tells whether a pod's containers may still run;
// while they may, a terminal phase is not written (the pod workers know).
type PodDeletionSafetyProvider interface {
	PodCouldHaveRunningContainers(pod *v1.Pod) bool
}

// Manager keeps the latest status of every pod and writes it to the API
// server (upstream pkg/kubelet/status.Manager, without its probe setters:
// probe results reach a status through generateAPIPodStatus; with its
// resize conditions, resize.go).
type Manager interface {
	// Run writes statuses until ctx ends: changed ones at once, all of
	// them every SyncPeriod.
	Run(ctx context.Context)
	// GetPodStatus returns the cached status of a pod (a mirror pod's UID
	// reads its static pod's).
	GetPodStatus(uid types.UID) (v1.PodStatus, bool)
	// SetPodStatus caches a new status for pod; a change gets a new
	// version and is written soon.
	SetPodStatus(pod *v1.Pod, status v1.PodStatus)
	// TerminatePod marks every container not terminated as terminated,
	// the phase terminal (not for a static pod), and the pod finished: once that is in the API,
	// a pod being deleted is deleted for good.
	TerminatePod(pod *v1.Pod)
	// RemoveOrphanedStatuses forgets the statuses of pods not in podUIDs
	// (and their resize conditions).
	RemoveOrphanedStatuses(podUIDs map[types.UID]bool)

	// The conditions of a pod's in-place resize (resize.go): the
	// kubelet's resize admission sets and clears them, and
	// generateAPIPodStatus puts them in the pod's status.
	SetPodResizePendingCondition(podUID types.UID, reason, message string)
	SetPodResizeInProgressCondition(podUID types.UID, reason, message string)
	ClearPodResizePendingCondition(podUID types.UID)
	ClearPodResizeInProgressCondition(podUID types.UID)
	GetPodResizeConditions(podUID types.UID) []*v1.PodCondition
	IsPodResizeDeferred(podUID types.UID) bool
	IsPodResizeInfeasible(podUID types.UID) bool
}

// Config is what NewManager needs.
type Config struct {
	// Client writes pods/status with the node's credentials.
	Client kubernetes.Interface
	// PodManager finds pods and mirror pods.
	PodManager PodManager
	// PodDeletionSafety may be nil: a terminal phase is then written as
	// soon as it is set.
	PodDeletionSafety PodDeletionSafetyProvider
	Clock             clock.WithTicker
	// Writers is how many pods a batch writes at the same time; 0 means 1,
	// upstream's one loop. Each pod is still written by one writer at a
	// time, in the order of its versions.
	Writers int
	// Metrics receives each status written (the pod start SLI's
	// RecordStatusUpdated, kubelet_pod_status_sync_duration_seconds) and
	// each status dropped (DeletePodStartupState); nil: none.
	Metrics *metrics.Metrics
	// CreatingStatusDelay holds back a pod's first status while all it says
	// is that the pod's containers are being created (onlyCreating), for up
	// to this long after the pod's first status came: a status that says
	// more (Running, an error, a terminal phase) replaces it and goes out
	// alone. 0 writes it at once, as upstream does. Unlike upstream: under
	// a burst of pods, each ContainerCreating write is one more request at
	// kubeAPIQPS ahead of the Running ones; on a node that starts a pod
	// within the delay, a pod gets one status write instead of two.
	CreatingStatusDelay time.Duration
}

// versionedPodStatus is a status with the version it got when it last changed.
type versionedPodStatus struct {
	status                v1.PodStatus
	version               uint64
	podName, podNamespace string
	at                    time.Time
	// podIsFinished: TerminatePod was called; the pod may be deleted once
	// its terminal phase is in the API.
	podIsFinished bool
	// firstAt is when the manager got the pod's first status
	// (CreatingStatusDelay counts from it).
	firstAt time.Time
}

type manager struct {
	client      kubernetes.Interface
	podManager  PodManager
	safety      PodDeletionSafetyProvider
	clock       clock.WithTicker
	podStatuses map[types.UID]versionedPodStatus
	mu          sync.RWMutex // guards podStatuses and podResizeConditions
	// podResizeConditions are the pods' resize conditions, by UID
	// (resize.go).
	podResizeConditions map[types.UID]podResizeConditions
	// podStatusChannel pokes the sync loop when a status changed.
	podStatusChannel chan struct{}
	// apiStatusVersions is the version last written, by the UID of the
	// pod written (a mirror pod's for a static pod). Only the sync loop
	// touches it.
	apiStatusVersions map[types.UID]uint64
	// apiStatuses is the status our last patch returned, by the same UIDs:
	// what the API holds unless someone else wrote since. The next patch
	// is made against it instead of a fresh GET. Only the sync loop.
	apiStatuses map[types.UID]v1.PodStatus
	// readAPI marks pods whose next write must read the API first (the
	// full sync found it disagrees with us). Only the sync loop.
	readAPI map[types.UID]bool
	// apiMu guards the three maps above while a batch's writers run.
	apiMu   sync.Mutex
	writers int
	metrics *metrics.Metrics
	// creatingDelay is Config.CreatingStatusDelay; nextDeferred is when
	// the earliest status it holds back is due (zero: none). Only the sync
	// loop touches nextDeferred.
	creatingDelay time.Duration
	nextDeferred  time.Time
}

// NewManager returns a Manager; Run makes it write.
func NewManager(cfg Config) (Manager, error) {
	return newManager(cfg)
}

func newManager(cfg Config) (*manager, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("status manager: Config.Client is required")
	case cfg.PodManager == nil:
		return nil, errors.New("status manager: Config.PodManager is required")
	case cfg.Clock == nil:
		return nil, errors.New("status manager: Config.Clock is required")
	case cfg.Writers < 0:
		return nil, fmt.Errorf("status manager: Config.Writers is %d; it must be 0 or more", cfg.Writers)
	case cfg.CreatingStatusDelay < 0:
		return nil, fmt.Errorf("status manager: Config.CreatingStatusDelay is %s; it must be 0 or more", cfg.CreatingStatusDelay)
	}
	return &manager{
		client:              cfg.Client,
		podManager:          cfg.PodManager,
		safety:              cfg.PodDeletionSafety,
		clock:               cfg.Clock,
		podStatuses:         map[types.UID]versionedPodStatus{},
		podResizeConditions: map[types.UID]podResizeConditions{},
		podStatusChannel:    make(chan struct{}, 1),
		apiStatusVersions:   map[types.UID]uint64{},
		apiStatuses:         map[types.UID]v1.PodStatus{},
		readAPI:             map[types.UID]bool{},
		writers:             max(cfg.Writers, 1),
		metrics:             cfg.Metrics,
		creatingDelay:       cfg.CreatingStatusDelay,
	}, nil
}

func (m *manager) Run(ctx context.Context) {
	ticker := m.clock.NewTicker(SyncPeriod)
	defer ticker.Stop()
	var deferred <-chan time.Time // a held-back status is due (CreatingStatusDelay)
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.podStatusChannel:
			m.syncBatch(ctx, false)
		case <-deferred:
			m.syncBatch(ctx, false)
		case <-ticker.C():
			m.syncBatch(ctx, true)
		}
		deferred = nil
		if !m.nextDeferred.IsZero() {
			deferred = m.clock.After(m.nextDeferred.Sub(m.clock.Now()))
		}
	}
}

func (m *manager) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s, ok := m.podStatuses[m.podManager.TranslatePodUID(uid)]
	return s.status, ok
}

func (m *manager) SetPodStatus(pod *v1.Pod, status v1.PodStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// A pod being deleted is written even if unchanged: its deletion may
	// be waiting for it.
	m.updateStatusInternal(pod, *status.DeepCopy(), pod.DeletionTimestamp != nil, false)
}

func (m *manager) TerminatePod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := &pod.Status
	if cached, ok := m.podStatuses[pod.UID]; ok {
		old = &cached.status
	}
	status := old.DeepCopy()
	unknown := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
		Reason: "ContainerStatusUnknown", Message: "The container could not be located when the pod was terminated", ExitCode: 137}}
	for i := range status.ContainerStatuses {
		if status.ContainerStatuses[i].State.Terminated == nil {
			status.ContainerStatuses[i].State = unknown
		}
	}
	for i := range status.InitContainerStatuses {
		if status.InitContainerStatuses[i].State.Terminated == nil {
			status.InitContainerStatuses[i].State = unknown
		}
	}
	// As upstream, a static pod gets no terminal phase (its mirror pod is
	// deleted with it); any other pod ends Failed unless it ended already.
	if !kubetypes.IsStaticPod(pod) && status.Phase != v1.PodSucceeded && status.Phase != v1.PodFailed {
		status.Phase = v1.PodFailed
	}
	m.updateStatusInternal(pod, *status, true, true)
}

func (m *manager) RemoveOrphanedStatuses(podUIDs map[types.UID]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for uid := range m.podStatuses {
		if !podUIDs[uid] {
			delete(m.podStatuses, uid)
			m.metrics.DeletePodStartupState(uid)
		}
	}
	for uid := range m.podResizeConditions {
		if !podUIDs[uid] {
			delete(m.podResizeConditions, uid)
		}
	}
}

// updateStatusInternal caches status and pokes the sync loop if it changed
// (or forceUpdate). Caller holds mu.
func (m *manager) updateStatusInternal(pod *v1.Pod, status v1.PodStatus, forceUpdate, podIsFinished bool) {
	var old v1.PodStatus
	cached, isCached := m.podStatuses[pod.UID]
	switch {
	case isCached:
		old = cached.status
		podIsFinished = podIsFinished || cached.podIsFinished // once finished, always
	default:
		old = pod.Status
		if mirror, ok := m.podManager.GetMirrorPodByPod(pod); ok {
			old = mirror.Status
		}
	}
	if err := checkContainerStateTransition(&old, &status, &pod.Spec); err != nil {
		klog.ErrorS(err, "Status update on pod aborted", "pod", klog.KObj(pod))
		return
	}
	now := m.clock.Now()
	for _, t := range []v1.PodConditionType{v1.ContainersReady, v1.PodReady, v1.PodInitialized, v1.PodReadyToStartContainers, v1.PodScheduled, v1.DisruptionTarget} {
		updateLastTransitionTime(&status, &old, t, now)
	}
	if old.StartTime != nil && !old.StartTime.IsZero() {
		status.StartTime = old.StartTime // the start time never changes
	} else if status.StartTime.IsZero() {
		t := metav1.NewTime(now)
		status.StartTime = &t
	}
	normalizeStatus(pod, &status)

	if isCached && isPodStatusByKubeletEqual(&cached.status, &status) && !forceUpdate {
		return // nothing new: no new version, no write
	}
	firstAt := cached.firstAt
	if !isCached {
		firstAt = now
	}
	m.podStatuses[pod.UID] = versionedPodStatus{
		status: status, version: cached.version + 1, podName: pod.Name, podNamespace: pod.Namespace,
		at: now, podIsFinished: podIsFinished, firstAt: firstAt,
	}
	select {
	case m.podStatusChannel <- struct{}{}:
	default: // a poke is already pending; it will see this status too
	}
}

// checkContainerStateTransition refuses a container going from terminated
// back to running when the restart policy says it never restarts. A
// sidecar (restartable init container) restarts whatever the pod's policy.
func checkContainerStateTransition(old, new *v1.PodStatus, spec *v1.PodSpec) error {
	policy := spec.RestartPolicy
	if policy == v1.RestartPolicyAlways {
		return nil
	}
	sidecars := map[string]bool{}
	for i := range spec.InitContainers {
		if kubecontainer.IsRestartableInitContainer(&spec.InitContainers[i]) {
			sidecars[spec.InitContainers[i].Name] = true
		}
	}
	for li, lists := range [][2][]v1.ContainerStatus{{old.ContainerStatuses, new.ContainerStatuses}, {old.InitContainerStatuses, new.InitContainerStatuses}} {
		for _, o := range lists[0] {
			if o.State.Terminated == nil || (li == 1 && sidecars[o.Name]) {
				continue
			}
			if policy == v1.RestartPolicyOnFailure && o.State.Terminated.ExitCode != 0 {
				continue
			}
			for _, n := range lists[1] {
				if n.Name == o.Name && n.State.Terminated == nil {
					return fmt.Errorf("terminated container %v attempted illegal transition to non-terminated state", n.Name)
				}
			}
		}
	}
	return nil
}

// updateLastTransitionTime keeps a condition's transition time while its
// status stays the same, and sets it to now when it changes.
func updateLastTransitionTime(status, old *v1.PodStatus, t v1.PodConditionType, now time.Time) {
	var cond *v1.PodCondition
	for i := range status.Conditions {
		if status.Conditions[i].Type == t {
			cond = &status.Conditions[i]
		}
	}
	if cond == nil {
		return
	}
	cond.LastTransitionTime = metav1.NewTime(now)
	for _, o := range old.Conditions {
		if o.Type == t && o.Status == cond.Status && !o.LastTransitionTime.IsZero() {
			cond.LastTransitionTime = o.LastTransitionTime
		}
	}
}

// normalizeStatus truncates times to seconds (what the API stores) and
// sorts container statuses, so that statuses compare equal to what the API
// returns.
func normalizeStatus(pod *v1.Pod, status *v1.PodStatus) {
	norm := func(t *metav1.Time) { *t = t.Rfc3339Copy() }
	normState := func(s *v1.ContainerState) {
		if s.Running != nil {
			norm(&s.Running.StartedAt)
		}
		if s.Terminated != nil {
			norm(&s.Terminated.StartedAt)
			norm(&s.Terminated.FinishedAt)
		}
	}
	if status.StartTime != nil {
		// A new pointer: the start time may be the cached status's own,
		// which a status writer may be reading right now.
		t := status.StartTime.Rfc3339Copy()
		status.StartTime = &t
	}
	for i := range status.Conditions {
		norm(&status.Conditions[i].LastProbeTime)
		norm(&status.Conditions[i].LastTransitionTime)
	}
	for _, list := range [][]v1.ContainerStatus{status.ContainerStatuses, status.InitContainerStatuses} {
		for i := range list {
			normState(&list[i].State)
			normState(&list[i].LastTerminationState)
		}
	}
	sort.SliceStable(status.ContainerStatuses, func(i, j int) bool {
		return status.ContainerStatuses[i].Name < status.ContainerStatuses[j].Name
	})
	// Init containers keep the spec's order, as upstream.
	order := map[string]int{}
	for i, c := range pod.Spec.InitContainers {
		order[c.Name] = i
	}
	sort.SliceStable(status.InitContainerStatuses, func(i, j int) bool {
		return order[status.InitContainerStatuses[i].Name] < order[status.InitContainerStatuses[j].Name]
	})
}

// isPodStatusByKubeletEqual compares two statuses on what the kubelet owns:
// conditions others own do not count.
func isPodStatusByKubeletEqual(old, status *v1.PodStatus) bool {
	kubeletConds := func(s *v1.PodStatus) map[v1.PodConditionType]v1.PodCondition {
		m := map[v1.PodConditionType]v1.PodCondition{}
		for _, c := range s.Conditions {
			if PodConditionByKubelet(c.Type) || PodConditionSharedByKubelet(c.Type) {
				m[c.Type] = c
			}
		}
		return m
	}
	if !apiequality.Semantic.DeepEqual(kubeletConds(old), kubeletConds(status)) {
		return false
	}
	oldCopy := old.DeepCopy()
	oldCopy.Conditions = status.Conditions
	return apiequality.Semantic.DeepEqual(oldCopy, status)
}

// podSync is one status to write.
type podSync struct {
	podUID types.UID
	status versionedPodStatus
}

// syncBatch writes the statuses whose version was not written yet; with
// all, also those the API disagrees with and those whose pod can now be
// deleted. It returns how many it tried.
func (m *manager) syncBatch(ctx context.Context, all bool) int {
	var updates []podSync
	m.nextDeferred = time.Time{}
	now := m.clock.Now()
	m.mu.RLock()
	uidOfStatus := make(map[types.UID]types.UID, len(m.podStatuses))
	for uid, st := range m.podStatuses {
		target := uid
		if pod, ok := m.podManager.GetPodByUID(uid); ok && kubetypes.IsStaticPod(pod) {
			mirror, ok := m.podManager.GetMirrorPodByPod(pod)
			if !ok {
				continue // no mirror pod yet: nowhere to write
			}
			target = mirror.UID
		}
		uidOfStatus[uid] = target
		switch {
		case m.holdBack(target, st, now):
		case m.apiStatusVersions[target] < st.version:
			updates = append(updates, podSync{uid, st})
		case !all:
		case m.canBeDeletedByUID(uid, st):
			updates = append(updates, podSync{uid, st})
		case m.needsReconcile(uid, st.status):
			delete(m.apiStatusVersions, target)
			m.readAPI[target] = true // someone else wrote: our copy is stale
			updates = append(updates, podSync{uid, st})
		}
	}
	m.mu.RUnlock()
	if all { // forget versions of pods that are gone
		written := map[types.UID]bool{}
		for _, target := range uidOfStatus {
			written[target] = true
		}
		for uid := range m.apiStatusVersions {
			if !written[uid] {
				delete(m.apiStatusVersions, uid)
			}
		}
		for uid := range m.apiStatuses {
			if !written[uid] {
				delete(m.apiStatuses, uid)
				delete(m.readAPI, uid)
			}
		}
	}
	// Oldest status first (upstream takes the map's random order): in a
	// burst, a pod set Running early is not written after a hundred later
	// ones.
	slices.SortFunc(updates, func(a, b podSync) int {
		if c := a.status.at.Compare(b.status.at); c != 0 {
			return c
		}
		return strings.Compare(string(a.podUID), string(b.podUID))
	})
	// A batch holds each pod once, so its writers never write the same
	// pod; the next batch starts when this one is done.
	work := make(chan podSync)
	var wg sync.WaitGroup
	for range min(m.writers, len(updates)) {
		wg.Go(func() {
			for u := range work {
				m.syncPod(ctx, u.podUID, u.status)
			}
		})
	}
	for _, u := range updates {
		work <- u
	}
	close(work)
	wg.Wait()
	return len(updates)
}

// holdBack tells whether st, the pod's newest status, waits
// (CreatingStatusDelay): nothing of the pod was written yet and all st says
// is that its containers are being created, and the delay since its first
// status is not over. It keeps nextDeferred at the earliest time one is
// due. Caller holds mu (read).
func (m *manager) holdBack(target types.UID, st versionedPodStatus, now time.Time) bool {
	if m.creatingDelay <= 0 || st.podIsFinished || !onlyCreating(&st.status) {
		return false
	}
	if _, written := m.apiStatusVersions[target]; written {
		return false
	}
	due := st.firstAt.Add(m.creatingDelay)
	if !now.Before(due) {
		return false
	}
	if m.nextDeferred.IsZero() || due.Before(m.nextDeferred) {
		m.nextDeferred = due
	}
	return true
}

// onlyCreating: the status is Pending and every container's (init and
// regular) is waiting as ContainerCreating or PodInitializing, the
// kubelet's words for "being set up", not an error.
func onlyCreating(s *v1.PodStatus) bool {
	if s.Phase != v1.PodPending || len(s.ContainerStatuses)+len(s.InitContainerStatuses) == 0 {
		return false
	}
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
		for _, c := range list {
			if w := c.State.Waiting; w == nil || (w.Reason != "ContainerCreating" && w.Reason != "PodInitializing") {
				return false
			}
		}
	}
	return true
}

func (m *manager) canBeDeletedByUID(uid types.UID, st versionedPodStatus) bool {
	pod, ok := m.podManager.GetPodByUID(uid)
	return ok && m.canBeDeleted(pod, st.status, st.podIsFinished)
}

// needsReconcile tells whether the API's status (as the pod manager last
// saw it) differs from the cached one.
func (m *manager) needsReconcile(uid types.UID, status v1.PodStatus) bool {
	pod, ok := m.podManager.GetPodByUID(uid)
	if !ok {
		return false
	}
	if kubetypes.IsStaticPod(pod) {
		mirror, ok := m.podManager.GetMirrorPodByPod(pod)
		if !ok {
			return false
		}
		pod = mirror
	}
	apiStatus := pod.Status.DeepCopy()
	normalizeStatus(pod, apiStatus)
	return !isPodStatusByKubeletEqual(apiStatus, &status)
}

// syncPod writes one status. Upstream reads the pod (GET) before every
// patch; we patch against what our last patch returned (the watched pod
// for a first write), with the pod's metadata (its deletion timestamp)
// from the pod manager, and read the API only when the full sync found it
// disagreeing or when that patch failed (the pod was recreated under the
// same name, say). Half the requests: under a burst of pods, at
// kubeAPIQPS, that is what keeps the status writes from queueing.
func (m *manager) syncPod(ctx context.Context, uid types.UID, st versionedPodStatus) {
	// The batch began with a snapshot; a newer status may have come since
	// (a burst of pods keeps this loop behind): write only the newest.
	m.mu.RLock()
	if cur, ok := m.podStatuses[uid]; ok && cur.version > st.version {
		st = cur
	}
	m.mu.RUnlock()
	if pod, ok := m.knownAPIPod(uid); ok {
		if m.writeStatus(ctx, uid, st, pod) == nil {
			return
		}
		m.apiMu.Lock()
		delete(m.apiStatuses, pod.UID) // read the API, as upstream always does
		m.apiMu.Unlock()
	}
	pod, err := m.client.CoreV1().Pods(st.podNamespace).Get(ctx, st.podName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		klog.V(3).InfoS("Pod does not exist on the server", "podUID", uid, "pod", klog.KRef(st.podNamespace, st.podName))
		return // it is gone; its status is forgotten by RemoveOrphanedStatuses
	}
	if err != nil {
		klog.InfoS("Failed to get status for pod; will retry", "pod", klog.KRef(st.podNamespace, st.podName), "err", err)
		return
	}
	if translated := m.podManager.TranslatePodUID(pod.UID); translated != uid {
		klog.V(2).InfoS("Pod was deleted and then recreated, skipping status update", "pod", klog.KObj(pod), "oldPodUID", uid, "podUID", pod.UID)
		m.deletePodStatus(uid)
		return
	}
	m.apiMu.Lock()
	delete(m.readAPI, pod.UID)
	m.apiMu.Unlock()
	if err := m.writeStatus(ctx, uid, st, pod); err != nil {
		klog.InfoS("Failed to update status for pod; will retry", "pod", klog.KObj(pod), "err", err)
	}
}

// knownAPIPod is the pod to write (a static pod's mirror pod) as the API
// last told us: metadata from the pod manager (the watch), status from our
// last patch's answer, or from the watch if we never patched it. False
// when we must read the API instead.
func (m *manager) knownAPIPod(uid types.UID) (*v1.Pod, bool) {
	pod, ok := m.podManager.GetPodByUID(uid)
	if !ok {
		return nil, false
	}
	if kubetypes.IsStaticPod(pod) {
		if pod, ok = m.podManager.GetMirrorPodByPod(pod); !ok {
			return nil, false
		}
	}
	m.apiMu.Lock()
	status, patched := m.apiStatuses[pod.UID]
	stale := m.readAPI[pod.UID]
	m.apiMu.Unlock()
	if stale {
		return nil, false
	}
	pod = pod.DeepCopy()
	if patched {
		pod.Status = status
	}
	return pod, true
}

// writeStatus patches st over pod's status (pod is the API's copy), and
// deletes the pod for good once it can be.
func (m *manager) writeStatus(ctx context.Context, uid types.UID, st versionedPodStatus, pod *v1.Pod) error {
	couldRun := m.safety != nil && m.safety.PodCouldHaveRunningContainers(pod)
	merged := mergePodStatus(pod.Status, st.status, couldRun)
	newPod, unchanged, err := PatchPodStatus(ctx, m.client, pod.Namespace, pod.Name, pod.UID, pod.Status, merged)
	if err != nil {
		return err
	}
	if !unchanged {
		klog.V(3).InfoS("Status for pod updated successfully", "pod", klog.KObj(pod), "statusVersion", st.version)
		pod = newPod
		m.metrics.RecordStatusUpdated(pod) // the API's answer: the pod start SLI's observedRunning
	}
	if !st.at.IsZero() {
		m.metrics.ObservePodStatusSyncDuration(m.clock.Since(st.at))
	}
	m.apiMu.Lock()
	m.apiStatuses[pod.UID] = pod.Status
	m.apiStatusVersions[pod.UID] = st.version
	m.apiMu.Unlock()

	if m.canBeDeleted(pod, st.status, st.podIsFinished) {
		var zero int64
		err := m.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: &zero, Preconditions: metav1.NewUIDPreconditions(string(pod.UID))})
		if err != nil && !apierrors.IsNotFound(err) {
			klog.InfoS("Failed to delete status for pod; will retry", "pod", klog.KObj(pod), "err", err)
			return nil // the status is written; the delete is tried again at the next full sync
		}
		klog.V(3).InfoS("Pod fully terminated and removed from etcd", "pod", klog.KObj(pod))
		m.deletePodStatus(uid)
	}
	return nil
}

func (m *manager) deletePodStatus(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.podStatuses, uid)
	m.metrics.DeletePodStartupState(uid)
}

// canBeDeleted holds for a pod being deleted (not a mirror pod) whose
// terminal phase is in the API (pod is the API's copy) and that
// TerminatePod marked finished.
func (m *manager) canBeDeleted(pod *v1.Pod, _ v1.PodStatus, podIsFinished bool) bool {
	if pod.DeletionTimestamp == nil || kubetypes.IsMirrorPod(pod) {
		return false
	}
	if pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed {
		return false
	}
	return podIsFinished
}

// mergePodStatus keeps the conditions others own from the API's status and
// takes the kubelet's for the rest; a terminal phase waits while
// containers could still run; a finished pod is not ready.
func mergePodStatus(old, new v1.PodStatus, couldHaveRunningContainers bool) v1.PodStatus {
	terminal := func(p v1.PodPhase) bool { return p == v1.PodSucceeded || p == v1.PodFailed }
	toTerminal := !terminal(old.Phase) && terminal(new.Phase)
	conds := make([]v1.PodCondition, 0, len(old.Conditions)+len(new.Conditions))
	for _, c := range old.Conditions {
		if !PodConditionByKubelet(c.Type) {
			conds = append(conds, c)
		}
	}
	for _, c := range new.Conditions {
		switch {
		case PodConditionByKubelet(c.Type):
			conds = append(conds, c)
		case PodConditionSharedByKubelet(c.Type) && toTerminal && !couldHaveRunningContainers:
			// DisruptionTarget goes out with the terminal phase, once
			// nothing runs (as upstream: no patch for a phase held back),
			// replacing one another component wrote.
			if c.LastTransitionTime.IsZero() {
				c.LastTransitionTime = metav1.Now()
			}
			conds = replaceOrAppendCondition(conds, c)
		}
	}
	new.Conditions = conds
	// Not the kubelet's: the resource claim controller writes these.
	new.ResourceClaimStatuses = old.ResourceClaimStatuses
	new.ExtendedResourceClaimStatus = old.ExtendedResourceClaimStatus
	new.NodeAllocatableResourceClaimStatuses = old.NodeAllocatableResourceClaimStatuses
	if toTerminal && couldHaveRunningContainers {
		new.Phase, new.Reason, new.Message = old.Phase, old.Reason, old.Message
	}
	if terminal(new.Phase) {
		reason := PodFailed
		if new.Phase == v1.PodSucceeded {
			reason = PodCompleted
		}
		for i := range new.Conditions {
			if (new.Conditions[i].Type == v1.PodReady || new.Conditions[i].Type == v1.ContainersReady) && new.Conditions[i].Status == v1.ConditionTrue {
				new.Conditions[i].Status, new.Conditions[i].Reason = v1.ConditionFalse, reason
			}
		}
	}
	return new
}

// PatchPodStatus writes newStatus over oldStatus as a strategic merge patch
// of pods/status, carrying the pod's UID so the API server refuses it for a
// pod recreated under the same name (422: metadata.uid is immutable). unchanged reports that there was
// nothing to write (and nothing was sent). Upstream: pkg/util/pod.PatchPodStatus.
func PatchPodStatus(ctx context.Context, c kubernetes.Interface, namespace, name string, uid types.UID, oldStatus, newStatus v1.PodStatus) (*v1.Pod, bool, error) {
	patch, unchanged, err := preparePatchBytesForPodStatus(uid, oldStatus, newStatus)
	if err != nil {
		return nil, false, fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	if unchanged {
		return nil, true, nil
	}
	pod, err := c.CoreV1().Pods(namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, false, fmt.Errorf("patch status of pod %s/%s: %w", namespace, name, err)
	}
	return pod, false, nil
}

func preparePatchBytesForPodStatus(uid types.UID, oldStatus, newStatus v1.PodStatus) ([]byte, bool, error) {
	oldData, err := json.Marshal(v1.Pod{Status: oldStatus})
	if err != nil {
		return nil, false, err
	}
	// Only the new object has the UID, so the patch always carries it.
	newData, err := json.Marshal(v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: newStatus})
	if err != nil {
		return nil, false, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, v1.Pod{})
	if err != nil {
		return nil, false, err
	}
	return patch, string(patch) == fmt.Sprintf(`{"metadata":{"uid":%q}}`, uid), nil
}

// replaceOrAppendCondition puts c in conds in place of the condition of
// its type, or at the end.
func replaceOrAppendCondition(conds []v1.PodCondition, c v1.PodCondition) []v1.PodCondition {
	for i := range conds {
		if conds[i].Type == c.Type {
			conds[i] = c
			return conds
		}
	}
	return append(conds, c)
}
