package volumemanager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"mykubelet/mylib/volume"
)

// pvcProtectionFinalizer keeps a PVC in use from going (upstream's
// util.PVCProtectionFinalizer).
const pvcProtectionFinalizer = "kubernetes.io/pvc-protection"

// populator fills the desired state of world from the pod manager
// (upstream's populator.desiredStateOfWorldPopulator): every
// desiredStateOfWorldPopulatorLoopSleepPeriod it adds the volumes of pods
// that may run, and removes those of pods whose containers are all gone.
type populator struct {
	client    kubernetes.Interface
	pods      PodManager
	podState  PodStateProvider
	dsw       *desiredStateOfWorld
	asw       *actualStateOfWorld
	pluginMgr *volume.VolumePluginMgr

	mu           sync.Mutex
	processed    map[types.UID]bool // false: seen, to be processed again
	hasAddedPods bool               // the first pass after the sources were ready is done
}

// reprocessPod has the next pass process the pod again, which marks its
// remountable volumes (upstream's ReprocessPod, called on every SyncPod).
func (p *populator) reprocessPod(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.processed[uid] = false
}

// loop is one pass (upstream's populatorLoop).
func (p *populator) loop(ctx context.Context) {
	p.findAndAddNewPods(ctx)
	p.findAndRemoveDeletedPods()
}

func (p *populator) findAndAddNewPods(ctx context.Context) {
	p.mu.Lock()
	added := p.hasAddedPods
	p.mu.Unlock()
	for _, pod := range p.pods.GetPods() {
		if added && p.podState.ShouldPodContainersBeTerminating(pod.UID) {
			continue // a pod that will not start containers gets no new volumes
		}
		if !added && p.podState.ShouldPodRuntimeBeRemoved(pod.UID) {
			continue
		}
		p.processPodVolumes(ctx, pod)
	}
}

func (p *populator) findAndRemoveDeletedPods() {
	inDSW := map[types.UID]bool{}
	for _, v := range p.dsw.getVolumesToMount() {
		uid := v.pod.UID
		inDSW[uid] = true
		// Only once the pod's containers are all gone (it terminated, or
		// it is unknown once the sources are synced) do its volumes go.
		if !p.podState.ShouldPodRuntimeBeRemoved(uid) {
			continue
		}
		klog.V(4).InfoS("Removing volume from desired state", "pod", klog.KObj(v.pod), "podUID", uid, "volumeName", v.name)
		p.dsw.deletePodFromVolume(uid, v.name)
		p.deleteProcessedPod(uid)
	}
	p.mu.Lock()
	var orphans []types.UID
	for uid := range p.processed {
		if !inDSW[uid] {
			orphans = append(orphans, uid)
		}
	}
	p.mu.Unlock()
	for _, uid := range orphans {
		if _, ok := p.pods.GetPodByUID(uid); !ok && p.podState.ShouldPodRuntimeBeRemoved(uid) {
			p.deleteProcessedPod(uid)
		}
	}
	for _, uid := range p.dsw.getPodsWithErrors() {
		if _, ok := p.pods.GetPodByUID(uid); !ok {
			p.dsw.popPodErrors(uid)
		}
	}
}

func (p *populator) deleteProcessedPod(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.processed, uid)
}

// processPodVolumes adds the volumes the pod's containers use to the
// desired state (upstream's processPodVolumes). A volume that cannot be
// added is an error for WaitForAttachAndMount; a pod whose volumes were
// all added has its remountable volumes marked for SetUp again.
func (p *populator) processPodVolumes(ctx context.Context, pod *v1.Pod) {
	p.mu.Lock()
	done, seen := p.processed[pod.UID]
	p.mu.Unlock()
	if done {
		return
	}
	used := podVolumeNames(pod)
	all := true
	for i := range pod.Spec.Volumes {
		pv := &pod.Spec.Volumes[i]
		if !used[pv.Name] {
			continue // no container mounts it
		}
		spec, err := p.createVolumeSpec(ctx, pv, pod)
		if err == nil {
			err = p.dsw.addPodToVolume(pod, spec)
		}
		if err != nil {
			klog.ErrorS(err, "Error processing volume", "pod", klog.KObj(pod), "volumeName", pv.Name)
			p.dsw.addErrorToPod(pod.UID, err.Error())
			all = false
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case all:
		p.processed[pod.UID] = true
		p.asw.markRemountRequired(pod.UID)
		p.dsw.popPodErrors(pod.UID)
	case seen:
		// Failed after a ReprocessPod: try again at the next one (the
		// next SyncPod) rather than every pass. A pod never reprocessed
		// is tried every pass.
		p.processed[pod.UID] = true
	}
}

// createVolumeSpec is the volume's Spec. A persistentVolumeClaim is read,
// then its PersistentVolume, with the node's credentials, as upstream;
// this node has no plugin for any persistent volume, so that ends in an
// error too.
func (p *populator) createVolumeSpec(ctx context.Context, pv *v1.Volume, pod *v1.Pod) (*volume.Spec, error) {
	claim := pv.PersistentVolumeClaim
	if claim == nil && pv.Ephemeral != nil { // a generic ephemeral volume is a PVC named after the pod
		claim = &v1.PersistentVolumeClaimVolumeSource{ClaimName: pod.Name + "-" + pv.Name}
	}
	if claim == nil {
		return &volume.Spec{Volume: pv.DeepCopy()}, nil
	}
	pvc, err := p.getPVCExtractPV(ctx, pod.Namespace, claim.ClaimName)
	if err == nil {
		var pvObj *v1.PersistentVolume
		if pvObj, err = p.getPV(ctx, pvc.Spec.VolumeName, pvc.UID); err == nil {
			return nil, errNoPlugin(pvObj.Name, fmt.Errorf("%w: persistent volume %q is of a kind this node cannot mount (%s)",
				volume.ErrNoPlugin, pvObj.Name, persistentVolumeKind(pvObj)))
		}
	}
	return nil, fmt.Errorf("error processing PVC %s/%s: %v", pod.Namespace, claim.ClaimName, err)
}

func (p *populator) getPVCExtractPV(ctx context.Context, namespace, name string) (*v1.PersistentVolumeClaim, error) {
	pvc, err := p.client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil || pvc == nil {
		return nil, fmt.Errorf("failed to fetch PVC from API server: %v", err)
	}
	switch {
	case pvc.DeletionTimestamp != nil && !slices.Contains(pvc.Finalizers, pvcProtectionFinalizer):
		return nil, errors.New("PVC is being deleted")
	case pvc.Status.Phase != v1.ClaimBound:
		return nil, errors.New("PVC is not bound")
	case pvc.Spec.VolumeName == "":
		return nil, errors.New("PVC has empty pvc.Spec.VolumeName")
	}
	return pvc, nil
}

func (p *populator) getPV(ctx context.Context, name string, claimUID types.UID) (*v1.PersistentVolume, error) {
	pv, err := p.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	if err != nil || pv == nil {
		return nil, fmt.Errorf("failed to fetch PV %s from API server: %v", name, err)
	}
	if pv.Spec.ClaimRef == nil {
		return nil, fmt.Errorf("found PV object %s but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim", name)
	}
	if pv.Spec.ClaimRef.UID != claimUID {
		return nil, fmt.Errorf("found PV object %s but its pv.Spec.ClaimRef.UID %s does not point to claim.UID %s", name, pv.Spec.ClaimRef.UID, claimUID)
	}
	return pv, nil
}

// errNoPlugin is upstream's error when no plugin supports a volume.
func errNoPlugin(name string, err error) error {
	return fmt.Errorf("failed to get Plugin from volumeSpec for volume %q err=%v", name, err)
}

// persistentVolumeKind names a PersistentVolume's source as its spec spells it.
func persistentVolumeKind(pv *v1.PersistentVolume) string {
	s := pv.Spec.PersistentVolumeSource
	switch {
	case s.CSI != nil:
		return "csi"
	case s.HostPath != nil:
		return "hostPath"
	case s.Local != nil:
		return "local"
	case s.NFS != nil:
		return "nfs"
	case s.ISCSI != nil:
		return "iscsi"
	case s.FC != nil:
		return "fc"
	}
	return "unknown"
}

// podVolumeNames are the volumes some container of the pod uses (mounts
// or devices), init and ephemeral containers included (upstream's
// util.GetPodVolumeNames).
func podVolumeNames(pod *v1.Pod) map[string]bool {
	names := map[string]bool{}
	add := func(c *v1.Container) {
		for _, m := range c.VolumeMounts {
			names[m.Name] = true
		}
		for _, d := range c.VolumeDevices {
			names[d.Name] = true
		}
	}
	for i := range pod.Spec.InitContainers {
		add(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.EphemeralContainers {
		c := v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		add(&c)
	}
	return names
}
