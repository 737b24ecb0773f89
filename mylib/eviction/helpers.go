package eviction

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"mykubelet/mylib/lifecycle"
	"mykubelet/mylib/qos"
)

// The words a pod's status, its events and the admission refusals carry
// (upstream's, in pkg/kubelet/eviction/helpers.go).
const (
	// Reason is the status reason of an evicted pod, the reason of its
	// "Evicted" event and of an admission refusal.
	Reason = "Evicted"
	// nodeLowMessageFmt opens an evicted pod's message.
	nodeLowMessageFmt = "The node was low on resource: %v. "
	// thresholdMetMessageFmt follows it: the threshold and what was left.
	thresholdMetMessageFmt = "Threshold quantity: %v, available: %v. "
	// containerMessageFmt names each container above its request.
	containerMessageFmt = "Container %s was using %s, request is %s, has larger consumption of %v. "
	// podMessageFmt names a pod with a pod-level memory request, with its
	// usage, before its containers.
	podMessageFmt = "Pod %s was using %s, request is %s, has larger consumption of %v. "
	// nodeConditionMessageFmt is an admission refusal's message.
	nodeConditionMessageFmt = "The node had condition: %v. "
	// unsupportedEvictionSignal: a threshold naming a signal we do not watch.
	unsupportedEvictionSignal = "unsupported eviction signal %v"

	// The keys of the "Evicted" event's annotations.
	OffendingContainersKey      = "offending_containers"
	OffendingContainersUsageKey = "offending_containers_usage"
	StarvedResourceKey          = "starved_resource"
	// OffendingPodKey and OffendingPodUsageKey name a pod evicted for
	// memory that sets a pod-level memory request, and its usage.
	OffendingPodKey      = "offending_pod"
	OffendingPodUsageKey = "offending_pod_usage"

	// resourceInodes and resourcePids are this package's names for what
	// the inode and pid signals count (upstream's).
	resourceInodes v1.ResourceName = "inodes"
	resourcePids   v1.ResourceName = "pids"
)

// signalToNodeCondition: the node condition a met threshold sets.
var signalToNodeCondition = map[Signal]v1.NodeConditionType{
	SignalMemoryAvailable:   v1.NodeMemoryPressure,
	SignalNodeFsAvailable:   v1.NodeDiskPressure,
	SignalNodeFsInodesFree:  v1.NodeDiskPressure,
	SignalImageFsAvailable:  v1.NodeDiskPressure,
	SignalImageFsInodesFree: v1.NodeDiskPressure,
	SignalPIDAvailable:      v1.NodePIDPressure,
}

// signalToResource: the resource a signal measures, and the one the
// manager reclaims when its threshold is met.
var signalToResource = map[Signal]v1.ResourceName{
	SignalMemoryAvailable:   v1.ResourceMemory,
	SignalNodeFsAvailable:   v1.ResourceEphemeralStorage,
	SignalNodeFsInodesFree:  resourceInodes,
	SignalImageFsAvailable:  v1.ResourceEphemeralStorage,
	SignalImageFsInodesFree: resourceInodes,
	SignalPIDAvailable:      resourcePids,
}

func validSignal(s Signal) bool {
	_, ok := signalToResource[s]
	return ok
}

// ParseThresholdConfig reads the KubeletConfiguration's evictionHard,
// evictionSoft, evictionSoftGracePeriod and evictionMinimumReclaim
// (upstream's eviction.ParseThresholdConfig, without allocatable
// enforcement). A value is a quantity ("100Mi") or a percentage of the
// capacity ("10%"); "0%" and "100%" switch a threshold off. Every soft
// threshold needs its grace period.
func ParseThresholdConfig(evictionHard, evictionSoft, evictionSoftGracePeriod, evictionMinimumReclaim map[string]string) ([]Threshold, error) {
	hard, err := parseThresholdStatements(evictionHard)
	if err != nil {
		return nil, err
	}
	soft, err := parseThresholdStatements(evictionSoft)
	if err != nil {
		return nil, err
	}
	gracePeriods, err := parseGracePeriods(evictionSoftGracePeriod)
	if err != nil {
		return nil, err
	}
	minReclaims, err := parseMinimumReclaims(evictionMinimumReclaim)
	if err != nil {
		return nil, err
	}
	for i := range soft {
		period, ok := gracePeriods[soft[i].Signal]
		if !ok {
			return nil, fmt.Errorf("grace period must be specified for the soft eviction threshold %v", soft[i].Signal)
		}
		soft[i].GracePeriod = period
	}
	results := append(hard, soft...)
	for i := range results {
		if mr, ok := minReclaims[results[i].Signal]; ok {
			results[i].MinReclaim = &mr
		}
	}
	return results, nil
}

// parseThresholdStatements reads signal → value statements, sorted by
// signal so the result does not depend on map order.
func parseThresholdStatements(statements map[string]string) ([]Threshold, error) {
	var results []Threshold
	for _, signal := range sortedKeys(statements) {
		t, err := parseThresholdStatement(Signal(signal), statements[signal])
		if err != nil {
			return nil, err
		}
		if t != nil {
			results = append(results, *t)
		}
	}
	return results, nil
}

func parseThresholdStatement(signal Signal, val string) (*Threshold, error) {
	if !validSignal(signal) {
		return nil, fmt.Errorf(unsupportedEvictionSignal, signal)
	}
	if strings.HasSuffix(val, "%") {
		if val == "0%" || val == "100%" {
			return nil, nil // upstream ignores both: never or always met
		}
		p, err := parsePercentage(val)
		if err != nil {
			return nil, err
		}
		if p < 0 {
			return nil, fmt.Errorf("eviction percentage threshold %v must be >= 0%%: %s", signal, val)
		}
		if p > 1 {
			return nil, fmt.Errorf("eviction percentage threshold %v must be <= 100%%: %s", signal, val)
		}
		return &Threshold{Signal: signal, Operator: OpLessThan, Value: ThresholdValue{Percentage: p}}, nil
	}
	q, err := resource.ParseQuantity(val)
	if err != nil {
		return nil, fmt.Errorf("eviction threshold %v: %w", signal, err)
	}
	if q.Sign() <= 0 {
		return nil, fmt.Errorf("eviction threshold %v must be positive: %s", signal, &q)
	}
	return &Threshold{Signal: signal, Operator: OpLessThan, Value: ThresholdValue{Quantity: &q}}, nil
}

func parsePercentage(val string) (float32, error) {
	f, err := strconv.ParseFloat(strings.TrimSuffix(val, "%"), 32)
	if err != nil {
		return 0, fmt.Errorf("invalid percentage %q: %w", val, err)
	}
	return float32(f) / 100, nil
}

func parseGracePeriods(statements map[string]string) (map[Signal]time.Duration, error) {
	results := map[Signal]time.Duration{}
	for signal, val := range statements {
		if !validSignal(Signal(signal)) {
			return nil, fmt.Errorf(unsupportedEvictionSignal, signal)
		}
		d, err := time.ParseDuration(val)
		if err != nil {
			return nil, fmt.Errorf("eviction grace period %v: %w", signal, err)
		}
		if d < 0 {
			return nil, fmt.Errorf("invalid eviction grace period specified: %v, must be a positive value", val)
		}
		results[Signal(signal)] = d
	}
	return results, nil
}

func parseMinimumReclaims(statements map[string]string) (map[Signal]ThresholdValue, error) {
	results := map[Signal]ThresholdValue{}
	for signal, val := range statements {
		if !validSignal(Signal(signal)) {
			return nil, fmt.Errorf(unsupportedEvictionSignal, signal)
		}
		if strings.HasSuffix(val, "%") {
			p, err := parsePercentage(val)
			if err != nil {
				return nil, err
			}
			if p <= 0 {
				return nil, fmt.Errorf("eviction percentage minimum reclaim %v must be positive: %s", signal, val)
			}
			results[Signal(signal)] = ThresholdValue{Percentage: p}
			continue
		}
		q, err := resource.ParseQuantity(val)
		if err != nil {
			return nil, fmt.Errorf("eviction minimum reclaim %v: %w", signal, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("negative eviction minimum reclaim specified for %v", signal)
		}
		results[Signal(signal)] = ThresholdValue{Quantity: &q}
	}
	return results, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// GetThresholdQuantity is the threshold's value as a quantity: its own, or
// its percentage of capacity (upstream's evictionapi.GetThresholdQuantity).
func GetThresholdQuantity(value ThresholdValue, capacity *resource.Quantity) *resource.Quantity {
	if value.Quantity != nil {
		q := value.Quantity.DeepCopy()
		return &q
	}
	return resource.NewQuantity(int64(float64(capacity.Value())*float64(value.Percentage)), resource.BinarySI)
}

// signalObservation is one signal's reading: what is left, out of what.
type signalObservation struct {
	available *resource.Quantity
	capacity  *resource.Quantity
	time      metav1.Time
}

type signalObservations map[Signal]signalObservation

// statsFunc finds a pod's stats in the summary.
type statsFunc func(*v1.Pod) (statsapi.PodStats, bool)

// makeSignalObservations reads the signals from the summary:
// memory.available from Node.Memory (capacity = available + working set),
// nodefs.* from Node.Fs, imagefs.* from Node.Runtime.ImageFs, pid.available
// from Node.Rlimit (max pids - running processes).
func makeSignalObservations(summary *statsapi.Summary) (signalObservations, statsFunc) {
	byUID := map[string]statsapi.PodStats{}
	for _, ps := range summary.Pods {
		byUID[ps.PodRef.UID] = ps
	}
	stats := func(pod *v1.Pod) (statsapi.PodStats, bool) {
		ps, ok := byUID[string(pod.UID)]
		return ps, ok
	}
	obs := signalObservations{}
	bytes := func(v uint64) *resource.Quantity { return resource.NewQuantity(int64(v), resource.BinarySI) }
	count := func(v uint64) *resource.Quantity { return resource.NewQuantity(int64(v), resource.DecimalSI) }
	n := summary.Node
	if m := n.Memory; m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
		obs[SignalMemoryAvailable] = signalObservation{
			available: bytes(*m.AvailableBytes),
			capacity:  bytes(*m.AvailableBytes + *m.WorkingSetBytes),
			time:      m.Time,
		}
	}
	addFs := func(fs *statsapi.FsStats, avail, inodes Signal) {
		if fs == nil {
			return
		}
		if fs.AvailableBytes != nil && fs.CapacityBytes != nil {
			obs[avail] = signalObservation{available: bytes(*fs.AvailableBytes), capacity: bytes(*fs.CapacityBytes), time: fs.Time}
		}
		if fs.InodesFree != nil && fs.Inodes != nil {
			obs[inodes] = signalObservation{available: count(*fs.InodesFree), capacity: count(*fs.Inodes), time: fs.Time}
		}
	}
	addFs(n.Fs, SignalNodeFsAvailable, SignalNodeFsInodesFree)
	if n.Runtime != nil {
		addFs(n.Runtime.ImageFs, SignalImageFsAvailable, SignalImageFsInodesFree)
	}
	if r := n.Rlimit; r != nil && r.MaxPID != nil && r.NumOfRunningProcesses != nil {
		obs[SignalPIDAvailable] = signalObservation{
			available: resource.NewQuantity(*r.MaxPID-*r.NumOfRunningProcesses, resource.DecimalSI),
			capacity:  resource.NewQuantity(*r.MaxPID, resource.DecimalSI),
			time:      r.Time,
		}
	}
	return obs, stats
}

// thresholdsMet returns the thresholds whose signal is below their value
// now, grace periods aside. With enforceMinReclaim the value is raised by
// the threshold's minimum reclaim: a threshold stays met until that much
// more is free.
func thresholdsMet(thresholds []Threshold, obs signalObservations, enforceMinReclaim bool) []Threshold {
	var results []Threshold
	for _, t := range thresholds {
		o, ok := obs[t.Signal]
		if !ok {
			// Upstream logs this at level 0; a node whose stats lack a
			// figure (inodes of the mock image filesystem) would repeat
			// it every pass.
			klog.V(2).InfoS("Eviction manager: no observation found for eviction signal", "signal", t.Signal)
			continue
		}
		q := GetThresholdQuantity(t.Value, o.capacity)
		if enforceMinReclaim && t.MinReclaim != nil {
			q.Add(*GetThresholdQuantity(*t.MinReclaim, o.capacity))
		}
		if t.Operator == OpLessThan && q.Cmp(*o.available) > 0 {
			results = append(results, t)
		}
	}
	return results
}

// thresholdsUpdatedStats keeps the thresholds whose signal was read anew
// since the last pass, so stale stats never evict a second pod.
func thresholdsUpdatedStats(thresholds []Threshold, obs, last signalObservations) []Threshold {
	var results []Threshold
	for _, t := range thresholds {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		l, seen := last[t.Signal]
		if !seen || o.time.IsZero() || o.time.After(l.time.Time) {
			results = append(results, t)
		}
	}
	return results
}

// thresholdsFirstObservedAt keeps when each met threshold was first seen
// met (now for a new one).
func thresholdsFirstObservedAt(thresholds []Threshold, last map[Threshold]time.Time, now time.Time) map[Threshold]time.Time {
	results := map[Threshold]time.Time{}
	for _, t := range thresholds {
		at, ok := last[t]
		if !ok {
			at = now
		}
		results[t] = at
	}
	return results
}

// thresholdsMetGracePeriod returns those met for at least their grace
// period: a hard one at once, a soft one after its evictionSoftGracePeriod.
func thresholdsMetGracePeriod(observedAt map[Threshold]time.Time, now time.Time) []Threshold {
	var results []Threshold
	for t, at := range observedAt {
		if d := now.Sub(at); d < t.GracePeriod {
			klog.V(2).InfoS("Eviction manager: eviction criteria not yet met", "threshold", formatThreshold(t), "duration", d)
			continue
		}
		results = append(results, t)
	}
	sort.SliceStable(results, func(i, j int) bool { return results[i].Signal < results[j].Signal })
	return results
}

// mergeThresholds appends to a those of b it lacks.
func mergeThresholds(a, b []Threshold) []Threshold {
	results := append([]Threshold{}, a...)
	for _, t := range b {
		found := false
		for _, r := range results {
			if sameThreshold(r, t) {
				found = true
				break
			}
		}
		if !found {
			results = append(results, t)
		}
	}
	return results
}

func sameThreshold(a, b Threshold) bool {
	if a.Signal != b.Signal || a.Operator != b.Operator || a.GracePeriod != b.GracePeriod {
		return false
	}
	if (a.Value.Quantity == nil) != (b.Value.Quantity == nil) {
		return false
	}
	if a.Value.Quantity != nil {
		return a.Value.Quantity.Cmp(*b.Value.Quantity) == 0
	}
	return a.Value.Percentage == b.Value.Percentage
}

func isHardEvictionThreshold(t Threshold) bool { return t.GracePeriod == 0 }

func formatThreshold(t Threshold) string {
	v := fmt.Sprintf("%v%%", t.Value.Percentage*100)
	if t.Value.Quantity != nil {
		v = t.Value.Quantity.String()
	}
	return fmt.Sprintf("threshold(signal=%v, operator=%v, value=%v, gracePeriod=%v)", t.Signal, t.Operator, v, t.GracePeriod)
}

// nodeConditions: the conditions the thresholds set, each once.
func nodeConditions(thresholds []Threshold) []v1.NodeConditionType {
	var results []v1.NodeConditionType
	for _, t := range thresholds {
		if c, ok := signalToNodeCondition[t.Signal]; ok && !hasNodeCondition(results, c) {
			results = append(results, c)
		}
	}
	return results
}

// nodeConditionsLastObservedAt stamps the conditions seen now with now,
// keeping the older stamps of the others.
func nodeConditionsLastObservedAt(conds []v1.NodeConditionType, last map[v1.NodeConditionType]time.Time, now time.Time) map[v1.NodeConditionType]time.Time {
	results := map[v1.NodeConditionType]time.Time{}
	for c, at := range last {
		results[c] = at
	}
	for _, c := range conds {
		results[c] = now
	}
	return results
}

// nodeConditionsObservedSince: the conditions seen within period
// (evictionPressureTransitionPeriod), in a stable order.
func nodeConditionsObservedSince(observedAt map[v1.NodeConditionType]time.Time, period time.Duration, now time.Time) []v1.NodeConditionType {
	var results []v1.NodeConditionType
	for c, at := range observedAt {
		if now.Sub(at) < period {
			results = append(results, c)
		}
	}
	sort.Slice(results, func(i, j int) bool { return results[i] < results[j] })
	return results
}

func hasNodeCondition(conds []v1.NodeConditionType, c v1.NodeConditionType) bool {
	for _, x := range conds {
		if x == c {
			return true
		}
	}
	return false
}

// byEvictionPriority puts memory first: it is reclaimed before the rest.
func byEvictionPriority(thresholds []Threshold) {
	sort.SliceStable(thresholds, func(i, j int) bool {
		return thresholds[i].Signal == SignalMemoryAvailable && thresholds[j].Signal != SignalMemoryAvailable
	})
}

// PodIsEvicted reports whether the status is an eviction's.
func PodIsEvicted(status v1.PodStatus) bool {
	return status.Phase == v1.PodFailed && status.Reason == Reason
}

// isBestEffort: the pod's QoS class is BestEffort (pod-level resources,
// when set, decide it).
func isBestEffort(pod *v1.Pod) bool {
	return qos.GetPodQOS(pod) == v1.PodQOSBestEffort
}

// toleratesMemoryPressure: a toleration matching the
// node.kubernetes.io/memory-pressure:NoSchedule taint.
func toleratesMemoryPressure(pod *v1.Pod) bool {
	taint := &v1.Taint{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule}
	for i := range pod.Spec.Tolerations {
		if pod.Spec.Tolerations[i].ToleratesTaint(klog.Background(), taint, false) {
			return true
		}
	}
	return false
}

// podRequest is the pod's request of a resource: its containers' sum, or
// its largest init container's if more (upstream's
// GetResourceRequestQuantity, without overhead). A pod with pod-level
// resources (spec.resources) requests what spec.resources.requests says,
// whatever its containers ask, and nothing of a resource it does not
// name there (ephemeral-storage, which is no pod-level resource, too), as
// upstream.
func podRequest(pod *v1.Pod, name v1.ResourceName) resource.Quantity {
	sum := resource.Quantity{Format: resource.BinarySI}
	if lifecycle.IsPodLevelResourcesSet(pod) {
		if lifecycle.IsSupportedPodLevelResource(name) {
			if q, ok := pod.Spec.Resources.Requests[name]; ok {
				sum.Add(q)
			}
		}
		return sum
	}
	for _, c := range pod.Spec.Containers {
		if q, ok := c.Resources.Requests[name]; ok {
			sum.Add(q)
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if q, ok := c.Resources.Requests[name]; ok && q.Cmp(sum) > 0 {
			sum = q.DeepCopy()
		}
	}
	return sum
}

func priority(pod *v1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}

// memoryUsage is the pod's working set.
func memoryUsage(ps statsapi.PodStats) resource.Quantity {
	if ps.Memory == nil || ps.Memory.WorkingSetBytes == nil {
		return resource.Quantity{Format: resource.BinarySI}
	}
	return *resource.NewQuantity(int64(*ps.Memory.WorkingSetBytes), resource.BinarySI)
}

// diskUsage is the pod's ephemeral storage (bytes) or inodes: its
// containers' writable layers and logs, and its local volumes.
func diskUsage(pod *v1.Pod, ps statsapi.PodStats, name v1.ResourceName) resource.Quantity {
	total := resource.Quantity{Format: resource.BinarySI}
	add := func(fs *statsapi.FsStats) {
		if fs == nil {
			return
		}
		v := fs.UsedBytes
		if name == resourceInodes {
			v = fs.InodesUsed
		}
		if v != nil {
			total.Add(*resource.NewQuantity(int64(*v), resource.BinarySI))
		}
	}
	for _, c := range ps.Containers {
		add(c.Rootfs)
		add(c.Logs)
	}
	local := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil || v.GitRepo != nil || v.ConfigMap != nil ||
			(v.EmptyDir != nil && v.EmptyDir.Medium == v1.StorageMediumDefault) {
			local[v.Name] = true
		}
	}
	for i := range ps.VolumeStats {
		if local[ps.VolumeStats[i].Name] {
			add(&ps.VolumeStats[i].FsStats)
		}
	}
	return total
}

func processUsage(ps statsapi.PodStats) uint64 {
	if ps.ProcessStats == nil || ps.ProcessStats.ProcessCount == nil {
		return 0
	}
	return *ps.ProcessStats.ProcessCount
}

// cmpFunc orders two pods: negative when p1 goes first (is evicted before p2).
type cmpFunc func(p1, p2 *v1.Pod) int

// rankFunc sorts the pods, the first to evict first.
type rankFunc func(pods []*v1.Pod, stats statsFunc)

func orderedBy(pods []*v1.Pod, cmps ...cmpFunc) {
	sort.SliceStable(pods, func(i, j int) bool {
		for _, c := range cmps {
			if r := c(pods[i], pods[j]); r != 0 {
				return r < 0
			}
		}
		return false
	})
}

// cmpBool puts true first.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	default:
		return 1
	}
}

// byPriority puts the lower priority first.
func byPriority(p1, p2 *v1.Pod) int {
	a, b := priority(p1), priority(p2)
	switch {
	case a == b:
		return 0
	case a < b:
		return -1
	default:
		return 1
	}
}

// withStats wraps a comparison of two pods' stats: a pod without stats
// goes first, as upstream.
func withStats(stats statsFunc, cmp func(p1 *v1.Pod, s1 statsapi.PodStats, p2 *v1.Pod, s2 statsapi.PodStats) int) cmpFunc {
	return func(p1, p2 *v1.Pod) int {
		s1, ok1 := stats(p1)
		s2, ok2 := stats(p2)
		if !ok1 || !ok2 {
			return cmpBool(!ok1, !ok2)
		}
		return cmp(p1, s1, p2, s2)
	}
}

// rankMemoryPressure: the pods using more memory than they request first,
// then the lower priority, then the larger usage above the request.
func rankMemoryPressure(pods []*v1.Pod, stats statsFunc) {
	above := func(p *v1.Pod, s statsapi.PodStats) resource.Quantity {
		u := memoryUsage(s)
		u.Sub(podRequest(p, v1.ResourceMemory))
		return u
	}
	exceeds := withStats(stats, func(p1 *v1.Pod, s1 statsapi.PodStats, p2 *v1.Pod, s2 statsapi.PodStats) int {
		a, b := above(p1, s1), above(p2, s2)
		return cmpBool(a.Sign() > 0, b.Sign() > 0)
	})
	usage := withStats(stats, func(p1 *v1.Pod, s1 statsapi.PodStats, p2 *v1.Pod, s2 statsapi.PodStats) int {
		a, b := above(p1, s1), above(p2, s2)
		return b.Cmp(a)
	})
	orderedBy(pods, exceeds, byPriority, usage)
}

// rankDiskPressureFunc ranks as for memory, measuring disk bytes or inodes.
func rankDiskPressureFunc(name v1.ResourceName) rankFunc {
	return func(pods []*v1.Pod, stats statsFunc) {
		above := func(p *v1.Pod, s statsapi.PodStats) resource.Quantity {
			u := diskUsage(p, s, name)
			u.Sub(podRequest(p, name))
			return u
		}
		exceeds := withStats(stats, func(p1 *v1.Pod, s1 statsapi.PodStats, p2 *v1.Pod, s2 statsapi.PodStats) int {
			a, b := above(p1, s1), above(p2, s2)
			return cmpBool(a.Sign() > 0, b.Sign() > 0)
		})
		usage := withStats(stats, func(p1 *v1.Pod, s1 statsapi.PodStats, p2 *v1.Pod, s2 statsapi.PodStats) int {
			a, b := above(p1, s1), above(p2, s2)
			return b.Cmp(a)
		})
		orderedBy(pods, exceeds, byPriority, usage)
	}
}

// rankPIDPressure: the lower priority first, then the most processes.
func rankPIDPressure(pods []*v1.Pod, stats statsFunc) {
	procs := withStats(stats, func(_ *v1.Pod, s1 statsapi.PodStats, _ *v1.Pod, s2 statsapi.PodStats) int {
		a, b := processUsage(s1), processUsage(s2)
		switch {
		case a == b:
			return 0
		case a > b:
			return -1
		default:
			return 1
		}
	})
	orderedBy(pods, byPriority, procs)
}

var signalToRankFunc = map[Signal]rankFunc{
	SignalMemoryAvailable:   rankMemoryPressure,
	SignalNodeFsAvailable:   rankDiskPressureFunc(v1.ResourceEphemeralStorage),
	SignalNodeFsInodesFree:  rankDiskPressureFunc(resourceInodes),
	SignalImageFsAvailable:  rankDiskPressureFunc(v1.ResourceEphemeralStorage),
	SignalImageFsInodesFree: rankDiskPressureFunc(resourceInodes),
	SignalPIDAvailable:      rankPIDPressure,
}

// evictionMessage says why the pod is evicted: the resource, the threshold
// and what was left, and each container using more than it requests; the
// annotations name them for the event.
func evictionMessage(resourceToReclaim v1.ResourceName, pod *v1.Pod, stats statsFunc, thresholds []Threshold, obs signalObservations) (string, map[string]string) {
	message := fmt.Sprintf(nodeLowMessageFmt, resourceToReclaim)
	for _, t := range thresholds {
		if signalToResource[t.Signal] != resourceToReclaim {
			continue
		}
		if o, ok := obs[t.Signal]; ok {
			message += fmt.Sprintf(thresholdMetMessageFmt, GetThresholdQuantity(t.Value, o.capacity), o.available)
			break
		}
	}
	annotations := map[string]string{}
	ps, ok := stats(pod)
	if !ok {
		return message, annotations
	}
	if resourceToReclaim == v1.ResourceMemory && lifecycle.IsPodLevelResourcesSet(pod) {
		if request, ok := pod.Spec.Resources.Requests[v1.ResourceMemory]; ok && ps.Memory != nil {
			usage := memoryUsage(ps)
			message += fmt.Sprintf(podMessageFmt, pod.Name, usage.String(), request.String(), resourceToReclaim)
			annotations[OffendingPodKey] = pod.Name
			annotations[OffendingPodUsageKey] = usage.String()
		}
	}
	var names, usages []string
	containers := append(append([]v1.Container{}, pod.Spec.Containers...), pod.Spec.InitContainers...)
	for _, cs := range ps.Containers {
		for _, c := range containers {
			if c.Name != cs.Name {
				continue
			}
			request := c.Resources.Requests[resourceToReclaim]
			var usage *resource.Quantity
			switch resourceToReclaim {
			case v1.ResourceMemory:
				if cs.Memory != nil && cs.Memory.WorkingSetBytes != nil {
					usage = resource.NewQuantity(int64(*cs.Memory.WorkingSetBytes), resource.BinarySI)
				}
			case v1.ResourceEphemeralStorage:
				if cs.Rootfs != nil && cs.Rootfs.UsedBytes != nil && cs.Logs != nil && cs.Logs.UsedBytes != nil {
					usage = resource.NewQuantity(int64(*cs.Rootfs.UsedBytes+*cs.Logs.UsedBytes), resource.BinarySI)
				}
			}
			if usage != nil && usage.Cmp(request) > 0 {
				message += fmt.Sprintf(containerMessageFmt, c.Name, usage.String(), request.String(), resourceToReclaim)
				names = append(names, c.Name)
				usages = append(usages, usage.String())
			}
			break
		}
	}
	annotations[OffendingContainersKey] = strings.Join(names, ",")
	annotations[OffendingContainersUsageKey] = strings.Join(usages, ",")
	annotations[StarvedResourceKey] = string(resourceToReclaim)
	return message, annotations
}
