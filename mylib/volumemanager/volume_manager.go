// Package volumemanager is upstream's pkg/kubelet/volumemanager in small:
// it mounts the volumes of the pods on this node and unmounts them when
// the pods are gone.
//
//   - the desired state of world (cache.go) is which volumes of which pods
//     should be mounted, each with its plugin (mylib/volume) and Spec;
//   - the actual state of world (cache.go) is what is mounted, each volume
//     with its Mounter, and a remount-required flag;
//   - the populator (populator.go) fills the desired state from the pod
//     manager every 100 ms (upstream's
//     desiredStateOfWorldPopulatorLoopSleepPeriod): the volumes the
//     containers of a pod that may run use, until the pod has terminated;
//   - the reconciler (reconciler.go) makes the actual state match every
//     100 ms (reconcilerLoopSleepPeriod): TearDown for what is mounted and
//     no longer desired, SetUp for what is desired and not mounted, SetUp
//     again for what is marked for remount; a failed operation is retried
//     after an exponential back-off (500 ms doubling to 2 min 2 s) and
//     reported as a FailedMount event;
//   - WaitForAttachAndMount (SyncPod, before the containers start) and
//     WaitForUnmount (SyncTerminatedPod) poll the actual state every
//     300 ms for up to 2 min 3 s, upstream's podAttachAndMountTimeout,
//     and look again at once when a volume is mounted or unmounted.
//
// A configMap, secret, downwardAPI or projected volume follows its source
// as upstream's: each SyncPod calls WaitForAttachAndMount, which has the
// populator process the pod again; that marks those volumes (their plugin
// RequiresRemount) and the reconciler sets them up again with the pod as
// it is now.
//
// Where it departs from upstream, and why:
//   - no attach or detach: the node is controller-managed (the
//     attach/detach controller in kube-controller-manager owns attaching,
//     as on any cluster since 1.3), and this mock node has no devices, so
//     the actual state of world is mounts only and "unattached volumes" in
//     WaitForAttachAndMount's error is always empty;
//   - no persistent volume is mountable: a persistentVolumeClaim (or a
//     generic ephemeral volume) is read with its PersistentVolume, as
//     upstream, then fails for want of a plugin;
//   - no reconstruction after a kubelet restart: the volumes are plain
//     directories a remount rewrites, so a restarted kubelet sets every
//     pod's volumes up again;
//   - one map keyed by pod UID and volume name instead of upstream's unique
//     volume names (no volume is shared between pods without attach);
//   - WaitForAttachAndMount and WaitForUnmount wake when the actual state
//     changes, besides upstream's poll every 300 ms: a pod's containers
//     start as soon as its last volume is set up, not up to 300 ms later
//     (a burst of pods starts that much sooner);
//   - for the same reason, a pod that waits for its volumes wakes the
//     populator, and that pass wakes the reconciler, besides their loops
//     every 100 ms: a new pod's volumes are set up at once, not up to
//     200 ms later.
package volumemanager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"mykubelet/mylib/volume"
)

// Upstream's periods and timeouts.
const (
	// ReconcilerLoopSleepPeriod is the reconciler's period.
	ReconcilerLoopSleepPeriod = 100 * time.Millisecond
	// DesiredStateOfWorldPopulatorLoopSleepPeriod is the populator's.
	DesiredStateOfWorldPopulatorLoopSleepPeriod = 100 * time.Millisecond
	// PodAttachAndMountTimeout bounds WaitForAttachAndMount and
	// WaitForUnmount (2 min, plus 3 s to make it recognizable).
	PodAttachAndMountTimeout = 2*time.Minute + 3*time.Second
	// PodAttachAndMountRetryInterval is how often they look.
	PodAttachAndMountRetryInterval = 300 * time.Millisecond
)

// PodManager is what the volume manager reads of the kubelet's pod manager.
type PodManager interface {
	GetPods() []*v1.Pod
	GetPodByUID(types.UID) (*v1.Pod, bool)
}

// PodStateProvider says where a pod is in its life (the pod workers).
type PodStateProvider interface {
	// ShouldPodContainersBeTerminating: the pod is stopping (or will not
	// start): its volumes are not added.
	ShouldPodContainersBeTerminating(types.UID) bool
	// ShouldPodRuntimeBeRemoved: the pod's containers are all stopped:
	// its volumes may go.
	ShouldPodRuntimeBeRemoved(types.UID) bool
}

// Config is what NewVolumeManager needs; every field is required except
// Recorder and Clock.
type Config struct {
	// KubeClient reads PersistentVolumeClaims and PersistentVolumes with
	// the node's credentials.
	KubeClient       kubernetes.Interface
	PodManager       PodManager
	PodStateProvider PodStateProvider
	// PluginMgr is initialised (VolumePluginMgr.InitPlugins).
	PluginMgr *volume.VolumePluginMgr
	// Recorder receives the FailedMount and HostPathMapped events; nil
	// drops them.
	Recorder record.EventRecorder
	// Clock: nil is the real clock.
	Clock clock.WithTicker
}

// VolumeManager mounts the pods' volumes (upstream's VolumeManager).
type VolumeManager struct {
	clock      clock.WithTicker
	dsw        *desiredStateOfWorld
	asw        *actualStateOfWorld
	populator  *populator
	reconciler *reconciler
	// wakePopulator and wakeReconciler (capacity 1) start a pass before
	// the loop's period is over.
	wakePopulator, wakeReconciler chan struct{}
}

// NewVolumeManager checks cfg and returns a VolumeManager; Run starts it.
func NewVolumeManager(cfg Config) (*VolumeManager, error) {
	if cfg.KubeClient == nil || cfg.PodManager == nil || cfg.PodStateProvider == nil || cfg.PluginMgr == nil {
		return nil, errors.New("volumemanager: KubeClient, PodManager, PodStateProvider and PluginMgr are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{} // no Events channel: dropped
	}
	dsw, asw := newDesiredStateOfWorld(cfg.PluginMgr), newActualStateOfWorld()
	return &VolumeManager{clock: cfg.Clock, dsw: dsw, asw: asw,
		populator: &populator{client: cfg.KubeClient, pods: cfg.PodManager, podState: cfg.PodStateProvider,
			dsw: dsw, asw: asw, pluginMgr: cfg.PluginMgr, processed: map[types.UID]bool{}},
		reconciler: &reconciler{dsw: dsw, asw: asw, recorder: cfg.Recorder, clock: cfg.Clock,
			pending: map[opKey]bool{}, backoff: map[opKey]*backoff{}},
		wakePopulator: make(chan struct{}, 1), wakeReconciler: make(chan struct{}, 1),
	}, nil
}

// Run runs the populator and the reconciler until ctx ends, then waits
// for the operations under way. The populator's first passes wait for
// sourcesReady (nil: always ready), as upstream's.
func (vm *VolumeManager) Run(ctx context.Context, sourcesReady func() bool) {
	if sourcesReady == nil {
		sourcesReady = func() bool { return true }
	}
	klog.InfoS("Starting Kubelet Volume Manager")
	done := make(chan struct{})
	go func() {
		defer close(done)
		every(ctx, vm.clock, DesiredStateOfWorldPopulatorLoopSleepPeriod, vm.wakePopulator, func(woken bool) {
			ready := sourcesReady()
			vm.populator.loop(ctx)
			if ready {
				vm.populator.mu.Lock()
				vm.populator.hasAddedPods = true
				vm.populator.mu.Unlock()
			}
			if woken { // a pod waits: set its volumes up now
				wake(vm.wakeReconciler)
			}
		})
	}()
	every(ctx, vm.clock, ReconcilerLoopSleepPeriod, vm.wakeReconciler, func(bool) { vm.reconciler.reconcile() })
	<-done
	vm.reconciler.wait()
	klog.InfoS("Shutting down Kubelet Volume Manager")
}

// every runs f, then again period after each run ends, or sooner when
// woken (f is then told so), until ctx ends.
func every(ctx context.Context, clk clock.Clock, period time.Duration, wakeUp <-chan struct{}, f func(woken bool)) {
	woken := false
	for {
		f(woken)
		t := clk.NewTimer(period)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
			woken = false
		case <-wakeUp:
			t.Stop()
			woken = true
		}
	}
}

// wake starts the pass of the loop ch wakes, if one is not due already.
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// WaitForAttachAndMount returns once every volume the pod's containers
// use is mounted, or with an error: at once when the populator could not
// add a volume (no plugin, a PVC), or after PodAttachAndMountTimeout with
// upstream's "unmounted volumes=[…], unattached volumes=[…], failed to
// process volumes=[…]: context deadline exceeded". It first has the pod
// processed again, which remounts its configMap, secret, downwardAPI and
// projected volumes.
func (vm *VolumeManager) WaitForAttachAndMount(ctx context.Context, pod *v1.Pod) error {
	if pod == nil {
		return nil
	}
	expected := sortedKeys(podVolumeNames(pod))
	if len(expected) == 0 {
		return nil
	}
	klog.V(3).InfoS("Waiting for volumes to attach and mount for pod", "pod", klog.KObj(pod))
	vm.populator.reprocessPod(pod.UID)
	wake(vm.wakePopulator)
	err := vm.poll(ctx, func() (bool, error) {
		if errs := vm.dsw.popPodErrors(pod.UID); len(errs) > 0 {
			return true, errors.New(strings.Join(errs, "; "))
		}
		return len(vm.unmountedVolumes(pod.UID, expected)) == 0, nil
	})
	if err == nil {
		return nil
	}
	unmounted := vm.unmountedVolumes(pod.UID, expected)
	if len(unmounted) == 0 {
		return nil
	}
	desired := vm.dsw.getVolumeNamesForPod(pod.UID)
	notInDSW := []string{}
	for _, name := range expected {
		if !desired[name] {
			notInDSW = append(notInDSW, name)
		}
	}
	return fmt.Errorf("unmounted volumes=%v, unattached volumes=%v, failed to process volumes=%v: %w", unmounted, []string{}, notInDSW, err)
}

// WaitForUnmount returns once none of the pod's volumes is mounted and no
// operation on them is under way (a tear-down marks the volume unmounted
// a moment before it ends), or after PodAttachAndMountTimeout with
// "mounted volumes=[…]: context deadline exceeded".
func (vm *VolumeManager) WaitForUnmount(ctx context.Context, pod *v1.Pod) error {
	if pod == nil {
		return nil
	}
	vm.populator.reprocessPod(pod.UID)
	wake(vm.wakePopulator)
	err := vm.poll(ctx, func() (bool, error) {
		if errs := vm.dsw.popPodErrors(pod.UID); len(errs) > 0 {
			return true, errors.New(strings.Join(errs, "; "))
		}
		return !vm.HasPossiblyMountedVolumesForPod(pod.UID), nil
	})
	if err == nil {
		return nil
	}
	mounted := vm.GetPossiblyMountedVolumesForPod(pod.UID)
	if len(mounted) == 0 {
		return nil
	}
	return fmt.Errorf("mounted volumes=%v: %w", mounted, err)
}

// poll is wait.PollUntilContextTimeout(immediate) on the manager's clock:
// cond now and every PodAttachAndMountRetryInterval, until it is done or
// errs, ctx ends, or PodAttachAndMountTimeout passes
// (context.DeadlineExceeded). Unlike upstream, it also looks again as soon
// as a volume is mounted or unmounted.
func (vm *VolumeManager) poll(ctx context.Context, cond func() (bool, error)) error {
	deadline := vm.clock.Now().Add(PodAttachAndMountTimeout)
	for {
		changed := vm.asw.changes() // before cond: a change while it runs is not missed
		if done, err := cond(); done || err != nil {
			return err
		}
		if !vm.clock.Now().Before(deadline) {
			return context.DeadlineExceeded
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-vm.clock.After(PodAttachAndMountRetryInterval):
		}
	}
}

// unmountedVolumes are the expected volumes not desired or not mounted.
func (vm *VolumeManager) unmountedVolumes(uid types.UID, expected []string) []string {
	desired := vm.dsw.getVolumeNamesForPod(uid)
	mounted := vm.asw.getMountedVolumesForPod(uid)
	out := []string{}
	for _, name := range expected {
		if _, ok := mounted[name]; !desired[name] || !ok {
			out = append(out, name)
		}
	}
	return out
}

// GetMountedVolumesForPod is the pod's volumes that are desired and
// mounted, by their name in the pod: what the containers' mounts are
// made of.
func (vm *VolumeManager) GetMountedVolumesForPod(podUID types.UID) map[string]MountedVolume {
	desired := vm.dsw.getVolumeNamesForPod(podUID)
	out := map[string]MountedVolume{}
	for name, mv := range vm.asw.getMountedVolumesForPod(podUID) {
		if desired[name] {
			out[name] = mv
		}
	}
	return out
}

// GetPossiblyMountedVolumesForPod is the names of the pod's volumes that
// are mounted or being set up or torn down.
func (vm *VolumeManager) GetPossiblyMountedVolumesForPod(podUID types.UID) []string {
	names := sortedKeys(vm.asw.getMountedVolumesForPod(podUID))
	for _, n := range vm.reconciler.pendingFor(podUID) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// HasPossiblyMountedVolumesForPod: GetPossiblyMountedVolumesForPod is not
// empty (upstream's name); the pod's directory must stay.
func (vm *VolumeManager) HasPossiblyMountedVolumesForPod(podUID types.UID) bool {
	return vm.asw.podHasMountedVolumes(podUID) || vm.reconciler.possiblyMounted(podUID)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
