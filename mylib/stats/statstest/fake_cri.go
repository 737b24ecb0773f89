// Package statstest is a fake container runtime for the stats package's
// tests and benchmarks: the CRI calls a summary makes (ListPodSandbox,
// ListContainers, ListPodSandboxStats, ImageFsInfo), answered from figures
// the test sets. Every other CRI call panics (the embedded interfaces are
// nil), so a test notices a call it did not expect. Unlike upstream's
// pkg/kubelet/testing fakes it keeps only what a summary reads.
package statstest

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Container is one container's figures, as the runtime reports them.
type Container struct {
	Name string
	// State: the zero value is CONTAINER_CREATED; tests set RUNNING.
	State     runtimeapi.ContainerState
	CreatedAt int64
	// CPU is the cumulative CPU time (UsageCoreNanoSeconds); NanoCores,
	// when not nil, the runtime's own rate.
	CPU       uint64
	NanoCores *uint64
	// WorkingSet is the memory figure (WorkingSetBytes, UsageBytes).
	WorkingSet uint64
	// Rootfs is the writable layer's directory (its FsId mountpoint) and
	// its usage.
	Rootfs                    string
	RootfsBytes, RootfsInodes uint64
}

// Sandbox is one pod's sandbox and its containers.
type Sandbox struct {
	ID         string
	Pod        *v1.Pod
	State      runtimeapi.PodSandboxState
	CreatedAt  int64
	Containers []Container
	// RxBytes and TxBytes are its interface's counters; Processes its
	// process count.
	RxBytes, TxBytes, Processes uint64
}

// Runtime is the fake runtime service.
type Runtime struct {
	runtimeapi.RuntimeServiceClient

	mu        sync.Mutex
	sandboxes []*Sandbox
	now       int64 // every figure's timestamp (SetNow)
	err       error // ListPodSandboxStats's answer (SetError)
}

// NewRuntime is an empty runtime.
func NewRuntime() *Runtime { return &Runtime{} }

// SetNow sets the timestamp of the figures (Unix nanoseconds).
func (r *Runtime) SetNow(ns int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.now = ns
}

// SetError makes ListPodSandboxStats fail with err (nil: succeed).
func (r *Runtime) SetError(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

// Add adds a sandbox (its ID defaults to "sandbox-<pod UID>").
func (r *Runtime) Add(s Sandbox) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.ID == "" {
		s.ID = "sandbox-" + string(s.Pod.UID)
	}
	r.sandboxes = append(r.sandboxes, &s)
}

// Update changes a sandbox's figures under the lock.
func (r *Runtime) Update(id string, f func(*Sandbox)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.sandboxes {
		if s.ID == id {
			f(s)
			return
		}
	}
	panic(fmt.Sprintf("statstest: no sandbox %q", id))
}

func containerID(s *Sandbox, c Container) string { return s.ID + "/" + c.Name }

// ListPodSandbox answers every sandbox.
func (r *Runtime) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest, ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	resp := &runtimeapi.ListPodSandboxResponse{}
	for _, s := range r.sandboxes {
		resp.Items = append(resp.Items, &runtimeapi.PodSandbox{
			Id:        s.ID,
			Metadata:  &runtimeapi.PodSandboxMetadata{Name: s.Pod.Name, Namespace: s.Pod.Namespace, Uid: string(s.Pod.UID)},
			State:     s.State,
			CreatedAt: s.CreatedAt,
		})
	}
	return resp, nil
}

// ListContainers answers every container.
func (r *Runtime) ListContainers(context.Context, *runtimeapi.ListContainersRequest, ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	resp := &runtimeapi.ListContainersResponse{}
	for _, s := range r.sandboxes {
		for _, c := range s.Containers {
			resp.Containers = append(resp.Containers, &runtimeapi.Container{
				Id:           containerID(s, c),
				PodSandboxId: s.ID,
				Metadata:     &runtimeapi.ContainerMetadata{Name: c.Name},
				State:        c.State,
				CreatedAt:    c.CreatedAt,
			})
		}
	}
	return resp, nil
}

// ListPodSandboxStats answers each sandbox's figures: its containers'
// and their sums, as a runtime that reads one cgroup per pod.
// PodSandboxStats is ListPodSandboxStats's answer for one sandbox.
func (r *Runtime) PodSandboxStats(ctx context.Context, req *runtimeapi.PodSandboxStatsRequest, _ ...grpc.CallOption) (*runtimeapi.PodSandboxStatsResponse, error) {
	resp, err := r.ListPodSandboxStats(ctx, nil)
	if err != nil {
		return nil, err
	}
	for _, st := range resp.Stats {
		if st.GetAttributes().GetId() == req.GetPodSandboxId() {
			return &runtimeapi.PodSandboxStatsResponse{Stats: st}, nil
		}
	}
	return nil, fmt.Errorf("sandbox %q not found", req.GetPodSandboxId())
}

func (r *Runtime) ListPodSandboxStats(context.Context, *runtimeapi.ListPodSandboxStatsRequest, ...grpc.CallOption) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	u := func(v uint64) *runtimeapi.UInt64Value { return &runtimeapi.UInt64Value{Value: v} }
	resp := &runtimeapi.ListPodSandboxStatsResponse{}
	sorted := append([]*Sandbox(nil), r.sandboxes...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	for _, s := range sorted {
		var cpu, ws uint64
		var cs []*runtimeapi.ContainerStats
		for _, c := range s.Containers {
			cpu += c.CPU
			ws += c.WorkingSet
			st := &runtimeapi.ContainerStats{
				Attributes: &runtimeapi.ContainerAttributes{Id: containerID(s, c), Metadata: &runtimeapi.ContainerMetadata{Name: c.Name}},
				Cpu:        &runtimeapi.CpuUsage{Timestamp: r.now, UsageCoreNanoSeconds: u(c.CPU)},
				Memory:     &runtimeapi.MemoryUsage{Timestamp: r.now, WorkingSetBytes: u(c.WorkingSet), UsageBytes: u(c.WorkingSet)},
				WritableLayer: &runtimeapi.FilesystemUsage{Timestamp: r.now,
					FsId:      &runtimeapi.FilesystemIdentifier{Mountpoint: c.Rootfs},
					UsedBytes: u(c.RootfsBytes), InodesUsed: u(c.RootfsInodes)},
			}
			if c.NanoCores != nil {
				st.Cpu.UsageNanoCores = u(*c.NanoCores)
			}
			cs = append(cs, st)
		}
		resp.Stats = append(resp.Stats, &runtimeapi.PodSandboxStats{
			Attributes: &runtimeapi.PodSandboxAttributes{Id: s.ID,
				Metadata: &runtimeapi.PodSandboxMetadata{Name: s.Pod.Name, Namespace: s.Pod.Namespace, Uid: string(s.Pod.UID)}},
			Linux: &runtimeapi.LinuxPodSandboxStats{
				Cpu:    &runtimeapi.CpuUsage{Timestamp: r.now, UsageCoreNanoSeconds: u(cpu)},
				Memory: &runtimeapi.MemoryUsage{Timestamp: r.now, WorkingSetBytes: u(ws), UsageBytes: u(ws)},
				Network: &runtimeapi.NetworkUsage{Timestamp: r.now, DefaultInterface: &runtimeapi.NetworkInterfaceUsage{
					Name: "eth0", RxBytes: u(s.RxBytes), TxBytes: u(s.TxBytes)}},
				Process:    &runtimeapi.ProcessUsage{Timestamp: r.now, ProcessCount: u(s.Processes)},
				Containers: cs,
			},
		})
	}
	return resp, nil
}

// Images is the fake image service: ImageFsInfo only.
type Images struct {
	runtimeapi.ImageServiceClient
	// Mountpoint, UsedBytes and InodesUsed are the image filesystem's.
	Mountpoint            string
	UsedBytes, InodesUsed uint64
}

// ImageFsInfo answers the image filesystem.
func (i *Images) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest, ...grpc.CallOption) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: i.Mountpoint},
		UsedBytes:  &runtimeapi.UInt64Value{Value: i.UsedBytes},
		InodesUsed: &runtimeapi.UInt64Value{Value: i.InodesUsed},
	}}}, nil
}
