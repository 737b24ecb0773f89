package fakeruntime

import (
	"context"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"mykubelet/mylib/fakeruntime/sandboxproc"
)

// The stats are what the containers' scripts really use, counted as a
// cgroup would count a real container's processes (shell_usage.go):
//
//   - CPU: UsageCoreNanoSeconds is the CPU time the kernel ran its
//     scripts' threads, cumulative (an exited container keeps its total);
//     UsageNanoCores is the rate since the previous stats read of that
//     container (or sandbox), as containerd computes it: absent on the
//     first read, the last rate again when no time passed since.
//   - Memory: WorkingSetBytes and UsageBytes are what the limits charge
//     (shell_limits.go), the figure that OOM-kills at the limit: the
//     shell variables, stress's bytes and the writable layer's files;
//     RssBytes is the same without the files (tmpfs is not anonymous
//     memory). All 0 once the container is not running.
//   - WritableLayer: the bytes and inodes on disk in its root.
//   - A sandbox: its containers' sums; Network the bytes its servers'
//     connections read (rx) and wrote (tx) on the pod network, as eth0
//     (see statsNetwork); Process the processes running in it.
//
// In the sandbox process, the figures come from there (the usage request
// of sandboxproc.go), one request per stats call; the runtime keeps the
// last ones it heard of each container, and the total a run reported
// when it ended.

// statsInput is what a container's stats are computed from, copied under
// the lock so that the disk is walked without it.
type statsInput struct {
	id, sandboxID string
	meta          *runtimeapi.ContainerMetadata
	labels        map[string]string
	annotations   map[string]string
	running       bool
	rootfs        string
	table         *sandboxproc.ProcTable // its scripts' usage, when they run in this process
	remote        *remoteUsage           // else: what the sandbox process reported
	rate          *cpuRate
	usage         sandboxproc.ScriptUsage // filled by fillUsage
}

// statsInputs returns the inputs of the containers that match keep.
// Caller holds mu.
func (r *Runtime) statsInputs(keep func(*container) bool) []statsInput {
	var out []statsInput
	for _, c := range r.containers {
		if !keep(c) {
			continue
		}
		in := statsInput{id: c.id, sandboxID: c.sandboxID, meta: c.meta, labels: c.labels, annotations: c.annotations,
			running: c.state == runtimeapi.ContainerState_CONTAINER_RUNNING, remote: &c.remote, rate: &c.cpuRate}
		if r.sandbox == nil {
			in.table = &c.running
		}
		if c.dir != "" {
			in.rootfs = filepath.Join(c.dir, "rootfs")
		}
		out = append(out, in)
	}
	return out
}

// fillUsage sets each input's usage: read in this process, or asked of
// the sandbox process (once for all of them) when one of them runs there.
// A sandbox process that does not answer leaves the last figures it gave.
func (r *Runtime) fillUsage(ctx context.Context, ins []statsInput) {
	ask := false
	for _, in := range ins {
		ask = ask || (in.table == nil && in.running)
	}
	if ask && r.sandbox != nil {
		got, err := r.sandbox.usage(ctx)
		if err != nil {
			klog.ErrorS(err, "The mock runtime's stats: its last figures of the sandbox process's containers")
		}
		for _, in := range ins {
			if u, ok := got[in.id]; ok {
				in.remote.merge(u)
			}
		}
	}
	for i := range ins {
		if ins[i].table != nil {
			ins[i].usage = ins[i].table.Usage()
		} else {
			ins[i].usage = ins[i].remote.get()
		}
	}
}

// remoteUsage is a container's usage as the sandbox process last reported
// it (its cumulative figures never go back).
type remoteUsage struct {
	mu   sync.Mutex
	last sandboxproc.ScriptUsage
}

func (u *remoteUsage) merge(v sandboxproc.ScriptUsage) {
	u.mu.Lock()
	defer u.mu.Unlock()
	v.CPU, v.Rx, v.Tx = max(v.CPU, u.last.CPU), max(v.Rx, u.last.Rx), max(v.Tx, u.last.Tx)
	u.last = v
}

func (u *remoteUsage) get() sandboxproc.ScriptUsage {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.last
}

// cpuRate is a container's (or sandbox's) CPU at the previous stats read,
// from which the next computes UsageNanoCores, as containerd's
// getUsageNanoCores does.
type cpuRate struct {
	mu   sync.Mutex
	seen bool
	cpu  uint64 // UsageCoreNanoSeconds then
	at   int64  // its timestamp
	last *uint64
}

// update returns the rate from the previous read to cpu at at, in
// nanocores, and keeps cpu and at for the next: nil on the first read; the
// previous rate when no time passed (or the clock went back).
func (c *cpuRate) update(cpu uint64, at int64) *runtimeapi.UInt64Value {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen && at <= c.at {
		if c.last == nil {
			return nil
		}
		return &runtimeapi.UInt64Value{Value: *c.last}
	}
	var rate *uint64
	if c.seen {
		v := uint64(0)
		if cpu > c.cpu {
			v = uint64(float64(cpu-c.cpu) / float64(at-c.at) * float64(time.Second))
		}
		rate = &v
	}
	c.seen, c.cpu, c.at, c.last = true, cpu, at, rate
	if rate == nil {
		return nil
	}
	return &runtimeapi.UInt64Value{Value: *rate}
}

// containerStats computes the stats of in at now (nanoseconds).
func containerStats(in statsInput, now int64) *runtimeapi.ContainerStats {
	bytes, inodes := diskUsage(in.rootfs)
	cpu := uint64(max(in.usage.CPU, 0))
	var workingSet, rss uint64
	if in.running {
		rss = uint64(max(in.usage.Mem, 0))
		workingSet = rss + bytes
	}
	return &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{Id: in.id, Metadata: in.meta, Labels: in.labels, Annotations: in.annotations},
		Cpu: &runtimeapi.CpuUsage{Timestamp: now,
			UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: cpu},
			UsageNanoCores:       in.rate.update(cpu, now)},
		Memory: &runtimeapi.MemoryUsage{Timestamp: now,
			WorkingSetBytes: &runtimeapi.UInt64Value{Value: workingSet},
			UsageBytes:      &runtimeapi.UInt64Value{Value: workingSet},
			RssBytes:        &runtimeapi.UInt64Value{Value: rss}},
		WritableLayer: &runtimeapi.FilesystemUsage{Timestamp: now,
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: in.rootfs},
			UsedBytes:  &runtimeapi.UInt64Value{Value: bytes},
			InodesUsed: &runtimeapi.UInt64Value{Value: inodes}},
	}
}

// diskUsage is the bytes and inodes under dir (0, 0 if it is gone).
func diskUsage(dir string) (bytes, inodes uint64) {
	if dir == "" {
		return 0, 0
	}
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // removed while walked: count what is left
		}
		inodes++
		if fi, err := d.Info(); err == nil && d.Type().IsRegular() {
			bytes += uint64(fi.Size())
		}
		return nil
	})
	return bytes, inodes
}

// ContainerStats answers one container's stats (`crictl stats <id>`).
func (r *Runtime) ContainerStats(ctx context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	r.mu.Lock()
	c, err := r.findContainer(req.GetContainerId())
	if err != nil {
		r.mu.Unlock()
		return nil, err
	}
	ins := r.statsInputs(func(x *container) bool { return x == c })
	r.mu.Unlock()
	r.fillUsage(ctx, ins)
	now := r.now()
	return &runtimeapi.ContainerStatsResponse{Stats: containerStats(ins[0], now)}, nil
}

// ListContainerStats answers the stats of the containers matching the
// filter (by ID, sandbox ID, labels; prefixes accepted), ordered by ID.
func (r *Runtime) ListContainerStats(ctx context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	f := req.GetFilter()
	r.mu.Lock()
	ins := r.statsInputs(func(c *container) bool {
		return strings.HasPrefix(c.id, f.GetId()) && strings.HasPrefix(c.sandboxID, f.GetPodSandboxId()) && labelsMatch(f.GetLabelSelector(), c.labels)
	})
	r.mu.Unlock()
	r.fillUsage(ctx, ins)
	now := r.now()
	resp := &runtimeapi.ListContainerStatsResponse{}
	for _, in := range sortByID(ins) {
		resp.Stats = append(resp.Stats, containerStats(in, now))
	}
	return resp, nil
}

func sortByID(ins []statsInput) []statsInput {
	slices.SortFunc(ins, func(a, b statsInput) int { return strings.Compare(a.id, b.id) })
	return ins
}

// sandboxStatsInput is a sandbox's attributes and its containers' inputs.
type sandboxStatsInput struct {
	attrs      *runtimeapi.PodSandboxAttributes
	rate       *cpuRate
	containers []statsInput
}

// sandboxStats sums its containers' stats.
func sandboxStats(in sandboxStatsInput, now int64) *runtimeapi.PodSandboxStats {
	var cpu, ws, rss, rx, tx, pids uint64
	var cs []*runtimeapi.ContainerStats
	for _, c := range sortByID(in.containers) {
		st := containerStats(c, now)
		cpu += st.Cpu.UsageCoreNanoSeconds.Value
		ws += st.Memory.WorkingSetBytes.Value
		rss += st.Memory.RssBytes.Value
		rx += uint64(max(c.usage.Rx, 0))
		tx += uint64(max(c.usage.Tx, 0))
		if c.running {
			pids += uint64(max(c.usage.Pids, 0))
		}
		cs = append(cs, st)
	}
	return &runtimeapi.PodSandboxStats{
		Attributes: in.attrs,
		Linux: &runtimeapi.LinuxPodSandboxStats{
			Cpu: &runtimeapi.CpuUsage{Timestamp: now,
				UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: cpu},
				UsageNanoCores:       in.rate.update(cpu, now)},
			Memory: &runtimeapi.MemoryUsage{Timestamp: now,
				WorkingSetBytes: &runtimeapi.UInt64Value{Value: ws},
				UsageBytes:      &runtimeapi.UInt64Value{Value: ws},
				RssBytes:        &runtimeapi.UInt64Value{Value: rss}},
			Network:    statsNetwork(now, rx, tx),
			Process:    &runtimeapi.ProcessUsage{Timestamp: now, ProcessCount: &runtimeapi.UInt64Value{Value: pids}},
			Containers: cs,
		},
	}
}

// statsNetwork is a sandbox's network usage: the bytes its containers'
// servers read and wrote on the pod network, as its eth0's. Every sandbox
// shares the runtime's one namespace and veth pair (podnet), whose
// counters are the sum of all pods: a pod's own bytes are counted at its
// servers' sockets instead (payload only, without the TCP/IP headers an
// interface counts). Without a pod network nothing listens: 0.
func statsNetwork(now int64, rx, tx uint64) *runtimeapi.NetworkUsage {
	iface := &runtimeapi.NetworkInterfaceUsage{Name: "eth0",
		RxBytes: &runtimeapi.UInt64Value{Value: rx}, RxErrors: &runtimeapi.UInt64Value{},
		TxBytes: &runtimeapi.UInt64Value{Value: tx}, TxErrors: &runtimeapi.UInt64Value{}}
	return &runtimeapi.NetworkUsage{Timestamp: now, DefaultInterface: iface}
}

// sandboxStatsInputs collects the inputs of the sandboxes keep accepts.
// Caller holds mu.
func (r *Runtime) sandboxStatsInputs(keep func(*sandbox) bool) []sandboxStatsInput {
	var out []sandboxStatsInput
	for _, s := range r.sandboxes {
		if !keep(s) {
			continue
		}
		out = append(out, sandboxStatsInput{
			attrs:      &runtimeapi.PodSandboxAttributes{Id: s.id, Metadata: s.meta, Labels: s.labels, Annotations: s.annotations},
			rate:       &s.cpuRate,
			containers: r.statsInputs(func(c *container) bool { return c.sandboxID == s.id }),
		})
	}
	slices.SortFunc(out, func(a, b sandboxStatsInput) int { return strings.Compare(a.attrs.Id, b.attrs.Id) })
	return out
}

// PodSandboxStats answers a sandbox's stats: its containers' summed.
func (r *Runtime) PodSandboxStats(ctx context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	r.mu.Lock()
	s, err := r.findSandbox(req.GetPodSandboxId())
	if err != nil {
		r.mu.Unlock()
		return nil, err
	}
	ins := r.sandboxStatsInputs(func(x *sandbox) bool { return x == s })
	r.mu.Unlock()
	r.fillSandboxUsage(ctx, ins)
	now := r.now()
	if len(ins) != 1 {
		return nil, status.Errorf(codes.Internal, "PodSandboxStats %s: lost the sandbox", short(s.id))
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: sandboxStats(ins[0], now)}, nil
}

// ListPodSandboxStats answers the stats of the sandboxes matching the
// filter (by ID prefix, labels), ordered by ID.
func (r *Runtime) ListPodSandboxStats(ctx context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	f := req.GetFilter()
	r.mu.Lock()
	ins := r.sandboxStatsInputs(func(s *sandbox) bool {
		return strings.HasPrefix(s.id, f.GetId()) && labelsMatch(f.GetLabelSelector(), s.labels)
	})
	r.mu.Unlock()
	r.fillSandboxUsage(ctx, ins)
	now := r.now()
	resp := &runtimeapi.ListPodSandboxStatsResponse{}
	for _, in := range ins {
		resp.Stats = append(resp.Stats, sandboxStats(in, now))
	}
	return resp, nil
}

// fillSandboxUsage fills the usage of the sandboxes' containers, with one
// request to the sandbox process for all of them.
func (r *Runtime) fillSandboxUsage(ctx context.Context, ins []sandboxStatsInput) {
	var all []statsInput
	for _, s := range ins {
		all = append(all, s.containers...)
	}
	r.fillUsage(ctx, all)
	i := 0
	for _, s := range ins {
		n := copy(s.containers, all[i:i+len(s.containers)])
		i += n
	}
}
