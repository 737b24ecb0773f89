// Package kubelet is the loop that ties the pieces together: pod config
// (chapter 07), the PLEG and pod cache (chapter 05) and the pod workers
// (chapter 08). It is a much smaller Kubelet than upstream's; its SyncPod
// says what it would do instead of starting containers.
//
// Wiring (chapter 08):
//
//	kl := kubelet.New(client, nodeName, podManager, cache, clk, os.Stdout)
//	go kl.Run(ctx, podConfig.Updates(), pleg.Watch())
//
// Upstream: pkg/kubelet/kubelet.go (syncLoop, syncLoopIteration,
// HandlePodAdditions/Updates/Removes, SyncPod, SyncTerminatingPod,
// SyncTerminatedPod, HandlePodCleanups).
package kubelet

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/pleg"
	kubepod "mykubelet/mylib/pod"
	"mykubelet/mylib/podworkers"
)

// Upstream's intervals for the sync loop.
const (
	// SyncTickerPeriod: how often the work queue is checked for due resyncs.
	SyncTickerPeriod = time.Second
	// HousekeepingPeriod: how often workers and mirror pods are cleaned up.
	HousekeepingPeriod = 2 * time.Second
)

// Kubelet owns the pod manager, the pod workers and the sync loop.
type Kubelet struct {
	client     kubernetes.Interface
	podManager kubepod.Manager
	mirror     kubepod.MirrorClient
	podWorkers podworkers.PodWorkers
	workQueue  podworkers.WorkQueue
	clock      clock.WithTicker
	// SourcesReady reports whether every pod source has sent its first list
	// (PodConfig.SeenAllSources); housekeeping waits for it.
	SourcesReady func() bool

	outMu sync.Mutex
	out   io.Writer
	known map[types.UID]string // workers alive at the last housekeeping
}

// New returns a Kubelet for nodeName. What SyncPod and friends would do is
// written to out, one line each.
func New(client kubernetes.Interface, nodeName string, pm kubepod.Manager, cache kubecontainer.Cache, clk clock.WithTicker, out io.Writer) *Kubelet {
	kl := &Kubelet{
		client:       client,
		podManager:   pm,
		mirror:       kubepod.NewBasicMirrorClient(client, nodeName, nil),
		workQueue:    podworkers.NewBasicWorkQueue(clk),
		clock:        clk,
		SourcesReady: func() bool { return true },
		out:          out,
		known:        map[types.UID]string{},
	}
	kl.podWorkers = podworkers.New(kl, kl.workQueue, cache, clk)
	return kl
}

// PodWorkers returns the kubelet's pod workers.
func (kl *Kubelet) PodWorkers() podworkers.PodWorkers { return kl.podWorkers }

func (kl *Kubelet) printf(format string, args ...any) {
	kl.outMu.Lock()
	defer kl.outMu.Unlock()
	fmt.Fprintf(kl.out, format+"\n", args...)
}

// Run is the sync loop: it runs syncLoopIteration until ctx ends.
func (kl *Kubelet) Run(ctx context.Context, configCh <-chan kubetypes.PodUpdate, plegCh <-chan *pleg.PodLifecycleEvent) {
	syncTicker := kl.clock.NewTicker(SyncTickerPeriod)
	defer syncTicker.Stop()
	housekeeping := kl.clock.NewTicker(HousekeepingPeriod)
	defer housekeeping.Stop()
	for kl.syncLoopIteration(ctx, configCh, plegCh, syncTicker.C(), housekeeping.C()) {
	}
}

// syncLoopIteration waits for one thing to happen and hands the pods it
// concerns to their workers.
func (kl *Kubelet) syncLoopIteration(ctx context.Context, configCh <-chan kubetypes.PodUpdate, plegCh <-chan *pleg.PodLifecycleEvent,
	syncCh, housekeepingCh <-chan time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case u := <-configCh:
		kl.HandlePodUpdate(ctx, u)
	case e := <-plegCh:
		if pod, ok := kl.podManager.GetPodByUID(e.ID); ok {
			klog.V(2).InfoS("SyncLoop (PLEG): event for pod", "pod", klog.KObj(pod), "event", e.Type)
			kl.dispatchWork(ctx, pod, kubetypes.SyncPodSync)
		}
	case <-syncCh:
		for _, uid := range kl.workQueue.GetWork() {
			if pod, ok := kl.podManager.GetPodByUID(uid); ok {
				kl.dispatchWork(ctx, pod, kubetypes.SyncPodSync)
			}
		}
	case <-housekeepingCh:
		if kl.SourcesReady() {
			kl.HandlePodCleanups(ctx)
		}
	}
	return true
}

// HandlePodUpdate is the config branch: update the pod manager, then give
// each pod to its worker (a mirror pod's change is its static pod's).
func (kl *Kubelet) HandlePodUpdate(ctx context.Context, u kubetypes.PodUpdate) {
	names := make([]string, 0, len(u.Pods))
	for _, p := range u.Pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	kl.printf("SyncLoop %s source=%s pods=[%s]", u.Op, u.Source, strings.Join(names, " "))
	for _, pod := range u.Pods {
		switch u.Op {
		case kubetypes.ADD:
			kl.podManager.AddPod(pod)
		case kubetypes.REMOVE:
			kl.podManager.RemovePod(pod)
		default:
			kl.podManager.UpdatePod(pod)
		}
		if kubetypes.IsMirrorPod(pod) {
			if static, ok := kl.podManager.GetPodByMirrorPod(pod); ok {
				kl.dispatchWork(ctx, static, kubetypes.SyncPodUpdate)
			}
			continue
		}
		switch u.Op {
		case kubetypes.ADD:
			kl.dispatchWork(ctx, pod, kubetypes.SyncPodCreate)
		case kubetypes.REMOVE:
			kl.dispatchWork(ctx, pod, kubetypes.SyncPodKill)
		case kubetypes.RECONCILE:
			// only the status changed: the kubelet owns status, nothing to run
		default:
			kl.dispatchWork(ctx, pod, kubetypes.SyncPodUpdate)
		}
	}
}

func (kl *Kubelet) dispatchWork(ctx context.Context, pod *v1.Pod, t kubetypes.SyncPodType) {
	mirror, _ := kl.podManager.GetMirrorPodByPod(pod)
	kl.podWorkers.UpdatePod(ctx, podworkers.UpdatePodOptions{UpdateType: t, StartTime: kl.clock.Now(), Pod: pod, MirrorPod: mirror})
}

// HandlePodCleanups is housekeeping: workers of pods that are gone are
// terminated and dropped, and mirror pods without a static pod deleted.
func (kl *Kubelet) HandlePodCleanups(ctx context.Context) {
	pods, _, orphans := kl.podManager.GetPodsAndMirrorPods()
	workers := kl.podWorkers.SyncKnownPods(pods)
	for uid, name := range kl.known {
		if _, ok := workers[uid]; !ok {
			kl.printf("pod worker %s (uid %s) cleaned up", name, uid)
			delete(kl.known, uid)
		}
	}
	for _, p := range pods {
		if _, ok := workers[p.UID]; ok {
			kl.known[p.UID] = p.Namespace + "/" + p.Name
		}
	}
	for _, name := range orphans {
		if deleted, err := kl.mirror.DeleteMirrorPod(ctx, name, nil); err != nil {
			klog.ErrorS(err, "Deleting an orphaned mirror pod failed; will retry", "podFullName", name)
		} else if deleted {
			n, ns, _ := kubetypes.ParsePodFullName(name)
			kl.printf("mirror pod %s/%s deleted (its manifest is gone)", ns, n)
		}
	}
}

// SyncPod would make the pod run: here it says what it would do, and, for a
// static pod, really makes its mirror pod right, as upstream's SyncPod does.
func (kl *Kubelet) SyncPod(ctx context.Context, updateType kubetypes.SyncPodType, pod, mirrorPod *v1.Pod, podStatus *kubecontainer.PodStatus) (bool, error) {
	running := 0
	if podStatus != nil {
		running = len(podStatus.GetRunningContainerStatuses())
	}
	kl.printf("syncPod %s %s/%s: would start containers %v (the runtime reports %d running)",
		updateType, pod.Namespace, pod.Name, containerNames(pod), running)
	if kubetypes.IsStaticPod(pod) {
		action, err := kubepod.SyncMirrorPod(ctx, kl.mirror, pod, mirrorPod)
		if err != nil {
			return false, err
		}
		if action != kubepod.MirrorUnchanged {
			kl.printf("mirror pod %s/%s %s", pod.Namespace, pod.Name, action)
		}
	}
	return false, nil
}

// SyncTerminatingPod would stop the containers within gracePeriod seconds.
func (kl *Kubelet) SyncTerminatingPod(_ context.Context, pod *v1.Pod, _ *kubecontainer.PodStatus, gracePeriod *int64) error {
	kl.printf("syncTerminatingPod %s/%s: would stop containers %v within %ds", pod.Namespace, pod.Name, containerNames(pod), *gracePeriod)
	return nil
}

// SyncTerminatedPod would release volumes and the pod directory. Then, for a
// pod the API server is deleting, it finishes the deletion (grace period 0,
// only this UID), as upstream's status manager does once nothing runs.
func (kl *Kubelet) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, _ *kubecontainer.PodStatus) error {
	kl.printf("syncTerminatedPod %s/%s: would clean up volumes and the pod directory", pod.Namespace, pod.Name)
	if kubetypes.IsStaticPod(pod) || pod.DeletionTimestamp == nil {
		return nil
	}
	kl.printf("pod %s/%s: finishing its deletion in the API server (grace period 0)", pod.Namespace, pod.Name)
	var grace int64
	err := kl.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) { // gone, or replaced: done
		return fmt.Errorf("finish deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func containerNames(pod *v1.Pod) []string {
	names := make([]string, 0, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	return names
}
