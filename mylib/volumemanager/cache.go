package volumemanager

import (
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"mykubelet/mylib/volume"
)

// maxPodErrors bounds the errors kept per pod, as upstream's
// maxPodErrors: the populator may add one per pass.
const maxPodErrors = 10

// volumeToMount is one volume of one pod that should be mounted
// (upstream's cache.VolumeToMount).
type volumeToMount struct {
	pod    *v1.Pod // the newest copy the populator saw
	name   string  // the volume's name in the pod (upstream's OuterVolumeSpecName)
	spec   *volume.Spec
	plugin volume.VolumePlugin
}

// desiredStateOfWorld is which volumes of which pods should be mounted
// (upstream's cache.DesiredStateOfWorld), keyed by pod UID, then volume
// name. The populator fills it; the reconciler reads it.
type desiredStateOfWorld struct {
	pluginMgr *volume.VolumePluginMgr

	mu        sync.RWMutex
	pods      map[types.UID]map[string]*volumeToMount
	podErrors map[types.UID][]string
}

func newDesiredStateOfWorld(pm *volume.VolumePluginMgr) *desiredStateOfWorld {
	return &desiredStateOfWorld{pluginMgr: pm, pods: map[types.UID]map[string]*volumeToMount{}, podErrors: map[types.UID][]string{}}
}

// addPodToVolume records that pod wants the volume spec, mounted by the
// plugin that supports it; a volume already there takes the newer pod.
// No plugin is upstream's error, word for word.
func (d *desiredStateOfWorld) addPodToVolume(pod *v1.Pod, spec *volume.Spec) error {
	plugin, err := d.pluginMgr.FindPluginBySpec(spec)
	if err != nil || plugin == nil {
		return errNoPlugin(spec.Name(), err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	vols := d.pods[pod.UID]
	if vols == nil {
		vols = map[string]*volumeToMount{}
		d.pods[pod.UID] = vols
	}
	vols[spec.Name()] = &volumeToMount{pod: pod, name: spec.Name(), spec: spec, plugin: plugin}
	return nil
}

func (d *desiredStateOfWorld) deletePodFromVolume(uid types.UID, name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.pods[uid], name)
	if len(d.pods[uid]) == 0 {
		delete(d.pods, uid)
	}
}

func (d *desiredStateOfWorld) podExistsInVolume(uid types.UID, name string) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	_, ok := d.pods[uid][name]
	return ok
}

// getVolumesToMount is every desired volume, copied.
func (d *desiredStateOfWorld) getVolumesToMount() []volumeToMount {
	d.mu.RLock()
	defer d.mu.RUnlock()
	var out []volumeToMount
	for _, vols := range d.pods {
		for _, v := range vols {
			out = append(out, *v)
		}
	}
	return out
}

// getVolumeNamesForPod are the names of the pod's desired volumes.
func (d *desiredStateOfWorld) getVolumeNamesForPod(uid types.UID) map[string]bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	names := map[string]bool{}
	for name := range d.pods[uid] {
		names[name] = true
	}
	return names
}

// addErrorToPod keeps err (once) for WaitForAttachAndMount to report.
func (d *desiredStateOfWorld) addErrorToPod(uid types.UID, err string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	errs := d.podErrors[uid]
	if slices.Contains(errs, err) || len(errs) >= maxPodErrors {
		return
	}
	d.podErrors[uid] = append(errs, err)
}

// popPodErrors returns the pod's errors and forgets them.
func (d *desiredStateOfWorld) popPodErrors(uid types.UID) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	errs := d.podErrors[uid]
	delete(d.podErrors, uid)
	return errs
}

func (d *desiredStateOfWorld) getPodsWithErrors() []types.UID {
	d.mu.RLock()
	defer d.mu.RUnlock()
	var uids []types.UID
	for uid := range d.podErrors {
		uids = append(uids, uid)
	}
	return uids
}

// MountedVolume is one volume set up for one pod (upstream's
// cache.MountedVolume, reduced): what the container mounts are made of.
type MountedVolume struct {
	// PodUID and VolumeName (the volume's name in the pod) say which.
	PodUID     types.UID
	VolumeName string
	// PluginName is the plugin's ("kubernetes.io/configmap", …).
	PluginName string
	// Spec is the volume as the pod declared it.
	Spec *volume.Spec
	// Mounter has the volume's directory (GetPath) and attributes.
	Mounter volume.Mounter
	// ReadOnly is the volume's (a PVC's readOnly); a container's
	// volumeMount may make its mount read-only on its own.
	ReadOnly bool
}

type mountedVolume struct {
	MountedVolume
	plugin          volume.VolumePlugin
	remountRequired bool
}

// actualStateOfWorld is what is mounted (upstream's
// cache.ActualStateOfWorld, without attach: see the package
// documentation). The reconciler writes it after each SetUp and TearDown.
type actualStateOfWorld struct {
	mu   sync.RWMutex
	pods map[types.UID]map[string]*mountedVolume
	// changed is closed (and replaced) when a volume is mounted or
	// unmounted, to wake WaitForAttachAndMount and WaitForUnmount.
	changed chan struct{}
}

func newActualStateOfWorld() *actualStateOfWorld {
	return &actualStateOfWorld{pods: map[types.UID]map[string]*mountedVolume{}, changed: make(chan struct{})}
}

// changes is closed at the next mount or unmount, or when an operation
// ends.
func (a *actualStateOfWorld) changes() <-chan struct{} {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.changed
}

// wake wakes the waiters without a change to the state: an operation
// ended.
func (a *actualStateOfWorld) wake() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.notify()
}

// notify wakes the waiters. Caller holds mu.
func (a *actualStateOfWorld) notify() {
	close(a.changed)
	a.changed = make(chan struct{})
}

func (a *actualStateOfWorld) markVolumeAsMounted(v volumeToMount, m volume.Mounter) {
	a.mu.Lock()
	defer a.mu.Unlock()
	defer a.notify()
	vols := a.pods[v.pod.UID]
	if vols == nil {
		vols = map[string]*mountedVolume{}
		a.pods[v.pod.UID] = vols
	}
	vols[v.name] = &mountedVolume{plugin: v.plugin, MountedVolume: MountedVolume{PodUID: v.pod.UID, VolumeName: v.name,
		PluginName: v.plugin.GetPluginName(), Spec: v.spec, Mounter: m, ReadOnly: v.spec.ReadOnly}}
}

func (a *actualStateOfWorld) markVolumeAsUnmounted(uid types.UID, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	defer a.notify()
	delete(a.pods[uid], name)
	if len(a.pods[uid]) == 0 {
		delete(a.pods, uid)
	}
}

// markRemountRequired flags the pod's mounted volumes whose plugin wants
// SetUp again (configMap, secret, downwardAPI, projected).
func (a *actualStateOfWorld) markRemountRequired(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, mv := range a.pods[uid] {
		if mv.plugin.RequiresRemount(mv.Spec) {
			mv.remountRequired = true
		}
	}
}

func (a *actualStateOfWorld) clearRemountRequired(uid types.UID, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if mv, ok := a.pods[uid][name]; ok {
		mv.remountRequired = false
	}
}

// podExistsInVolume: whether the pod's volume is mounted, and whether it
// is to be set up again.
func (a *actualStateOfWorld) podExistsInVolume(uid types.UID, name string) (mounted, remountRequired bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	mv, ok := a.pods[uid][name]
	if !ok {
		return false, false
	}
	return true, mv.remountRequired
}

// getMountedVolumes is every mounted volume, copied.
func (a *actualStateOfWorld) getMountedVolumes() []mountedVolume {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var out []mountedVolume
	for _, vols := range a.pods {
		for _, mv := range vols {
			out = append(out, *mv)
		}
	}
	return out
}

// getMountedVolumesForPod is the pod's mounted volumes by name.
func (a *actualStateOfWorld) getMountedVolumesForPod(uid types.UID) map[string]MountedVolume {
	a.mu.RLock()
	defer a.mu.RUnlock()
	out := make(map[string]MountedVolume, len(a.pods[uid]))
	for name, mv := range a.pods[uid] {
		out[name] = mv.MountedVolume
	}
	return out
}

func (a *actualStateOfWorld) podHasMountedVolumes(uid types.UID) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return len(a.pods[uid]) > 0
}
