package stats

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"mykubelet/mylib/kuberuntime"
)

// defaultCachePeriod is how long a container's CPU reading is kept
// without a newer one (upstream's).
const defaultCachePeriod = 10 * time.Minute

// cpuUsageRecord is a container's previous CPU reading and the rate
// computed when it was taken.
type cpuUsageRecord struct {
	stats          *runtimeapi.CpuUsage
	usageNanoCores *uint64
}

// listPodStats is each running pod's full stats, from the runtime's
// ListPodSandboxStats (upstream's listPodStatsStrictlyFromCRI) and the
// disk (volumes, logs). rootFs is the nodefs; nil leaves capacities out.
// On the mock machine's nodefs (rootFs.isMock) it also returns what the
// node's pods use of it (see mockNodeFsUsage); else a zero diskUsage.
func (p *Provider) listPodStats(ctx context.Context, updateCPUNanoCoreUsage bool, rootFs *fsInfo) ([]statsapi.PodStats, diskUsage, error) {
	var nodeFs diskUsage
	containers, sandboxes, pods, err := p.getPodAndContainerMaps(ctx)
	if err != nil {
		return nil, nodeFs, err
	}
	resp, err := p.listSandboxStats(ctx, sandboxes)
	if err != nil {
		return nil, nodeFs, err
	}
	now := p.cfg.Clock.Now()
	fsByMountpoint := map[string]*fsInfo{}
	out := make([]statsapi.PodStats, 0, len(sandboxes))
	if rootFs.isMock() {
		nodeFs = p.mockNodeFsUsage(resp.GetStats())
	}
	for _, sst := range resp.GetStats() {
		sandbox, ok := sandboxes[sst.GetAttributes().GetId()]
		if !ok {
			continue
		}
		pod, ok := pods[types.UID(sandbox.GetMetadata().GetUid())]
		if !ok {
			continue
		}
		ps := buildPodStats(pod, sandbox)
		for _, cst := range sst.GetLinux().GetContainers() {
			c, ok := containers[cst.GetAttributes().GetId()]
			if !ok {
				continue
			}
			cs := p.makeContainerStats(cst, c, pod, rootFs, fsByMountpoint, updateCPUNanoCoreUsage, now)
			ps.Containers = append(ps.Containers, *cs)
		}
		addCRIPodNetworkStats(ps, sst)
		addCRIPodCPUStats(ps, sst)
		addCRIPodMemoryStats(ps, sst)
		addCRIPodProcessStats(ps, sst)
		local := p.makePodStorageStats(ps, pod, rootFs, now)
		if rootFs.isMock() {
			nodeFs.bytes, nodeFs.inodes = nodeFs.bytes+local.bytes, nodeFs.inodes+local.inodes
		}
		out = append(out, *ps)
	}
	p.cleanupOutdatedCaches()
	sortPods(out)
	return out, nodeFs, nil
}

// listSandboxStats is the runtime's ListPodSandboxStats. Unlike upstream,
// which fails the whole summary then, a failed list is followed by one
// PodSandboxStats per sandbox of sandboxes, and a sandbox the runtime
// has no stats for is left out (its pod has no figures): containerd 1.6
// fails the whole list for one sandbox made without a CgroupParent
// ("cgroupPath is empty"), a pod of a kubelet without pod cgroups, or of
// one before them. Each such sandbox is logged once, not at every read
// (the eviction manager's, every 10 s). A runtime that is not there
// (Unavailable, DeadlineExceeded, Canceled), or no sandbox to ask, fails
// it as upstream.
func (p *Provider) listSandboxStats(ctx context.Context, sandboxes map[string]*runtimeapi.PodSandbox) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	resp, listErr := p.cfg.Runtime.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{Filter: &runtimeapi.PodSandboxStatsFilter{}})
	if listErr == nil {
		return resp, nil
	}
	switch status.Code(listErr) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return nil, fmt.Errorf("failed to list pod sandbox stats: %w", listErr)
	}
	if len(sandboxes) == 0 {
		return nil, fmt.Errorf("failed to list pod sandbox stats: %w", listErr)
	}
	out := &runtimeapi.ListPodSandboxStatsResponse{}
	failed := map[string]bool{}
	for id := range sandboxes {
		r, err := p.cfg.Runtime.PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: id})
		if err != nil {
			failed[id] = true
			p.mu.Lock()
			known := p.statsFailed[id]
			p.mu.Unlock()
			if !known {
				logNoSandboxStats(id, err)
			}
			continue
		}
		if st := r.GetStats(); st != nil {
			out.Stats = append(out.Stats, st)
		}
	}
	p.mu.Lock()
	p.statsFailed = failed // forget the sandboxes that are gone or work now
	p.mu.Unlock()
	return out, nil
}

// logNoSandboxStats says that the runtime has no stats for a sandbox (a
// variable: the tests count its lines).
var logNoSandboxStats = func(id string, err error) {
	klog.InfoS("The runtime has no stats for a pod sandbox; its pod is reported without them", "podSandboxID", id, "err", err)
}

// mockNodeFsUsage is what the node's containers use of the mock machine's
// nodefs, from every sandbox the runtime lists (the pods this kubelet
// knows or not, ready or not): the writable layers of all their
// containers, running or dead (the mock runtime lists a dead container
// until it is removed), and their pods' log directories (every attempt of
// every container). The pods' local ephemeral volumes and etc-hosts files
// are added by listPodStats, for the pods it reports. The mock machine is
// the runtime's machine: kubelets that share one runtime each count all.
func (p *Provider) mockNodeFsUsage(stats []*runtimeapi.PodSandboxStats) diskUsage {
	var d diskUsage
	logDirs := map[string]bool{}
	for _, sst := range stats {
		for _, cst := range sst.GetLinux().GetContainers() {
			if wl := cst.GetWritableLayer(); wl != nil {
				d.bytes += wl.GetUsedBytes().GetValue()
				d.inodes += wl.GetInodesUsed().GetValue()
			}
		}
		m := sst.GetAttributes().GetMetadata()
		if m.GetUid() == "" {
			continue
		}
		dir := kuberuntime.BuildPodLogsDirectory(p.cfg.PodLogsDirectory, m.GetNamespace(), m.GetName(), types.UID(m.GetUid()))
		if logDirs[dir] {
			continue
		}
		logDirs[dir] = true
		if b, i, err := du(dir); err == nil {
			d.bytes, d.inodes = d.bytes+b, d.inodes+i
		} else if !errors.Is(err, fs.ErrNotExist) {
			klog.V(4).InfoS("Unable to measure a pod's logs", "path", dir, "err", err)
		}
	}
	return d
}

// listPodCPUAndMemoryStats is each running pod's CPU and memory
// (upstream's ListPodCPUAndMemoryStats on the CRI path): nothing on disk
// is measured, the cache of CPU readings is read but not updated.
func (p *Provider) listPodCPUAndMemoryStats(ctx context.Context) ([]statsapi.PodStats, error) {
	containers, sandboxes, pods, err := p.getPodAndContainerMaps(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := p.listSandboxStats(ctx, sandboxes)
	if err != nil {
		return nil, err
	}
	now := p.cfg.Clock.Now()
	out := make([]statsapi.PodStats, 0, len(sandboxes))
	for _, sst := range resp.GetStats() {
		sandbox, ok := sandboxes[sst.GetAttributes().GetId()]
		if !ok {
			continue
		}
		pod, ok := pods[types.UID(sandbox.GetMetadata().GetUid())]
		if !ok {
			continue
		}
		ps := buildPodStats(pod, sandbox)
		for _, cst := range sst.GetLinux().GetContainers() {
			c, ok := containers[cst.GetAttributes().GetId()]
			if !ok {
				continue
			}
			cs := p.makeContainerCPUAndMemoryStats(cst, time.Unix(0, c.GetCreatedAt()), now)
			ps.Containers = append(ps.Containers, *cs)
		}
		addCRIPodCPUStats(ps, sst)
		addCRIPodMemoryStats(ps, sst)
		out = append(out, *ps)
	}
	sortPods(out)
	return out, nil
}

// getPodAndContainerMaps is the runtime's running containers and its
// sandboxes (one per pod; upstream's), by ID, and the kubelet's pods by UID.
func (p *Provider) getPodAndContainerMaps(ctx context.Context) (map[string]*runtimeapi.Container, map[string]*runtimeapi.PodSandbox, map[types.UID]*v1.Pod, error) {
	cresp, err := p.cfg.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{}})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("failed to list all containers: %w", err)
	}
	sresp, err := p.cfg.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{}})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("failed to list all pod sandboxes: %w", err)
	}
	sandboxes := map[string]*runtimeapi.PodSandbox{}
	for _, s := range removeTerminatedPods(sresp.GetItems()) {
		sandboxes[s.GetId()] = s
	}
	containers := map[string]*runtimeapi.Container{}
	for _, c := range cresp.GetContainers() {
		// Upstream's removeTerminatedContainers keeps the running ones.
		if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
			containers[c.GetId()] = c
		}
	}
	pods := map[types.UID]*v1.Pod{}
	for _, pod := range p.cfg.Pods() {
		pods[pod.UID] = pod
	}
	return containers, sandboxes, pods, nil
}

// removeTerminatedPods keeps one sandbox per pod name: the only one, the
// ready ones, or else the newest (upstream's).
func removeTerminatedPods(sandboxes []*runtimeapi.PodSandbox) []*runtimeapi.PodSandbox {
	type ref struct{ namespace, name string }
	byRef := map[ref][]*runtimeapi.PodSandbox{}
	var order []ref
	sorted := append([]*runtimeapi.PodSandbox(nil), sandboxes...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].GetCreatedAt() < sorted[j].GetCreatedAt() })
	for _, s := range sorted {
		r := ref{s.GetMetadata().GetNamespace(), s.GetMetadata().GetName()}
		if _, ok := byRef[r]; !ok {
			order = append(order, r)
		}
		byRef[r] = append(byRef[r], s)
	}
	var out []*runtimeapi.PodSandbox
	for _, r := range order {
		all := byRef[r]
		if len(all) == 1 {
			out = append(out, all[0])
			continue
		}
		found := false
		for _, s := range all {
			if s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
				out, found = append(out, s), true
			}
		}
		if !found {
			out = append(out, all[len(all)-1])
		}
	}
	return out
}

// buildPodStats is a pod's reference and its sandbox's creation time.
func buildPodStats(pod *v1.Pod, sandbox *runtimeapi.PodSandbox) *statsapi.PodStats {
	return &statsapi.PodStats{
		PodRef:    statsapi.PodReference{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)},
		StartTime: metav1.NewTime(time.Unix(0, sandbox.GetCreatedAt())),
	}
}

// makeContainerStats is one container's full stats: the runtime's CPU,
// memory and writable layer (with its filesystem's capacity), its logs on
// disk.
func (p *Provider) makeContainerStats(st *runtimeapi.ContainerStats, c *runtimeapi.Container, pod *v1.Pod,
	rootFs *fsInfo, fsByMountpoint map[string]*fsInfo, updateCPUNanoCoreUsage bool, now time.Time) *statsapi.ContainerStats {
	ts := metav1.NewTime(now)
	cs := &statsapi.ContainerStats{
		Name:      st.GetAttributes().GetMetadata().GetName(),
		StartTime: metav1.NewTime(time.Unix(0, c.GetCreatedAt())),
		CPU:       &statsapi.CPUStats{},
		Memory:    &statsapi.MemoryStats{},
		Rootfs:    &statsapi.FsStats{},
	}
	if cpu := st.GetCpu(); cpu != nil {
		cs.CPU.Time = metav1.NewTime(time.Unix(0, cpu.GetTimestamp()))
		cs.CPU.UsageCoreNanoSeconds = value(cpu.GetUsageCoreNanoSeconds())
		if updateCPUNanoCoreUsage {
			cs.CPU.UsageNanoCores = p.getAndUpdateContainerUsageNanoCores(st)
		} else {
			cs.CPU.UsageNanoCores = p.getContainerUsageNanoCores(st)
		}
	} else {
		cs.CPU = &statsapi.CPUStats{Time: ts, UsageCoreNanoSeconds: ptr(0), UsageNanoCores: ptr(0)}
	}
	if m := st.GetMemory(); m != nil {
		cs.Memory = &statsapi.MemoryStats{
			Time:            metav1.NewTime(time.Unix(0, m.GetTimestamp())),
			AvailableBytes:  value(m.GetAvailableBytes()),
			UsageBytes:      value(m.GetUsageBytes()),
			WorkingSetBytes: value(m.GetWorkingSetBytes()),
			RSSBytes:        value(m.GetRssBytes()),
			PageFaults:      value(m.GetPageFaults()),
			MajorPageFaults: value(m.GetMajorPageFaults()),
		}
	} else {
		cs.Memory = &statsapi.MemoryStats{Time: ts, WorkingSetBytes: ptr(0), UsageBytes: ptr(0), RSSBytes: ptr(0)}
	}
	if wl := st.GetWritableLayer(); wl != nil {
		cs.Rootfs.Time = metav1.NewTime(time.Unix(0, wl.GetTimestamp()))
		cs.Rootfs.UsedBytes = value(wl.GetUsedBytes())
		cs.Rootfs.InodesUsed = value(wl.GetInodesUsed())
		if rootFs.isMock() { // the mock machine's writable layers are on its nodefs
			rootFs.capacityInto(cs.Rootfs)
		} else if mp := wl.GetFsId().GetMountpoint(); mp != "" {
			fi, seen := fsByMountpoint[mp]
			if !seen {
				if got, err := statfs(mp, now); err == nil {
					fi = &got
				} else {
					klog.V(4).InfoS("Failed to get the info of the filesystem with mountpoint", "mountpoint", mp, "err", err)
				}
				fsByMountpoint[mp] = fi
			}
			if fi != nil {
				fi.capacityInto(cs.Rootfs)
			}
		}
	}
	logs, err := p.containerLogStats(pod, cs.Name, rootFs, now)
	if err != nil {
		klog.V(4).InfoS("Unable to fetch container log stats", "containerName", cs.Name, "err", err)
	}
	cs.Logs = logs
	return cs
}

// makeContainerCPUAndMemoryStats is one container's CPU and memory, zeros
// for what the runtime leaves out (upstream's, zeroMissingValues).
func (p *Provider) makeContainerCPUAndMemoryStats(st *runtimeapi.ContainerStats, startTime, now time.Time) *statsapi.ContainerStats {
	cs := &statsapi.ContainerStats{
		Name:      st.GetAttributes().GetMetadata().GetName(),
		StartTime: metav1.NewTime(startTime),
	}
	orZero := func(v *runtimeapi.UInt64Value) *uint64 {
		if v == nil {
			return ptr(0)
		}
		return ptr(v.Value)
	}
	if cpu := st.GetCpu(); cpu != nil {
		cs.CPU = &statsapi.CPUStats{
			Time:                 metav1.NewTime(time.Unix(0, cpu.GetTimestamp())),
			UsageNanoCores:       p.getContainerUsageNanoCores(st),
			UsageCoreNanoSeconds: orZero(cpu.GetUsageCoreNanoSeconds()),
		}
	} else {
		cs.CPU = &statsapi.CPUStats{Time: metav1.NewTime(now), UsageCoreNanoSeconds: ptr(0), UsageNanoCores: ptr(0)}
	}
	if m := st.GetMemory(); m != nil {
		cs.Memory = &statsapi.MemoryStats{
			Time:            metav1.NewTime(time.Unix(0, m.GetTimestamp())),
			AvailableBytes:  orZero(m.GetAvailableBytes()),
			UsageBytes:      orZero(m.GetUsageBytes()),
			WorkingSetBytes: orZero(m.GetWorkingSetBytes()),
			RSSBytes:        orZero(m.GetRssBytes()),
			PageFaults:      orZero(m.GetPageFaults()),
			MajorPageFaults: orZero(m.GetMajorPageFaults()),
		}
	} else {
		z := ptr(0)
		cs.Memory = &statsapi.MemoryStats{Time: metav1.NewTime(now), AvailableBytes: z, UsageBytes: z,
			WorkingSetBytes: z, RSSBytes: z, PageFaults: z, MajorPageFaults: z}
	}
	return cs
}

// getContainerUsageNanoCores is the runtime's UsageNanoCores, else the
// rate computed at the last update of the cache (nil without one).
func (p *Provider) getContainerUsageNanoCores(st *runtimeapi.ContainerStats) *uint64 {
	if st.GetAttributes() == nil {
		return nil
	}
	if v := st.GetCpu().GetUsageNanoCores(); v != nil {
		return ptr(v.Value)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	cached, ok := p.cpuUsageCache[st.GetAttributes().GetId()]
	if !ok || cached.usageNanoCores == nil {
		return nil
	}
	return ptr(*cached.usageNanoCores)
}

// getAndUpdateContainerUsageNanoCores is the runtime's UsageNanoCores,
// else the rate from the cached reading to this one, which replaces it
// (nil on a first reading, or when the cumulative figure went back: the
// container restarted).
func (p *Provider) getAndUpdateContainerUsageNanoCores(st *runtimeapi.ContainerStats) *uint64 {
	cpu := st.GetCpu()
	if st.GetAttributes() == nil || cpu == nil {
		return nil
	}
	if v := cpu.GetUsageNanoCores(); v != nil {
		return ptr(v.Value)
	}
	if cpu.GetUsageCoreNanoSeconds() == nil {
		return nil
	}
	id := st.GetAttributes().GetId()
	p.mu.Lock()
	defer p.mu.Unlock()
	cached, ok := p.cpuUsageCache[id]
	if !ok || cached.stats.GetUsageCoreNanoSeconds() == nil || cpu.GetUsageCoreNanoSeconds().GetValue() < cached.stats.GetUsageCoreNanoSeconds().GetValue() {
		p.cpuUsageCache[id] = &cpuUsageRecord{stats: cpu}
		return nil
	}
	interval := cpu.GetTimestamp() - cached.stats.GetTimestamp()
	if interval <= 0 {
		klog.ErrorS(fmt.Errorf("zero or negative interval (%v - %v)", cpu.GetTimestamp(), cached.stats.GetTimestamp()),
			"Failed updating cpu usage nano core")
		return nil
	}
	used := cpu.GetUsageCoreNanoSeconds().GetValue() - cached.stats.GetUsageCoreNanoSeconds().GetValue()
	nanoCores := uint64(float64(used) / float64(interval) * float64(time.Second))
	p.cpuUsageCache[id] = &cpuUsageRecord{stats: cpu, usageNanoCores: ptr(nanoCores)}
	return ptr(nanoCores)
}

// cleanupOutdatedCaches forgets the readings older than
// defaultCachePeriod (containers gone).
func (p *Provider) cleanupOutdatedCaches() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, rec := range p.cpuUsageCache {
		if rec == nil || p.cfg.Clock.Since(time.Unix(0, rec.stats.GetTimestamp())) > defaultCachePeriod {
			delete(p.cpuUsageCache, id)
		}
	}
}

// ImageFsStats is the runtime's image filesystem (ImageFsInfo) with its
// capacity when its mountpoint is on this node; upstream answers it for
// the containers' filesystem too. With the mock machine's
// ImageFsCapacity, the capacity is that, the used bytes the images' sizes
// (the runtime's figure), and the inodes mockBytesPerInode's.
func (p *Provider) ImageFsStats(ctx context.Context) (imageFs, containerFs *statsapi.FsStats, err error) {
	resp, err := p.cfg.Images.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		return nil, nil, err
	}
	if len(resp.GetImageFilesystems()) == 0 {
		return nil, nil, fmt.Errorf("imageFs information is unavailable")
	}
	imgFs := resp.GetImageFilesystems()[0]
	imageFs = &statsapi.FsStats{
		Time:       metav1.NewTime(time.Unix(0, imgFs.GetTimestamp())),
		UsedBytes:  value(imgFs.GetUsedBytes()),
		InodesUsed: value(imgFs.GetInodesUsed()),
	}
	if c := p.cfg.MockMachine.ImageFsCapacity; c > 0 {
		fi := newMockFs(uint64(c), p.cfg.Clock.Now())
		fi.capacityInto(imageFs)
		fi.settle(deref(imageFs.UsedBytes), deref(imageFs.InodesUsed))
	} else if mp := imgFs.GetFsId().GetMountpoint(); mp != "" {
		if fi, err := statfs(mp, p.cfg.Clock.Now()); err == nil {
			fi.capacityInto(imageFs)
		} else {
			klog.V(2).InfoS("Failed to get the info of the filesystem with mountpoint", "mountpoint", mp, "err", err)
		}
	}
	return imageFs, imageFs, nil
}

func addCRIPodNetworkStats(ps *statsapi.PodStats, st *runtimeapi.PodSandboxStats) {
	n := st.GetLinux().GetNetwork()
	if n == nil {
		return
	}
	ns := &statsapi.NetworkStats{
		Time:       metav1.NewTime(time.Unix(0, n.GetTimestamp())),
		Interfaces: make([]statsapi.InterfaceStats, 0, len(n.GetInterfaces())),
	}
	if d := n.GetDefaultInterface(); d != nil {
		ns.InterfaceStats = criInterfaceToSummary(d)
	}
	for _, i := range n.GetInterfaces() {
		ns.Interfaces = append(ns.Interfaces, criInterfaceToSummary(i))
	}
	ps.Network = ns
}

func criInterfaceToSummary(i *runtimeapi.NetworkInterfaceUsage) statsapi.InterfaceStats {
	return statsapi.InterfaceStats{
		Name:     i.GetName(),
		RxBytes:  value(i.GetRxBytes()),
		RxErrors: value(i.GetRxErrors()),
		TxBytes:  value(i.GetTxBytes()),
		TxErrors: value(i.GetTxErrors()),
	}
}

// addCRIPodCPUStats is the sandbox's CPU; its UsageNanoCores, when the
// runtime leaves it out, is the containers' sum if each has one.
func addCRIPodCPUStats(ps *statsapi.PodStats, st *runtimeapi.PodSandboxStats) {
	cpu := st.GetLinux().GetCpu()
	if cpu == nil {
		return
	}
	ps.CPU = &statsapi.CPUStats{
		Time:                 metav1.NewTime(time.Unix(0, cpu.GetTimestamp())),
		UsageNanoCores:       value(cpu.GetUsageNanoCores()),
		UsageCoreNanoSeconds: value(cpu.GetUsageCoreNanoSeconds()),
	}
	if ps.CPU.UsageNanoCores == nil && len(ps.Containers) > 0 {
		var sum uint64
		for _, c := range ps.Containers {
			if c.CPU == nil || c.CPU.UsageNanoCores == nil {
				return
			}
			sum += *c.CPU.UsageNanoCores
		}
		ps.CPU.UsageNanoCores = ptr(sum)
	}
}

func addCRIPodMemoryStats(ps *statsapi.PodStats, st *runtimeapi.PodSandboxStats) {
	m := st.GetLinux().GetMemory()
	if m == nil {
		return
	}
	ps.Memory = &statsapi.MemoryStats{
		Time:            metav1.NewTime(time.Unix(0, m.GetTimestamp())),
		AvailableBytes:  value(m.GetAvailableBytes()),
		UsageBytes:      value(m.GetUsageBytes()),
		WorkingSetBytes: value(m.GetWorkingSetBytes()),
		RSSBytes:        value(m.GetRssBytes()),
		PageFaults:      value(m.GetPageFaults()),
		MajorPageFaults: value(m.GetMajorPageFaults()),
	}
}

func addCRIPodProcessStats(ps *statsapi.PodStats, st *runtimeapi.PodSandboxStats) {
	pr := st.GetLinux().GetProcess()
	if pr == nil {
		return
	}
	ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: value(pr.GetProcessCount())}
}

// value is a CRI value's figure, nil when the runtime left it out.
func value(v *runtimeapi.UInt64Value) *uint64 {
	if v == nil {
		return nil
	}
	return ptr(v.Value)
}

// sortPods orders pods by namespace and name, for a stable answer.
func sortPods(pods []statsapi.PodStats) {
	sort.Slice(pods, func(i, j int) bool {
		a, b := pods[i].PodRef, pods[j].PodRef
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}
