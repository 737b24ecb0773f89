package fakeruntime

import (
	"context"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The stats are made up, but plausible and deterministic: a running
// container uses StatsCPUNanoCores of a core (so its CPU time grows with
// its run time) and a working set of StatsBaseWorkingSet plus what its
// files hold (a container's /tmp is memory-backed in many images); its
// writable layer is the real bytes and inodes on disk in its root.
const (
	// StatsCPUNanoCores is a running container's CPU use: 1% of a core.
	StatsCPUNanoCores = 10_000_000
	// StatsBaseWorkingSet is a running container's working set without
	// its files: 4 MiB.
	StatsBaseWorkingSet = 4 << 20
)

// statsInput is what a container's stats are computed from, copied under
// the lock so that the disk is walked without it.
type statsInput struct {
	id, sandboxID string
	meta          *runtimeapi.ContainerMetadata
	labels        map[string]string
	annotations   map[string]string
	running       bool
	runNanos      int64 // time run so far
	rootfs        string
}

// statsInputs returns the inputs of the containers that match keep.
// Caller holds mu.
func (r *Runtime) statsInputs(keep func(*container) bool) []statsInput {
	now := r.now()
	var out []statsInput
	for _, c := range r.containers {
		if !keep(c) {
			continue
		}
		in := statsInput{id: c.id, sandboxID: c.sandboxID, meta: c.meta, labels: c.labels, annotations: c.annotations}
		switch c.state {
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			in.running, in.runNanos = true, now-c.startedAt
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			if c.startedAt > 0 {
				in.runNanos = c.finishedAt - c.startedAt
			}
		}
		if c.dir != "" {
			in.rootfs = filepath.Join(c.dir, "rootfs")
		}
		out = append(out, in)
	}
	return out
}

// containerStats computes the stats of in at now (nanoseconds).
func containerStats(in statsInput, now int64) *runtimeapi.ContainerStats {
	bytes, inodes := diskUsage(in.rootfs)
	cpu := uint64(max(in.runNanos, 0)) / (1_000_000_000 / StatsCPUNanoCores)
	var nanoCores, workingSet uint64
	if in.running {
		nanoCores, workingSet = StatsCPUNanoCores, StatsBaseWorkingSet+bytes
	}
	return &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{Id: in.id, Metadata: in.meta, Labels: in.labels, Annotations: in.annotations},
		Cpu: &runtimeapi.CpuUsage{Timestamp: now,
			UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: cpu},
			UsageNanoCores:       &runtimeapi.UInt64Value{Value: nanoCores}},
		Memory: &runtimeapi.MemoryUsage{Timestamp: now,
			WorkingSetBytes: &runtimeapi.UInt64Value{Value: workingSet},
			UsageBytes:      &runtimeapi.UInt64Value{Value: workingSet},
			RssBytes:        &runtimeapi.UInt64Value{Value: workingSet / 2}},
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
func (r *Runtime) ContainerStats(_ context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	r.mu.Lock()
	c, err := r.findContainer(req.GetContainerId())
	if err != nil {
		r.mu.Unlock()
		return nil, err
	}
	ins := r.statsInputs(func(x *container) bool { return x == c })
	now := r.now()
	r.mu.Unlock()
	return &runtimeapi.ContainerStatsResponse{Stats: containerStats(ins[0], now)}, nil
}

// ListContainerStats answers the stats of the containers matching the
// filter (by ID, sandbox ID, labels; prefixes accepted), ordered by ID.
func (r *Runtime) ListContainerStats(_ context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	f := req.GetFilter()
	r.mu.Lock()
	ins := r.statsInputs(func(c *container) bool {
		return strings.HasPrefix(c.id, f.GetId()) && strings.HasPrefix(c.sandboxID, f.GetPodSandboxId()) && labelsMatch(f.GetLabelSelector(), c.labels)
	})
	now := r.now()
	r.mu.Unlock()
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
	containers []statsInput
}

// sandboxStats sums its containers' stats.
func sandboxStats(in sandboxStatsInput, now int64) *runtimeapi.PodSandboxStats {
	var cpu, nanoCores, ws uint64
	var cs []*runtimeapi.ContainerStats
	for _, c := range sortByID(in.containers) {
		st := containerStats(c, now)
		cpu += st.Cpu.UsageCoreNanoSeconds.Value
		nanoCores += st.Cpu.UsageNanoCores.Value
		ws += st.Memory.WorkingSetBytes.Value
		cs = append(cs, st)
	}
	return &runtimeapi.PodSandboxStats{
		Attributes: in.attrs,
		Linux: &runtimeapi.LinuxPodSandboxStats{
			Cpu: &runtimeapi.CpuUsage{Timestamp: now,
				UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: cpu},
				UsageNanoCores:       &runtimeapi.UInt64Value{Value: nanoCores}},
			Memory: &runtimeapi.MemoryUsage{Timestamp: now,
				WorkingSetBytes: &runtimeapi.UInt64Value{Value: ws},
				UsageBytes:      &runtimeapi.UInt64Value{Value: ws}},
			Network:    &runtimeapi.NetworkUsage{Timestamp: now, DefaultInterface: &runtimeapi.NetworkInterfaceUsage{Name: "eth0", RxBytes: &runtimeapi.UInt64Value{}, TxBytes: &runtimeapi.UInt64Value{}}},
			Process:    &runtimeapi.ProcessUsage{Timestamp: now, ProcessCount: &runtimeapi.UInt64Value{Value: uint64(countRunning(in.containers))}},
			Containers: cs,
		},
	}
}

func countRunning(ins []statsInput) int {
	n := 0
	for _, in := range ins {
		if in.running {
			n++
		}
	}
	return n
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
			containers: r.statsInputs(func(c *container) bool { return c.sandboxID == s.id }),
		})
	}
	slices.SortFunc(out, func(a, b sandboxStatsInput) int { return strings.Compare(a.attrs.Id, b.attrs.Id) })
	return out
}

// PodSandboxStats answers a sandbox's stats: its containers' summed.
func (r *Runtime) PodSandboxStats(_ context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	r.mu.Lock()
	s, err := r.findSandbox(req.GetPodSandboxId())
	if err != nil {
		r.mu.Unlock()
		return nil, err
	}
	ins := r.sandboxStatsInputs(func(x *sandbox) bool { return x == s })
	now := r.now()
	r.mu.Unlock()
	if len(ins) != 1 {
		return nil, status.Errorf(codes.Internal, "PodSandboxStats %s: lost the sandbox", short(s.id))
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: sandboxStats(ins[0], now)}, nil
}

// ListPodSandboxStats answers the stats of the sandboxes matching the
// filter (by ID prefix, labels), ordered by ID.
func (r *Runtime) ListPodSandboxStats(_ context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	f := req.GetFilter()
	r.mu.Lock()
	ins := r.sandboxStatsInputs(func(s *sandbox) bool {
		return strings.HasPrefix(s.id, f.GetId()) && labelsMatch(f.GetLabelSelector(), s.labels)
	})
	now := r.now()
	r.mu.Unlock()
	resp := &runtimeapi.ListPodSandboxStatsResponse{}
	for _, in := range ins {
		resp.Stats = append(resp.Stats, sandboxStats(in, now))
	}
	return resp, nil
}
