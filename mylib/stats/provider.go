// Package stats is upstream's pkg/kubelet/stats and the summary API of
// pkg/kubelet/server/stats: the node's and its pods' figures, read from
// the container runtime (CRI stats) and the node, in the published types
// (k8s.io/kubelet/pkg/apis/stats/v1alpha1) that /stats/summary serves.
//
// Upstream reads the pods from the runtime's ListPodSandboxStats when the
// runtime offers it (the PodAndContainerStatsFromCRI path,
// cri_stats_provider.go's listPodStatsStrictlyFromCRI) and the node from
// cAdvisor's cgroups. This package is that CRI path throughout: there is
// no cgroup to read, so where upstream reads one it adds up what it knows.
// Where it departs from upstream, and why:
//   - the node's CPU and memory are the pods' sums plus this process's own
//     (the "kubelet" system container: getrusage and /proc/self/statm),
//     not the root cgroup's; the "pods" system container is the pods' sum;
//     there are no "runtime" or "misc" system containers, and no node
//     network figures (upstream's come from the host's interfaces); the
//     process is the whole process, so kubelets that share one each count
//     it all as their own;
//   - only the pods Config.Pods knows are reported (upstream reports every
//     sandbox of the runtime), because several kubelets may share one
//     runtime;
//   - a pod's UsageNanoCores, when the runtime leaves it out, is its
//     containers' sum, when each of them has one;
//   - the volumes are measured (du and statfs) at each Get, not by a
//     background calculator every minute (upstream's fsResourceAnalyzer),
//     so the figures are always fresh and a test needs no goroutine;
//   - a filesystem the runtime names but that is not on this node (the
//     mock runtime's image store) gets no capacity, as upstream's when
//     cAdvisor does not know the device;
//   - the mock machine (Config.MockMachine, the course's small node that
//     a learner fills; upstream has none) replaces, field by field, the
//     host's figures: with MemoryCapacity, the node's memory is that
//     capacity, its working set the pods' sum only (the mock machine runs
//     the pods and nothing else: no kubelet, no system daemons) and
//     available the difference, never negative; with NodeFsCapacity, the
//     node's Fs (and every pod's, container's and local volume's share of
//     it) has that capacity and is used by the pods' ephemeral storage:
//     the writable layers of all the runtime's containers, dead ones
//     included until removed, the pods' logs, local ephemeral volumes and
//     etc-hosts files (Fs.UsedBytes; available is capacity - used); with
//     ImageFsCapacity, the image filesystem has that capacity and is used
//     by the images' sizes. Its inodes are one per mockBytesPerInode of
//     capacity. Rlimit (pid.available's input) stays the host's: pid_max
//     and the host's process count.
package stats

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/cadvisor"
	"mykubelet/mylib/kuberuntime"
)

// VolumeInfo is one mounted volume of a pod: its name in the pod and its
// directory on the node.
type VolumeInfo struct {
	Name string
	Path string
}

// VolumesFromMap adapts a name-to-directory lister (the kubelet's
// ListVolumesForPod) to Config.Volumes, sorted by name.
func VolumesFromMap(list func(uid types.UID) map[string]string) func(uid types.UID) []VolumeInfo {
	return func(uid types.UID) []VolumeInfo {
		m := list(uid)
		out := make([]VolumeInfo, 0, len(m))
		for name, path := range m {
			out = append(out, VolumeInfo{Name: name, Path: path})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out
	}
}

// ProcessUsage is a process's own figures: its CPU time (user and system)
// and its working set (resident memory).
type ProcessUsage struct {
	CPUNanoSeconds  uint64
	WorkingSetBytes uint64
	PageFaults      uint64
	MajorPageFaults uint64
}

// Config is what NewProvider needs.
type Config struct {
	// NodeName names the node in the summary. Required.
	NodeName string
	// Runtime and Images are the CRI clients. Required.
	Runtime runtimeapi.RuntimeServiceClient
	Images  runtimeapi.ImageServiceClient
	// Pods are the pods the kubelet runs (the pod manager's GetPods).
	// Required.
	Pods func() []*v1.Pod
	// Volumes are a pod's mounted volumes; nil: none are reported.
	Volumes func(uid types.UID) []VolumeInfo
	// RootDirectory (nodefs) and PodLogsDirectory are measured on disk.
	// An empty RootDirectory leaves the node's Fs out; an empty
	// PodLogsDirectory is kuberuntime.DefaultPodLogsDirectory.
	RootDirectory, PodLogsDirectory string
	// MemoryCapacity is the node's memory in bytes (the node status's
	// capacity). Required.
	MemoryCapacity func() int64
	// Clock: nil is the real clock.
	Clock clock.Clock

	// ProcessUsage is this process's own usage, the "kubelet" system
	// container; nil reads the kernel's (getrusage, /proc/self/statm).
	ProcessUsage func() (ProcessUsage, error)
	// PodsInProcess says the containers' work runs inside this process
	// (the mock runtime without its sandbox process): the process's usage
	// then holds the pods', and the "kubelet" system container is what is
	// left once theirs is taken off, so that no pod counts twice in the
	// node's figures.
	PodsInProcess bool
	// MockMachine: the mock machine's sizes (cadvisor.MockMachine); a
	// set field replaces the host's capacity, and the usage is then what
	// the pods account for (see the package doc). Its MemoryCapacity, when
	// set, is used instead of the MemoryCapacity func's.
	MockMachine cadvisor.MockMachine
}

// Provider builds summaries (upstream's SummaryProvider over its
// criStatsProvider).
type Provider struct {
	cfg Config
	// createdAt is the "kubelet" system container's StartTime (upstream's
	// kubeletCreationTime); bootTime the node's StartTime.
	createdAt, bootTime metav1.Time

	mu sync.Mutex
	// cpuUsageCache is each container's previous cumulative CPU reading,
	// from which its UsageNanoCores is computed when the runtime does not
	// give it (upstream's cpuUsageCache).
	cpuUsageCache map[string]*cpuUsageRecord
	// ownCPU is this process's previous CPU reading, for its rate.
	ownCPU *ownCPURecord
	// statsFailed are the sandboxes whose stats the runtime would not
	// give at the last read (listSandboxStats): each is logged once.
	statsFailed map[string]bool
}

// NewProvider checks cfg.
func NewProvider(cfg Config) (*Provider, error) {
	if cfg.NodeName == "" || cfg.Runtime == nil || cfg.Images == nil || cfg.Pods == nil || cfg.MemoryCapacity == nil {
		return nil, errors.New("stats: Config needs NodeName, Runtime, Images, Pods and MemoryCapacity")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.PodLogsDirectory == "" {
		cfg.PodLogsDirectory = kuberuntime.DefaultPodLogsDirectory
	}
	if cfg.ProcessUsage == nil {
		cfg.ProcessUsage = readProcessUsage
	}
	p := &Provider{cfg: cfg, createdAt: metav1.NewTime(cfg.Clock.Now()), cpuUsageCache: map[string]*cpuUsageRecord{}}
	p.bootTime = p.createdAt
	if bt, err := bootTime(); err == nil {
		p.bootTime = metav1.NewTime(bt)
	} else {
		klog.InfoS("Error getting system boot time. Node metrics will have an incorrect start time", "err", err)
	}
	return p, nil
}

// Get is the whole summary (/stats/summary); updateStats is upstream's:
// true also stores each container's CPU reading, from which the next
// call's UsageNanoCores is computed when the runtime gives none (upstream's
// eviction manager asks so every 10s; the HTTP handler does not).
func (p *Provider) Get(ctx context.Context, updateStats bool) (*statsapi.Summary, error) {
	now := p.cfg.Clock.Now()
	var rootFs *fsInfo
	var nodeFs *statsapi.FsStats
	if c := p.cfg.MockMachine.NodeFsCapacity; c > 0 {
		rootFs = newMockFs(uint64(c), now) // its usage: the pods', below
	} else if p.cfg.RootDirectory != "" {
		fi, err := statfs(p.cfg.RootDirectory, now)
		if err != nil {
			return nil, fmt.Errorf("failed to get rootFs stats: %w", err)
		}
		rootFs, nodeFs = &fi, fi.fsStats(true)
	}
	imageFs, containerFs, err := p.ImageFsStats(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to get imageFs stats: %w", err)
	}
	pods, podsFs, err := p.listPodStats(ctx, updateStats, rootFs)
	if err != nil {
		return nil, fmt.Errorf("failed to list pod stats: %w", err)
	}
	node, err := p.nodeStats(pods, now)
	if err != nil {
		return nil, err
	}
	if rootFs.isMock() {
		nodeFs = rootFs.fsStats(false)
		nodeFs.UsedBytes, nodeFs.InodesUsed = ptr(podsFs.bytes), ptr(podsFs.inodes)
		rootFs.settle(podsFs.bytes, podsFs.inodes) // and every pod's figure of it
	}
	node.Fs = nodeFs
	node.Runtime = &statsapi.RuntimeStats{ImageFs: imageFs, ContainerFs: containerFs}
	node.Rlimit = rlimitStats(now)
	return &statsapi.Summary{Node: *node, Pods: pods}, nil
}

// GetCPUAndMemoryStats is the summary with CPU and memory only
// (/metrics/resource): no filesystem, network or volume is measured.
func (p *Provider) GetCPUAndMemoryStats(ctx context.Context) (*statsapi.Summary, error) {
	now := p.cfg.Clock.Now()
	pods, err := p.listPodCPUAndMemoryStats(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to list pod stats: %w", err)
	}
	node, err := p.nodeStats(pods, now)
	if err != nil {
		return nil, err
	}
	return &statsapi.Summary{Node: *node, Pods: pods}, nil
}

// nodeStats is the node's CPU and memory (the pods' and this process's)
// and the "kubelet" and "pods" system containers.
func (p *Provider) nodeStats(pods []statsapi.PodStats, now time.Time) (*statsapi.NodeStats, error) {
	ts := metav1.NewTime(now)
	var podsCPU, podsNanoCores, podsWS, podsUsage, podsRSS uint64
	for _, ps := range pods {
		if ps.CPU != nil {
			podsCPU += deref(ps.CPU.UsageCoreNanoSeconds)
			podsNanoCores += deref(ps.CPU.UsageNanoCores)
		}
		if ps.Memory != nil {
			podsWS += deref(ps.Memory.WorkingSetBytes)
			podsUsage += deref(ps.Memory.UsageBytes)
			podsRSS += deref(ps.Memory.RSSBytes)
		}
	}
	own, err := p.cfg.ProcessUsage()
	if err != nil {
		return nil, fmt.Errorf("failed to get the kubelet's own stats: %w", err)
	}
	ownNanoCores := p.ownUsageNanoCores(own.CPUNanoSeconds, now)
	kCPU, kNanoCores, kWS := own.CPUNanoSeconds, ownNanoCores, own.WorkingSetBytes
	if p.cfg.PodsInProcess {
		kCPU, kNanoCores, kWS = sub(kCPU, podsCPU), sub(kNanoCores, podsNanoCores), sub(kWS, podsWS)
	}

	kubelet := statsapi.ContainerStats{
		Name:      statsapi.SystemContainerKubelet,
		StartTime: p.createdAt,
		CPU:       &statsapi.CPUStats{Time: ts, UsageCoreNanoSeconds: ptr(kCPU), UsageNanoCores: ptr(kNanoCores)},
		Memory: &statsapi.MemoryStats{Time: ts, WorkingSetBytes: ptr(kWS), UsageBytes: ptr(kWS), RSSBytes: ptr(kWS),
			PageFaults: ptr(own.PageFaults), MajorPageFaults: ptr(own.MajorPageFaults)},
	}
	podsContainer := statsapi.ContainerStats{
		Name:      statsapi.SystemContainerPods,
		StartTime: p.createdAt,
		CPU:       &statsapi.CPUStats{Time: ts, UsageCoreNanoSeconds: ptr(podsCPU), UsageNanoCores: ptr(podsNanoCores)},
		Memory:    &statsapi.MemoryStats{Time: ts, WorkingSetBytes: ptr(podsWS), UsageBytes: ptr(podsUsage), RSSBytes: ptr(podsRSS)},
	}

	// The node's memory: the pods' and this process's, of the host's
	// memory; on the mock machine, the pods' only, of its memory (it runs
	// the pods and nothing else).
	ws, usage, rss, capacity := podsWS+kWS, podsUsage+kWS, podsRSS+kWS, p.cfg.MemoryCapacity()
	if c := p.cfg.MockMachine.MemoryCapacity; c > 0 {
		ws, usage, rss, capacity = podsWS, podsUsage, podsRSS, c
	}
	return &statsapi.NodeStats{
		NodeName:  p.cfg.NodeName,
		StartTime: p.bootTime,
		CPU: &statsapi.CPUStats{Time: ts,
			UsageCoreNanoSeconds: ptr(podsCPU + kCPU),
			UsageNanoCores:       ptr(podsNanoCores + kNanoCores)},
		Memory: &statsapi.MemoryStats{Time: ts,
			AvailableBytes:  ptr(sub(uint64(max(capacity, 0)), ws)),
			UsageBytes:      ptr(usage),
			WorkingSetBytes: ptr(ws),
			RSSBytes:        ptr(rss),
			PageFaults:      ptr(own.PageFaults),
			MajorPageFaults: ptr(own.MajorPageFaults)},
		SystemContainers: []statsapi.ContainerStats{kubelet, podsContainer},
	}, nil
}

// ownCPURecord is a CPU reading of this process and the rate computed
// when it was taken.
type ownCPURecord struct {
	cpu       uint64
	at        time.Time
	nanoCores uint64
}

// ownUsageNanoCores is this process's CPU rate since its previous reading
// (0 on the first), and stores this one; a reading at the same instant
// (a fake clock) answers the last rate.
func (p *Provider) ownUsageNanoCores(cpu uint64, now time.Time) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := p.ownCPU
	if prev != nil && !now.After(prev.at) {
		return prev.nanoCores
	}
	rec := &ownCPURecord{cpu: cpu, at: now}
	if prev != nil && cpu >= prev.cpu {
		rec.nanoCores = uint64(float64(cpu-prev.cpu) / float64(now.Sub(prev.at)) * float64(time.Second))
	}
	p.ownCPU = rec
	return rec.nanoCores
}

func ptr(v uint64) *uint64 { return &v }

func deref(v *uint64) uint64 {
	if v == nil {
		return 0
	}
	return *v
}

// sub is a-b, 0 when b is larger.
func sub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}
