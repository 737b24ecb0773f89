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

	"k8s.io/apimachinery/pkg/types"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/metrics"
	"mykubelet/mylib/metrics/collectors"
	"mykubelet/mylib/nodestatus"
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

// statsEndpoints fills the server's optional endpoints: /stats/summary
// from a stats.Provider over the runtime, the pods the kubelet runs, their
// mounted volumes and the node's disk and memory; /metrics/resource from
// the same provider (collectors.NewResourceMetricsHandler); /metrics and
// /metrics/probes from deps.Metrics; /configz showing kc; /healthz with
// upstream's syncloop check and the PLEG's health.
func statsEndpoints(cfg *server.Config, s *KubeletServer, kl statsHost, deps *kubelet.Dependencies) error {
	kc := s.KubeletConfiguration
	pods := kl.GetPodManager()
	root := s.RootDirectory
	machine := sync.OnceValues(func() (*nodestatus.Machine, error) { return nodestatus.ReadMachine(root) })
	p, err := stats.NewProvider(stats.Config{
		NodeName: s.NodeName,
		Runtime:  deps.RemoteRuntimeService,
		Images:   deps.RemoteImageService,
		Pods:     pods.GetPods,
		Volumes:  func(uid types.UID) []stats.VolumeInfo { return volumeInfos(kl.ListVolumesForPod(uid)) },
		// The node's memory as its status reports it (MemTotal); 0 when
		// it cannot be read, as the node status would fail too.
		MemoryCapacity: func() int64 {
			m, err := machine()
			if err != nil {
				return 0
			}
			return m.MemoryCapacity
		},
		RootDirectory:    root,
		PodLogsDirectory: kc.PodLogsDir,
		PodsInProcess:    podsInProcess(s, deps.Clock),
		Clock:            deps.Clock,
	})
	if err != nil {
		return err
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
