package pod

import (
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"mykubelet/mylib/kubetypes"
)

// Manager stores the pods the kubelet should run (from every source) and
// the mirror pods of its static pods, and translates between the two. It is
// safe for concurrent use. Upstream: pkg/kubelet/pod/pod_manager.go.
type Manager interface {
	// GetPodByFullName, GetPodByName and GetPodByUID find a pod (never a
	// mirror pod).
	GetPodByFullName(podFullName string) (*v1.Pod, bool)
	GetPodByName(namespace, name string) (*v1.Pod, bool)
	GetPodByUID(uid types.UID) (*v1.Pod, bool)
	// GetMirrorPodByPod returns the mirror pod of a static pod.
	GetMirrorPodByPod(pod *v1.Pod) (*v1.Pod, bool)
	// GetPodByMirrorPod returns the static pod of a mirror pod.
	GetPodByMirrorPod(mirrorPod *v1.Pod) (*v1.Pod, bool)
	// GetPodAndMirrorPod returns the pair for either member of it, and
	// whether the argument was the mirror pod.
	GetPodAndMirrorPod(aPod *v1.Pod) (pod, mirrorPod *v1.Pod, wasMirror bool)
	// GetPods returns the pods (not mirror pods), sorted by namespace/name.
	GetPods() []*v1.Pod
	// GetPodsAndMirrorPods returns the pods, the mirror pods (both sorted)
	// and the full names of mirror pods whose static pod is gone.
	GetPodsAndMirrorPods() (pods, mirrorPods []*v1.Pod, orphanedMirrorPodFullNames []string)
	// TranslatePodUID maps a mirror pod's UID to its static pod's UID;
	// other UIDs are returned as they are.
	TranslatePodUID(uid types.UID) types.UID

	// SetPods replaces everything; AddPod and UpdatePod add or replace one
	// pod (or mirror pod); RemovePod forgets one.
	SetPods(pods []*v1.Pod)
	AddPod(pod *v1.Pod)
	UpdatePod(pod *v1.Pod)
	RemovePod(pod *v1.Pod)
}

type basicManager struct {
	lock sync.RWMutex

	podByUID            map[types.UID]*v1.Pod
	podByFullName       map[string]*v1.Pod
	mirrorPodByUID      map[types.UID]*v1.Pod
	mirrorPodByFullName map[string]*v1.Pod
	// translationByUID maps a mirror pod's UID to its static pod's UID.
	translationByUID map[types.UID]types.UID
}

// NewBasicPodManager returns an empty Manager.
func NewBasicPodManager() Manager {
	pm := &basicManager{}
	pm.SetPods(nil)
	return pm
}

func (pm *basicManager) SetPods(pods []*v1.Pod) {
	pm.lock.Lock()
	defer pm.lock.Unlock()
	pm.podByUID = map[types.UID]*v1.Pod{}
	pm.podByFullName = map[string]*v1.Pod{}
	pm.mirrorPodByUID = map[types.UID]*v1.Pod{}
	pm.mirrorPodByFullName = map[string]*v1.Pod{}
	pm.translationByUID = map[types.UID]types.UID{}
	for _, p := range pods {
		pm.updatePodLocked(p)
	}
}

func (pm *basicManager) AddPod(pod *v1.Pod) { pm.UpdatePod(pod) }

func (pm *basicManager) UpdatePod(pod *v1.Pod) {
	pm.lock.Lock()
	defer pm.lock.Unlock()
	pm.updatePodLocked(pod)
}

// updatePodLocked indexes pod. A static pod and its mirror pod share a full
// name, which is how they find each other whichever arrives first.
func (pm *basicManager) updatePodLocked(pod *v1.Pod) {
	fullName := kubetypes.GetPodFullName(pod)
	if kubetypes.IsMirrorPod(pod) {
		pm.mirrorPodByUID[pod.UID] = pod
		pm.mirrorPodByFullName[fullName] = pod
		if p, ok := pm.podByFullName[fullName]; ok {
			pm.translationByUID[pod.UID] = p.UID
		}
		return
	}
	pm.podByUID[pod.UID] = pod
	pm.podByFullName[fullName] = pod
	if m, ok := pm.mirrorPodByFullName[fullName]; ok {
		pm.translationByUID[m.UID] = pod.UID
	}
}

func (pm *basicManager) RemovePod(pod *v1.Pod) {
	pm.lock.Lock()
	defer pm.lock.Unlock()
	fullName := kubetypes.GetPodFullName(pod)
	if kubetypes.IsMirrorPod(pod) {
		delete(pm.mirrorPodByUID, pod.UID)
		if m, ok := pm.mirrorPodByFullName[fullName]; ok && m.UID == pod.UID {
			delete(pm.mirrorPodByFullName, fullName)
		}
		delete(pm.translationByUID, pod.UID)
		return
	}
	delete(pm.podByUID, pod.UID)
	if p, ok := pm.podByFullName[fullName]; ok && p.UID == pod.UID {
		delete(pm.podByFullName, fullName)
	}
	for mirrorUID, uid := range pm.translationByUID {
		if uid == pod.UID {
			delete(pm.translationByUID, mirrorUID)
		}
	}
}

func (pm *basicManager) GetPods() []*v1.Pod {
	pm.lock.RLock()
	defer pm.lock.RUnlock()
	return sortedPods(pm.podByUID)
}

func (pm *basicManager) GetPodsAndMirrorPods() (pods, mirrorPods []*v1.Pod, orphaned []string) {
	pm.lock.RLock()
	defer pm.lock.RUnlock()
	for fullName := range pm.mirrorPodByFullName {
		if _, ok := pm.podByFullName[fullName]; !ok {
			orphaned = append(orphaned, fullName)
		}
	}
	sort.Strings(orphaned)
	return sortedPods(pm.podByUID), sortedPods(pm.mirrorPodByUID), orphaned
}

func (pm *basicManager) GetPodByUID(uid types.UID) (*v1.Pod, bool) {
	pm.lock.RLock()
	defer pm.lock.RUnlock()
	p, ok := pm.podByUID[uid]
	return p, ok
}

func (pm *basicManager) GetPodByName(namespace, name string) (*v1.Pod, bool) {
	return pm.GetPodByFullName(kubetypes.BuildPodFullName(name, namespace))
}

func (pm *basicManager) GetPodByFullName(podFullName string) (*v1.Pod, bool) {
	pm.lock.RLock()
	defer pm.lock.RUnlock()
	p, ok := pm.podByFullName[podFullName]
	return p, ok
}

func (pm *basicManager) GetMirrorPodByPod(pod *v1.Pod) (*v1.Pod, bool) {
	pm.lock.RLock()
	defer pm.lock.RUnlock()
	m, ok := pm.mirrorPodByFullName[kubetypes.GetPodFullName(pod)]
	return m, ok
}

func (pm *basicManager) GetPodByMirrorPod(mirrorPod *v1.Pod) (*v1.Pod, bool) {
	pm.lock.RLock()
	defer pm.lock.RUnlock()
	p, ok := pm.podByFullName[kubetypes.GetPodFullName(mirrorPod)]
	return p, ok
}

func (pm *basicManager) GetPodAndMirrorPod(aPod *v1.Pod) (pod, mirrorPod *v1.Pod, wasMirror bool) {
	pm.lock.RLock()
	defer pm.lock.RUnlock()
	fullName := kubetypes.GetPodFullName(aPod)
	if kubetypes.IsMirrorPod(aPod) {
		return pm.podByFullName[fullName], aPod, true
	}
	return aPod, pm.mirrorPodByFullName[fullName], false
}

func (pm *basicManager) TranslatePodUID(uid types.UID) types.UID {
	pm.lock.RLock()
	defer pm.lock.RUnlock()
	if t, ok := pm.translationByUID[uid]; ok {
		return t
	}
	return uid
}

func sortedPods(m map[types.UID]*v1.Pod) []*v1.Pod {
	out := make([]*v1.Pod, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}
