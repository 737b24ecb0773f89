package config

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"mykubelet/mylib/kubetypes"
)

// PodConfig merges the pod sources into one ordered stream of changes. Each
// source gets its own channel (Channel); what it sends is compared with what
// it sent before, and only real changes come out of Updates:
//
//	REMOVE     pods the source no longer lists
//	ADD        pods new to the source
//	UPDATE     spec, labels, annotations or deletion grace changed
//	DELETE     the pod was marked for graceful deletion (deletionTimestamp)
//	RECONCILE  only the status changed
//
// A SET identical to the previous one produces nothing (de-duplication).
//
// Three locks, as upstream's podStorage has, so that a reader who is slow to
// receive never blocks one who only asks a question:
//
//   - updateLock serialises whole merges, sends included, so changes leave
//     in the order they were computed. A merge may wait on a full Updates
//     channel while holding it; nothing else takes it.
//   - podLock guards the pods; it is released before any send.
//   - sourcesLock guards the sources and which of them sent a SET, so
//     SeenAllSources answers even while a merge waits to send.
type PodConfig struct {
	clock   clock.Clock
	updates chan kubetypes.PodUpdate

	updateLock sync.Mutex

	podLock sync.Mutex
	pods    map[string]map[types.UID]*v1.Pod // source → UID → pod

	sourcesLock sync.Mutex
	sourcesSeen map[string]bool // sources that sent a SET
	channels    map[string]chan kubetypes.PodUpdate
}

// NewPodConfig returns an empty PodConfig. clk stamps config.seen.
func NewPodConfig(clk clock.Clock) *PodConfig {
	return &PodConfig{
		clock:       clk,
		updates:     make(chan kubetypes.PodUpdate, 50), // as upstream
		pods:        map[string]map[types.UID]*v1.Pod{},
		sourcesSeen: map[string]bool{},
		channels:    map[string]chan kubetypes.PodUpdate{},
	}
}

// Updates is the merged stream.
func (c *PodConfig) Updates() <-chan kubetypes.PodUpdate { return c.updates }

// Channel returns the channel a source sends on, creating it (and the
// goroutine that merges from it, until ctx ends) on first use.
func (c *PodConfig) Channel(ctx context.Context, source string) chan<- kubetypes.PodUpdate {
	if source == "" {
		panic("config: Channel needs a source name")
	}
	c.sourcesLock.Lock()
	defer c.sourcesLock.Unlock()
	if ch, ok := c.channels[source]; ok {
		return ch
	}
	ch := make(chan kubetypes.PodUpdate)
	c.channels[source] = ch
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case u := <-ch:
				c.Merge(ctx, source, u)
			}
		}
	}()
	return ch
}

// SeenAllSources reports whether every source with a channel has sent at
// least one SET, i.e. the merged view is complete. It never waits for a
// merge, so the reader of Updates may call it between receives.
func (c *PodConfig) SeenAllSources() bool {
	c.sourcesLock.Lock()
	defer c.sourcesLock.Unlock()
	for source := range c.channels {
		if !c.sourcesSeen[source] {
			return false
		}
	}
	return true
}

// Merge folds one update from source into the state and sends the resulting
// changes on Updates, in the order REMOVE, ADD, UPDATE, DELETE, RECONCILE.
// Sources normally send SET (their whole list); ADD, UPDATE and DELETE are
// accepted as "add or change these pods", REMOVE as "forget these pods".
// The first SET of a source that changes nothing still sends an empty ADD,
// so a listener learns that the source is ready.
func (c *PodConfig) Merge(ctx context.Context, source string, update kubetypes.PodUpdate) {
	c.updateLock.Lock()
	defer c.updateLock.Unlock()

	seenBefore := c.seenSource(source)
	removes, adds, updates, deletes, reconciles := c.merge(source, update)
	firstSet := !seenBefore && c.seenSource(source)

	// podLock is free from here on: only updateLock is held while sending.
	c.send(ctx, kubetypes.REMOVE, source, removes)
	c.send(ctx, kubetypes.ADD, source, adds)
	c.send(ctx, kubetypes.UPDATE, source, updates)
	c.send(ctx, kubetypes.DELETE, source, deletes)
	if firstSet && len(adds)+len(updates)+len(deletes) == 0 {
		c.sendAlways(ctx, kubetypes.PodUpdate{Pods: []*v1.Pod{}, Op: kubetypes.ADD, Source: source})
	}
	c.send(ctx, kubetypes.RECONCILE, source, reconciles)
}

// merge folds update into the pods of source under podLock and returns the
// changes, each as copies the listener may keep.
func (c *PodConfig) merge(source string, update kubetypes.PodUpdate) (removes, adds, updates, deletes, reconciles []*v1.Pod) {
	c.podLock.Lock()
	defer c.podLock.Unlock()

	old := c.pods[source]
	if old == nil {
		old = map[types.UID]*v1.Pod{}
	}
	pods := old
	if update.Op == kubetypes.SET {
		c.markSourceSet(source)
		pods = map[types.UID]*v1.Pod{}
	}

	if update.Op == kubetypes.REMOVE {
		for _, p := range update.Pods {
			if existing, ok := pods[p.UID]; ok {
				delete(pods, p.UID)
				removes = append(removes, existing)
			}
		}
	} else {
		for _, ref := range filterDuplicateNames(update.Pods, source) {
			if existing, ok := old[ref.UID]; ok && sameVersion(existing, ref) {
				// The API server's copy has not changed since the last
				// update: nothing to copy or compare. (Upstream compares
				// every pod of every update, which costs a burst of 100
				// pods some 30,000 deep comparisons.)
				pods[ref.UID] = existing
				continue
			}
			ref = ref.DeepCopy() // never keep or change what the source owns
			if ref.Annotations == nil {
				ref.Annotations = map[string]string{}
			}
			ref.Annotations[kubetypes.ConfigSourceAnnotationKey] = source
			existing, found := old[ref.UID]
			if !found {
				if _, ok := ref.Annotations[kubetypes.ConfigFirstSeenAnnotationKey]; !ok {
					ref.Annotations[kubetypes.ConfigFirstSeenAnnotationKey] = kubetypes.Timestamp(c.clock.Now())
				}
				pods[ref.UID] = ref
				adds = append(adds, ref)
				continue
			}
			pods[ref.UID] = existing
			switch checkAndUpdatePod(existing, ref) {
			case needUpdate:
				updates = append(updates, existing)
			case needGracefulDelete:
				deletes = append(deletes, existing)
			case needReconcile:
				reconciles = append(reconciles, existing)
			}
		}
		if update.Op == kubetypes.SET {
			for uid, existing := range old {
				if _, ok := pods[uid]; !ok {
					removes = append(removes, existing)
				}
			}
			// Map order is random; sort so that what a chapter prints is stable.
			slices.SortFunc(removes, func(x, y *v1.Pod) int {
				return strings.Compare(kubetypes.GetPodFullName(x), kubetypes.GetPodFullName(y))
			})
		}
	}
	c.pods[source] = pods
	return copyPods(removes), copyPods(adds), copyPods(updates), copyPods(deletes), copyPods(reconciles)
}

func (c *PodConfig) markSourceSet(source string) {
	c.sourcesLock.Lock()
	defer c.sourcesLock.Unlock()
	c.sourcesSeen[source] = true
}

func (c *PodConfig) seenSource(source string) bool {
	c.sourcesLock.Lock()
	defer c.sourcesLock.Unlock()
	return c.sourcesSeen[source]
}

// copyPods gives listeners their own copies: the stored pods change on the
// next merge.
func copyPods(pods []*v1.Pod) []*v1.Pod {
	if len(pods) == 0 {
		return nil
	}
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.DeepCopy())
	}
	return out
}

func (c *PodConfig) send(ctx context.Context, op kubetypes.PodOperation, source string, pods []*v1.Pod) {
	if len(pods) == 0 {
		return
	}
	c.sendAlways(ctx, kubetypes.PodUpdate{Pods: pods, Op: op, Source: source})
}

func (c *PodConfig) sendAlways(ctx context.Context, u kubetypes.PodUpdate) {
	select {
	case c.updates <- u:
	case <-ctx.Done():
	}
}

// filterDuplicateNames drops pods whose namespace/name repeats an earlier
// one from the same source (two manifests naming the same pod).
func filterDuplicateNames(pods []*v1.Pod, source string) []*v1.Pod {
	seen := map[string]bool{}
	var out []*v1.Pod
	for _, p := range pods {
		name := kubetypes.GetPodFullName(p)
		if seen[name] {
			klog.InfoS("Pod failed validation due to duplicate pod name, ignoring", "pod", klog.KObj(p), "source", source)
			continue
		}
		seen[name] = true
		out = append(out, p)
	}
	return out
}

type podChange int

const (
	noChange podChange = iota
	needUpdate
	needGracefulDelete
	needReconcile
)

// localAnnotations are the kubelet's own; a source changing them is not a
// change of the pod.
var localAnnotations = map[string]bool{
	kubetypes.ConfigSourceAnnotationKey:    true,
	kubetypes.ConfigMirrorAnnotationKey:    true,
	kubetypes.ConfigFirstSeenAnnotationKey: true,
}

// sameVersion: both are the API server's pod at one resourceVersion, so
// they are equal. Pods from files have none and are always compared.
func sameVersion(existing, ref *v1.Pod) bool {
	return ref.ResourceVersion != "" && ref.ResourceVersion == existing.ResourceVersion
}

// checkAndUpdatePod copies ref into existing and says what kind of change it was.
func checkAndUpdatePod(existing, ref *v1.Pod) podChange {
	existing.ResourceVersion = ref.ResourceVersion
	if !podsDifferSemantically(existing, ref) {
		if !reflect.DeepEqual(existing.Status, ref.Status) {
			existing.Status = ref.Status
			return needReconcile
		}
		return noChange
	}
	annotations := map[string]string{}
	for k, v := range ref.Annotations {
		if !localAnnotations[k] {
			annotations[k] = v
		}
	}
	for k := range localAnnotations {
		if v, ok := existing.Annotations[k]; ok {
			annotations[k] = v
		}
	}
	existing.Annotations = annotations
	existing.Spec = ref.Spec
	existing.Labels = ref.Labels
	existing.DeletionTimestamp = ref.DeletionTimestamp
	existing.DeletionGracePeriodSeconds = ref.DeletionGracePeriodSeconds
	existing.Generation = ref.Generation
	existing.Status = ref.Status
	if ref.DeletionTimestamp != nil {
		return needGracefulDelete
	}
	return needUpdate
}

func podsDifferSemantically(existing, ref *v1.Pod) bool {
	return !reflect.DeepEqual(existing.Spec, ref.Spec) ||
		!reflect.DeepEqual(existing.Labels, ref.Labels) ||
		!reflect.DeepEqual(existing.DeletionTimestamp, ref.DeletionTimestamp) ||
		!reflect.DeepEqual(existing.DeletionGracePeriodSeconds, ref.DeletionGracePeriodSeconds) ||
		!annotationsEqualIgnoringLocal(existing.Annotations, ref.Annotations)
}

func annotationsEqualIgnoringLocal(a, b map[string]string) bool {
	count := func(m map[string]string) int {
		n := 0
		for k := range m {
			if !localAnnotations[k] {
				n++
			}
		}
		return n
	}
	if count(a) != count(b) {
		return false
	}
	for k, v := range b {
		if localAnnotations[k] {
			continue
		}
		if av, ok := a[k]; !ok || av != v {
			return false
		}
	}
	return true
}
