package volumemanager

import (
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"mykubelet/mylib/events"
	"mykubelet/mylib/volume"
)

// Upstream's exponential back-off of a failed volume operation
// (pkg/util/goroutinemap/exponentialbackoff).
const (
	initialDurationBeforeRetry = 500 * time.Millisecond
	maxDurationBeforeRetry     = 2*time.Minute + 2*time.Second
)

// hostPathPluginName is the hostPath plugin's name: its volumes get the
// HostPathMapped event.
const hostPathPluginName = "kubernetes.io/host-path"

// opKey names one volume of one pod: one operation at a time on it.
type opKey struct {
	uid  types.UID
	name string
}

type backoff struct {
	lastError time.Time
	duration  time.Duration
}

// reconciler brings the actual state of world to the desired one
// (upstream's reconciler.reconciler with its operation executor): every
// reconcilerLoopSleepPeriod it tears down what is mounted and no longer
// desired, sets up what is desired and not mounted, and sets up again
// what is marked for remount. Each operation runs in its own goroutine,
// one at a time per volume (upstream's nestedpendingoperations); a failed
// one waits out its back-off before the next try.
type reconciler struct {
	dsw      *desiredStateOfWorld
	asw      *actualStateOfWorld
	recorder record.EventRecorder
	clock    clock.Clock

	mu      sync.Mutex
	pending map[opKey]bool
	backoff map[opKey]*backoff
	wg      sync.WaitGroup // the operations running
}

// reconcile is one pass (upstream's reconcileNew: unmount, then mount).
func (r *reconciler) reconcile() {
	known := map[opKey]bool{}
	for _, mv := range r.asw.getMountedVolumes() {
		known[opKey{mv.PodUID, mv.VolumeName}] = true
		if !r.dsw.podExistsInVolume(mv.PodUID, mv.VolumeName) {
			r.start(opKey{mv.PodUID, mv.VolumeName}, func() error { return r.unmount(mv) })
		}
	}
	for _, v := range r.dsw.getVolumesToMount() {
		known[opKey{v.pod.UID, v.name}] = true
		mounted, remount := r.asw.podExistsInVolume(v.pod.UID, v.name)
		if !mounted || remount {
			r.start(opKey{v.pod.UID, v.name}, func() error { return r.mount(v, mounted) })
		}
	}
	r.forgetBackOffs(known)
}

// forgetBackOffs drops the back-offs of volumes neither desired nor
// mounted any more (a pod deleted while its mount failed).
func (r *reconciler) forgetBackOffs(known map[opKey]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.backoff {
		if !known[k] && !r.pending[k] {
			delete(r.backoff, k)
		}
	}
}

// start runs op for key unless one runs already or its back-off is not
// over; its result sets or clears the back-off.
func (r *reconciler) start(key opKey, op func() error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending[key] {
		return
	}
	if b := r.backoff[key]; b != nil && r.clock.Now().Before(b.lastError.Add(b.duration)) {
		return
	}
	r.pending[key] = true
	r.wg.Go(func() {
		err := op()
		// The operation's end is a change too: WaitForUnmount waits for it.
		defer r.asw.wake()
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.pending, key)
		if err == nil {
			delete(r.backoff, key)
			return
		}
		b := r.backoff[key]
		switch {
		case b == nil:
			b = &backoff{duration: initialDurationBeforeRetry}
			r.backoff[key] = b
		default:
			b.duration = min(2*b.duration, maxDurationBeforeRetry)
		}
		b.lastError = r.clock.Now()
		klog.ErrorS(err, "Volume operation failed", "podUID", key.uid, "volumeName", key.name, "retryAfter", b.duration)
	})
}

// possiblyMounted: an operation on one of the pod's volumes is under way.
func (r *reconciler) possiblyMounted(uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.pending {
		if k.uid == uid {
			return true
		}
	}
	return false
}

// pendingFor are the names of the pod's volumes with an operation under way.
func (r *reconciler) pendingFor(uid types.UID) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for k := range r.pending {
		if k.uid == uid {
			names = append(names, k.name)
		}
	}
	return names
}

// wait returns once the operations started so far have ended.
func (r *reconciler) wait() { r.wg.Wait() }

// mount is upstream's MountVolume: a new Mounter for the pod as it is now,
// SetUp, and the volume marked mounted. A failure is a FailedMount event
// on the pod with upstream's words (its back-off keeps them apart).
func (r *reconciler) mount(v volumeToMount, remount bool) error {
	fail := func(err error) error {
		msg := fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", v.name, err)
		r.recorder.Eventf(v.pod, v1.EventTypeWarning, events.FailedMountVolume, "%s", msg)
		return fmt.Errorf("%s (pod %s/%s, UID %s)", msg, v.pod.Namespace, v.pod.Name, v.pod.UID)
	}
	m, err := v.plugin.NewMounter(v.spec, v.pod)
	if err != nil {
		return fail(fmt.Errorf("MountVolume.NewMounter initialization failed: %w", err))
	}
	var fsGroup *int64
	if sc := v.pod.Spec.SecurityContext; sc != nil {
		fsGroup = sc.FSGroup
	}
	if err := m.SetUp(volume.MounterArgs{FsGroup: fsGroup}); err != nil {
		return fail(err)
	}
	if remount {
		r.asw.clearRemountRequired(v.pod.UID, v.name)
		klog.V(4).InfoS("MountVolume.SetUp succeeded (remount)", "pod", klog.KObj(v.pod), "volumeName", v.name)
		return nil
	}
	r.asw.markVolumeAsMounted(v, m)
	klog.V(3).InfoS("MountVolume.SetUp succeeded", "pod", klog.KObj(v.pod), "volumeName", v.name, "path", m.GetPath())
	if v.plugin.GetPluginName() == hostPathPluginName {
		r.recorder.Eventf(v.pod, v1.EventTypeWarning, events.HostPathMapped,
			"hostPath volume %q: path %q is mapped to %s under the kubelet's root directory, not the node's own file system",
			v.name, hostPathOf(v.spec), m.GetPath())
	}
	return nil
}

func hostPathOf(s *volume.Spec) string {
	if s.Volume != nil && s.Volume.HostPath != nil {
		return s.Volume.HostPath.Path
	}
	return ""
}

// unmount is upstream's UnmountVolume: the plugin's Unmounter tears the
// volume down, then it is marked unmounted.
func (r *reconciler) unmount(mv mountedVolume) error {
	u, err := mv.plugin.NewUnmounter(mv.VolumeName, mv.PodUID)
	if err == nil {
		err = u.TearDown()
	}
	if err != nil {
		return fmt.Errorf("UnmountVolume.TearDown failed for volume %q (pod UID %s): %w", mv.VolumeName, mv.PodUID, err)
	}
	r.asw.markVolumeAsUnmounted(mv.PodUID, mv.VolumeName)
	klog.V(3).InfoS("UnmountVolume.TearDown succeeded", "podUID", mv.PodUID, "volumeName", mv.VolumeName, "pluginName", mv.PluginName)
	return nil
}
