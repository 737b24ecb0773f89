package app

// What KubeletServer.Stats turns on: the kubelet's series recorded as it
// runs, and, on the kubelet API, the endpoints that read the node's and the
// pods' figures (upstream: NewMainKubelet builds the stats provider and
// the resource analyzer, and the server's InstallDefaultHandlers serves
// them with /healthz's checks and /configz).

import (
	"net/http"
	"os"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/cadvisor"
	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/metrics"
	"mykubelet/mylib/metrics/collectors"
	kubepod "mykubelet/mylib/pod"
	"mykubelet/mylib/server"
	"mykubelet/mylib/stats"
)

// statsDependencies gives deps the kubelet's series (metrics.New, a
// registry of this kubelet's own) unless the program brought its own.
func statsDependencies(deps *kubelet.Dependencies) {
	if deps.Metrics == nil {
		deps.Metrics = metrics.NewWithClock(deps.Clock)
	}
}

// statsHost is what the endpoints read of the Kubelet.
type statsHost interface {
	GetPodManager() kubepod.Manager
	ListVolumesForPod(uid types.UID) map[string]string
	SyncLoopHealthCheck(r *http.Request) error
	PLEGHealthCheck(r *http.Request) error
}

// podsHost is what the stats provider reads of the Kubelet: the pods it
// runs and their mounted volumes.
type podsHost interface {
	GetPodManager() kubepod.Manager
	ListVolumesForPod(uid types.UID) map[string]string
}

// lateHost is the Kubelet for a stats provider built before it (the
// eviction manager, inside the Kubelet, reads the provider): no pods until
// set is called with the Kubelet, once NewMainKubelet has returned it.
type lateHost struct {
	mu sync.RWMutex
	h  podsHost
}

func (l *lateHost) set(h podsHost) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.h = h
}

func (l *lateHost) get() podsHost {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.h
}

// pods are the Kubelet's pods; none before it is set.
func (l *lateHost) pods() []*v1.Pod {
	if h := l.get(); h != nil {
		return h.GetPodManager().GetPods()
	}
	return nil
}

// volumes are a pod's mounted volumes, sorted by name; none before the
// Kubelet is set.
func (l *lateHost) volumes(uid types.UID) []stats.VolumeInfo {
	if h := l.get(); h != nil {
		return volumeInfos(h.ListVolumesForPod(uid))
	}
	return nil
}

// newStatsProvider is the stats provider over the runtime, host's pods
// and their mounted volumes, the node's disk (the root directory) and
// memory, or the mock machine's where s.MockMachine sets them.
func newStatsProvider(s *KubeletServer, deps *kubelet.Dependencies, host *lateHost) (*stats.Provider, error) {
	root, mock := s.RootDirectory, s.MockMachine
	machine := sync.OnceValues(func() (*cadvisor.MachineInfo, error) { return cadvisor.ReadMachineInfo(root) })
	return stats.NewProvider(stats.Config{
		NodeName: s.NodeName,
		Runtime:  deps.RemoteRuntimeService,
		Images:   deps.RemoteImageService,
		Pods:     host.pods,
		Volumes:  host.volumes,
		// The node's memory as its status reports it: the mock
		// machine's, else MemTotal; 0 when it cannot be read, as the
		// node status would fail too.
		MemoryCapacity: func() int64 {
			if mock.MemoryCapacity > 0 {
				return mock.MemoryCapacity
			}
			m, err := machine()
			if err != nil {
				return 0
			}
			return m.MemoryCapacity
		},
		RootDirectory:    root,
		PodLogsDirectory: s.KubeletConfiguration.PodLogsDir,
		PodsInProcess:    podsInProcess(s, deps.Clock),
		MockMachine:      mock,
		Clock:            deps.Clock,
	})
}

// statsProviderDependency gives deps the stats provider, built before the
// Kubelet (upstream's NewMainKubelet builds it first thing too: the
// eviction manager and the image GC manager read it), unless the program
// brought its own; call host.set with the Kubelet once it is made.
func statsProviderDependency(s *KubeletServer, deps *kubelet.Dependencies, host *lateHost) error {
	if deps.StatsProvider != nil {
		return nil
	}
	p, err := newStatsProvider(s, deps, host)
	if err != nil {
		return err
	}
	deps.StatsProvider = p
	return nil
}

// statsEndpoints fills the server's optional endpoints: /stats/summary
// from the stats provider (deps.StatsProvider, the one the eviction
// manager reads, when it is a *stats.Provider; else one over kl);
// /metrics/resource from the same provider
// (collectors.NewResourceMetricsHandler); /metrics and /metrics/probes
// from deps.Metrics; /configz showing kc; /healthz with upstream's
// syncloop check and the PLEG's health.
func statsEndpoints(cfg *server.Config, s *KubeletServer, kl statsHost, deps *kubelet.Dependencies) error {
	kc := s.KubeletConfiguration
	p, ok := deps.StatsProvider.(*stats.Provider)
	if !ok {
		host := &lateHost{h: kl}
		var err error
		if p, err = newStatsProvider(s, deps, host); err != nil {
			return err
		}
	}
	cfg.Summary = p
	cfg.ResourceMetrics = collectors.NewResourceMetricsHandler(p)
	cfg.Metrics, cfg.ProbeMetrics = deps.Metrics.Handler(), deps.Metrics.ProbeHandler()
	cfg.Configz = configz(kc)
	cfg.HealthChecks = []server.HealthCheck{
		{Name: "syncloop", Check: kl.SyncLoopHealthCheck},
		{Name: "pleg", Check: kl.PLEGHealthCheck},
	}
	return nil
}

// configz is what /configz shows: the KubeletConfiguration the kubelet
// runs with, defaults and flags applied (upstream registers it with
// configz.New("kubeletconfig") at start-up).
func configz(kc *kubeletv1beta1.KubeletConfiguration) func() any {
	return func() any { return kc }
}

// volumeInfos turns a pod's mounted volumes, name to directory, into the
// provider's list, sorted by name so the summary lists them in one order.
func volumeInfos(vols map[string]string) []stats.VolumeInfo {
	out := make([]stats.VolumeInfo, 0, len(vols))
	for name, path := range vols {
		out = append(out, stats.VolumeInfo{Name: name, Path: path})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// podsInProcess says whether the pods' scripts run in this process, so
// that the process's own CPU and memory hold theirs and the summary must
// not count them twice: the mock runtime served here (s.FakeRuntime) runs
// them in its own process unless it is root on the real clock, when a
// sandbox process of its own runs them (fakeruntime's IsolationAuto); a
// runtime of its own runs them elsewhere.
func podsInProcess(s *KubeletServer, clk clock.Clock) bool {
	if !s.FakeRuntime {
		return false
	}
	if os.Geteuid() != 0 {
		return true
	}
	switch clk.(type) {
	case clock.RealClock, *clock.RealClock:
		return false
	}
	return true
}
