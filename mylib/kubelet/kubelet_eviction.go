// Node pressure (PodsConfig.Eviction): the eviction manager watches the
// node's memory, filesystems and process IDs in the stats summary, sets the
// node's MemoryPressure, DiskPressure and PIDPressure conditions, refuses
// new pods under pressure (its admit handler, first of the admission
// handlers as upstream) and evicts one pod at a time through killPodNow;
// the image GC manager deletes unused images every ImageGCPeriod and when
// the eviction manager reclaims disk. Upstream: NewMainKubelet's eviction
// wiring, StartGarbageCollection (kubelet.go) and killPodNow
// (pod_workers.go).
//
// Where it departs from upstream, and why (one line each):
//   - the image GC period is a knob (EvictionConfig.ImageGCPeriod), so a
//     learner sees a collection within a minute; upstream's is a constant;
//   - killPodNow waits on the Kubelet's clock, so tests drive its timeout.

package kubelet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"mykubelet/mylib/events"
	"mykubelet/mylib/eviction"
	"mykubelet/mylib/images"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/kubetypes"
	kubelifecycle "mykubelet/mylib/lifecycle"
	"mykubelet/mylib/podworkers"
)

// killPodNowMinTimeout is the least killPodNow waits for a pod to stop
// (upstream's minTimeout, 10 s, time for the runtime to answer a SIGKILL).
const killPodNowMinTimeout = 10 * time.Second

// The constructors, variables so that this package's tests can put fakes
// in their place.
var (
	newEvictionManager   = eviction.NewManager
	newImageGCManager    = images.NewImageGCManager
	parseThresholdConfig = eviction.ParseThresholdConfig
)

// nodePressure is the Kubelet's part for PodsConfig.Eviction.
type nodePressure struct {
	manager            eviction.Manager
	imageGC            images.ImageGCManager
	monitoringInterval time.Duration
	imageGCPeriod      time.Duration
	nodeRef            *v1.ObjectReference

	mu  sync.Mutex
	ctx context.Context // RunPods', for the kills; nil before it runs
}

var errEvictionNeeds = errors.New("kubelet: Config.Pods.Eviction needs RunContainers and Admit (evictions go through the pod workers, and a node under pressure refuses pods)")

// newNodePressure builds the image GC manager and the eviction manager;
// called by newPodHalf once the status manager, the admission, the pod
// workers and the container collector exist.
func (kl *Kubelet) newNodePressure(cfg PodsConfig, m *kuberuntime.Manager) error {
	ec := cfg.Eviction
	if ec.Stats == nil {
		return errors.New("kubelet: Config.Pods.Eviction.Stats is required (the stats provider)")
	}
	if kl.admission == nil || m == nil {
		return errEvictionNeeds
	}
	np := &nodePressure{monitoringInterval: ec.MonitoringInterval, imageGCPeriod: ec.ImageGCPeriod,
		nodeRef: &v1.ObjectReference{Kind: "Node", Name: kl.nodeName, UID: types.UID(kl.nodeName)}}
	if np.monitoringInterval == 0 {
		np.monitoringInterval = eviction.MonitoringInterval
	}
	if np.imageGCPeriod == 0 {
		np.imageGCPeriod = images.ImageGCPeriod
	}
	if np.monitoringInterval < 0 || np.imageGCPeriod < 0 {
		return fmt.Errorf("kubelet: eviction monitoring interval (%v) and image GC period (%v) must be positive", np.monitoringInterval, np.imageGCPeriod)
	}
	imageGC, err := newImageGCManager(cfg.RemoteImageService, kl.containerRuntime, ec.Stats, kl.recorder, np.nodeRef, ec.ImageGCPolicy, kl.clock)
	if err != nil {
		return fmt.Errorf("kubelet: the image GC manager: %w", err)
	}
	np.imageGC = imageGC
	containerGC := kl.lifecycle.containerGC
	if containerGC == nil { // upstream always has one; here only the eviction manager's reclaim uses it
		psp, ok := kl.podWorkers.(kuberuntime.PodStateProvider)
		if !ok {
			return errors.New("kubelet: Config.Pods.Eviction needs pod workers that say which pods may be removed")
		}
		if containerGC, err = kuberuntime.NewContainerGC(m, psp, kuberuntime.DefaultGCPolicy()); err != nil {
			return err
		}
	}
	containerGC.AllSourcesReady = kl.sourcesReady
	manager, admitHandler, err := newEvictionManager(ec.Stats, ec.Config, kl.killPodNow, imageGC, containerGC, kl.recorder, np.nodeRef, kl.clock)
	if err != nil {
		return fmt.Errorf("kubelet: the eviction manager: %w", err)
	}
	np.manager = manager
	// Upstream adds the eviction manager's handler first: a pod refused for
	// pressure says so, whatever else it lacks.
	kl.admission.handlers = append(kubelifecycle.PodAdmitHandlers{admitHandler}, kl.admission.handlers...)
	if err := m.SetImagePullConfig(ec.ImagePulls); err != nil {
		return fmt.Errorf("kubelet: image pulls: %w", err)
	}
	kl.nodePressure = np
	return nil
}

// runNodePressure starts the managers (RunPods): the image GC manager's
// detection, the collection every ImageGCPeriod, and the eviction manager
// every monitoring interval.
func (kl *Kubelet) runNodePressure(ctx context.Context, wg *sync.WaitGroup) {
	np := kl.nodePressure
	if np == nil {
		return
	}
	np.mu.Lock()
	np.ctx = ctx
	np.mu.Unlock()
	wg.Go(func() { np.imageGC.Run(ctx) })
	wg.Go(func() { kl.runImageGC(ctx) })
	wg.Go(func() { np.manager.Run(ctx, kl.activePods, kl.podIsFinished, np.monitoringInterval) })
}

// runImageGC is the image half of upstream's StartGarbageCollection: a
// collection at once and then every ImageGCPeriod; a failure is logged,
// and two in a row also make a Warning event ImageGCFailed on the node.
func (kl *Kubelet) runImageGC(ctx context.Context) {
	np := kl.nodePressure
	prevImageGCFailed := false
	beganGC := kl.clock.Now()
	for {
		if err := np.imageGC.GarbageCollect(ctx, beganGC); err != nil {
			if prevImageGCFailed {
				klog.ErrorS(err, "Image garbage collection failed multiple times in a row")
				kl.recorder.Eventf(np.nodeRef, v1.EventTypeWarning, images.ImageGCFailed, "%s", err.Error())
			} else {
				klog.ErrorS(err, "Image garbage collection failed once. Stats initialization may not have completed yet")
			}
			prevImageGCFailed = true
		} else {
			var level klog.Level = 4
			if prevImageGCFailed {
				level = 1
				prevImageGCFailed = false
			}
			klog.V(level).InfoS("Image garbage collection succeeded")
		}
		select {
		case <-ctx.Done():
			return
		case <-kl.clock.After(np.imageGCPeriod):
		}
	}
}

// killPodNow is the eviction manager's KillPodFunc (upstream's killPodNow):
// the pod's worker terminates it within gracePeriodOverride (else the
// pod's own grace period), applying statusFn to its status, and this waits
// for the termination: 1.5 times the grace period, at least 10 s; past
// that, a Warning event ExceedMaxGracePeriod and an error.
func (kl *Kubelet) killPodNow(pod *v1.Pod, isEvicted bool, gracePeriodOverride *int64, statusFn func(*v1.PodStatus)) error {
	var gracePeriod int64
	switch {
	case gracePeriodOverride != nil:
		gracePeriod = *gracePeriodOverride
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		gracePeriod = *pod.Spec.TerminationGracePeriodSeconds
	}
	timeout := max(time.Duration(gracePeriod+gracePeriod/2)*time.Second, killPodNowMinTimeout)

	ctx := context.Background() // the parent of a worker's syncs, should this kill start one
	if np := kl.nodePressure; np != nil {
		np.mu.Lock()
		if np.ctx != nil {
			ctx = np.ctx
		}
		np.mu.Unlock()
	}
	done := make(chan struct{})
	mirror, _ := kl.podManager.GetMirrorPodByPod(pod)
	kl.podWorkers.UpdatePod(ctx, podworkers.UpdatePodOptions{
		UpdateType: kubetypes.SyncPodKill, StartTime: kl.clock.Now(), Pod: pod, MirrorPod: mirror,
		KillPodOptions: &podworkers.KillPodOptions{CompletedCh: done, Evict: isEvicted,
			PodStatusFunc: statusFn, PodTerminationGracePeriodSecondsOverride: gracePeriodOverride},
	})
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("kill pod %s/%s: %w", pod.Namespace, pod.Name, ctx.Err())
	case <-kl.clock.After(timeout):
		kl.recorder.Eventf(pod, v1.EventTypeWarning, events.ExceedMaxGracePeriod, "Container runtime did not kill the pod within specified grace period.")
		return errors.New("timeout waiting to kill pod")
	}
}

// podIsFinished tells the eviction manager that an evicted pod's worker is
// done with it (upstream's PodIsFinished).
func (kl *Kubelet) podIsFinished(pod *v1.Pod) bool {
	f, ok := kl.podWorkers.(interface{ ShouldPodBeFinished(types.UID) bool })
	return ok && f.ShouldPodBeFinished(pod.UID)
}

// The node status setters' pressure functions: the eviction manager's
// word, and no pressure without one.
func (kl *Kubelet) isUnderMemoryPressure() bool {
	return kl.nodePressure != nil && kl.nodePressure.manager.IsUnderMemoryPressure()
}

func (kl *Kubelet) isUnderDiskPressure() bool {
	return kl.nodePressure != nil && kl.nodePressure.manager.IsUnderDiskPressure()
}

func (kl *Kubelet) isUnderPIDPressure() bool {
	return kl.nodePressure != nil && kl.nodePressure.manager.IsUnderPIDPressure()
}

// evictionConfigFrom reads the KubeletConfiguration's eviction*, image* GC
// and image pull fields (defaulted by kubeletconfig.SetDefaults; a nil
// pointer is upstream's default) into an EvictionConfig
// (NewMainKubelet with MainOptions.Eviction).
func evictionConfigFrom(kubeCfg *kubeletv1beta1.KubeletConfiguration, statsProvider StatsProvider, imageGCPeriod time.Duration) (*EvictionConfig, error) {
	if statsProvider == nil {
		return nil, errors.New("kubelet: MainOptions.Eviction needs Dependencies.StatsProvider")
	}
	thresholds, err := parseThresholdConfig(kubeCfg.EvictionHard, kubeCfg.EvictionSoft, kubeCfg.EvictionSoftGracePeriod, kubeCfg.EvictionMinimumReclaim)
	if err != nil {
		return nil, fmt.Errorf("kubelet: eviction thresholds: %w", err)
	}
	policy := images.ImageGCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80,
		MinAge: kubeCfg.ImageMinimumGCAge.Duration, MaxAge: kubeCfg.ImageMaximumGCAge.Duration}
	if p := kubeCfg.ImageGCHighThresholdPercent; p != nil {
		policy.HighThresholdPercent = int(*p)
	}
	if p := kubeCfg.ImageGCLowThresholdPercent; p != nil {
		policy.LowThresholdPercent = int(*p)
	}
	pulls := images.DefaultPullConfig()
	if p := kubeCfg.SerializeImagePulls; p != nil {
		pulls.SerializeImagePulls = *p
	}
	pulls.MaxParallelImagePulls = kubeCfg.MaxParallelImagePulls
	if p := kubeCfg.RegistryPullQPS; p != nil {
		pulls.RegistryPullQPS = float32(*p)
	}
	if kubeCfg.RegistryBurst != 0 {
		pulls.RegistryBurst = int(kubeCfg.RegistryBurst)
	}
	return &EvictionConfig{
		Stats: statsProvider,
		Config: eviction.Config{
			PressureTransitionPeriod: kubeCfg.EvictionPressureTransitionPeriod.Duration,
			MaxPodGracePeriodSeconds: int64(kubeCfg.EvictionMaxPodGracePeriod),
			Thresholds:               thresholds,
		},
		ImageGCPolicy: policy,
		ImageGCPeriod: imageGCPeriod,
		ImagePulls:    pulls,
	}, nil
}
