package container

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Runtime is the part of upstream's kubecontainer.Runtime this kubelet
// uses: the PLEG lists what runs and inspects one pod; the pod workers sync
// and kill pods. mylib/kuberuntime.Manager implements it over the CRI.
// Implementations must be safe for concurrent use.
type Runtime interface {
	// Type is the runtime's name, e.g. "containerd"; it is the scheme of
	// every ContainerID the runtime returns.
	Type() string
	// GetPods returns the sandboxes and containers grouped by pod. With
	// all=false only ready sandboxes and running containers are returned.
	GetPods(ctx context.Context, all bool) ([]*Pod, error)
	// GetPod returns one pod's sandboxes and containers, dead ones too (the
	// listing upstream's GetPodStatus(uid, name, namespace) begins with).
	GetPod(ctx context.Context, uid types.UID) (*Pod, error)
	// GetPodStatus returns the status of the pod's sandboxes and containers.
	GetPodStatus(ctx context.Context, pod *Pod) (*PodStatus, error)
	// SyncPod brings the runtime to the pod's spec: its sandbox, images,
	// init and regular containers, restarted after backOff (nil: at once).
	// pullSecrets are the pod's imagePullSecrets.
	SyncPod(ctx context.Context, pod *v1.Pod, podStatus *PodStatus, pullSecrets []v1.Secret, backOff *flowcontrol.Backoff) PodSyncResult
	// KillPod stops the running pod's containers (within
	// gracePeriodOverride seconds if set, else the pod's grace period; pod
	// may be nil) and its sandboxes.
	KillPod(ctx context.Context, pod *v1.Pod, runningPod Pod, gracePeriodOverride *int64) error
}

// Pod is a group of containers as the runtime sees it.
type Pod struct {
	// ID is the pod's UID, taken from the sandbox metadata or the
	// containers' labels.
	ID        types.UID
	Name      string
	Namespace string
	// CreatedAt is the creation time of the newest sandbox, in nanoseconds.
	CreatedAt uint64
	// Containers of the pod; with GetPods(all=true) exited ones too.
	Containers []*Container
	// Sandboxes of the pod, converted to Container, newest first.
	Sandboxes []*Container
	// Timestamp is when this Pod was read from the runtime.
	Timestamp time.Time
}

// FindContainerByName returns the container named containerName, or nil.
func (p *Pod) FindContainerByName(containerName string) *Container {
	for _, c := range p.Containers {
		if c.Name == containerName {
			return c
		}
	}
	return nil
}

// FindContainerByID returns the container with this ID, or nil.
func (p *Pod) FindContainerByID(id ContainerID) *Container {
	for _, c := range p.Containers {
		if c.ID == id {
			return c
		}
	}
	return nil
}

// FindSandboxByID returns the sandbox with this ID, or nil.
func (p *Pod) FindSandboxByID(id ContainerID) *Container {
	for _, c := range p.Sandboxes {
		if c.ID == id {
			return c
		}
	}
	return nil
}

// IsEmpty reports whether p is the zero Pod.
func (p *Pod) IsEmpty() bool {
	return p.ID == "" && p.Name == "" && p.Namespace == "" && len(p.Containers) == 0 && len(p.Sandboxes) == 0
}

// Pods is a list of runtime pods.
type Pods []*Pod

// FindPodByID returns the pod with this UID, or the zero Pod.
func (p Pods) FindPodByID(podUID types.UID) Pod {
	for _, pod := range p {
		if pod.ID == podUID {
			return *pod
		}
	}
	return Pod{}
}

// ContainerID identifies a container: the runtime's name and its own ID,
// written "containerd://0123abcd…".
type ContainerID struct {
	// Type is the runtime, e.g. "containerd".
	Type string
	// ID is the runtime's identifier of the container (or sandbox).
	ID string
}

// BuildContainerID returns the ContainerID of typ and id.
func BuildContainerID(typ, id string) ContainerID { return ContainerID{Type: typ, ID: id} }

// ParseContainerID parses "type://id".
func ParseContainerID(s string) (ContainerID, error) {
	typ, id, ok := strings.Cut(strings.Trim(s, `"`), "://")
	if !ok || typ == "" || id == "" {
		return ContainerID{}, fmt.Errorf("invalid container ID %q: want type://id", s)
	}
	return ContainerID{Type: typ, ID: id}, nil
}

// String returns "type://id", the form the API's ContainerStatus.ContainerID uses.
func (c ContainerID) String() string { return c.Type + "://" + c.ID }

// IsEmpty reports whether c is the zero ContainerID.
func (c ContainerID) IsEmpty() bool { return c == ContainerID{} }

// State is a container's state as the kubelet sees it.
type State string

// The container states, as upstream names them.
const (
	ContainerStateCreated State = "created"
	ContainerStateRunning State = "running"
	ContainerStateExited  State = "exited"
	// ContainerStateUnknown covers anything else, e.g. a container whose
	// status could not be read.
	ContainerStateUnknown State = "unknown"
)

// Container is one container (or sandbox) of a runtime Pod: just enough to
// notice that it changed.
type Container struct {
	ID   ContainerID
	Name string
	// Image is the image the container was created from.
	Image   string
	ImageID string
	// Hash of the container's spec, read from its annotations (0 if unknown).
	Hash  uint64
	State State
	// PodSandboxID is the sandbox the container runs in (empty for a sandbox).
	PodSandboxID string
	// CreatedAt in nanoseconds since the epoch.
	CreatedAt int64
}

// PodStatus is the status of one pod's sandboxes and containers as the
// runtime reports them.
type PodStatus struct {
	ID        types.UID
	Name      string
	Namespace string
	// IPs of the pod's newest ready sandbox.
	IPs []string
	// ContainerStatuses of all the pod's containers, newest first.
	ContainerStatuses []*Status
	// SandboxStatuses as the CRI returns them, newest first.
	SandboxStatuses []*runtimeapi.PodSandboxStatus
	// TimeStamp is when the status was read.
	TimeStamp time.Time
}

// FindContainerStatusByName returns the newest status of the container
// named containerName, or nil.
func (s *PodStatus) FindContainerStatusByName(containerName string) *Status {
	for _, cs := range s.ContainerStatuses {
		if cs.Name == containerName {
			return cs
		}
	}
	return nil
}

// GetRunningContainerStatuses returns the statuses of running containers.
func (s *PodStatus) GetRunningContainerStatuses() []*Status {
	var running []*Status
	for _, cs := range s.ContainerStatuses {
		if cs.State == ContainerStateRunning {
			running = append(running, cs)
		}
	}
	return running
}

// Status is the status of one container.
type Status struct {
	ID         ContainerID
	Name       string
	State      State
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	// ExitCode is meaningful once the container exited.
	ExitCode int
	Image    string
	ImageID  string
	ImageRef string
	Hash     uint64
	// RestartCount is read from the container's annotations, as the kubelet
	// counts restarts by the attempt number it wrote there.
	RestartCount int
	// Reason and Message explain the state, e.g. "Error", "Completed", "OOMKilled".
	// For an exited container Message ends with its termination message.
	Reason  string
	Message string
	// Resources are the CPU and memory the runtime reports it applies to
	// the container (its CRI ContainerStatus's resources), nil when it
	// reports none.
	Resources *ContainerResources
}

// ContainerResources are a container's resources as the runtime applies
// them, turned back into the API's quantities (upstream's type of the
// same name, without MemoryRequest, which no cgroup holds).
type ContainerResources struct {
	// CPURequest is from the CPU shares, CPULimit from the CFS quota and
	// period, MemoryLimit from the memory limit; each nil when unset.
	CPURequest  *resource.Quantity
	CPULimit    *resource.Quantity
	MemoryLimit *resource.Quantity
}

// The termination message's limits, upstream's.
const (
	// MaxContainerTerminationMessageLength is the most of a container's
	// termination-message file that is read: its last 4 KiB.
	MaxContainerTerminationMessageLength = 1024 * 4
	// MaxContainerTerminationMessageLogLength is the most of its log that
	// FallbackToLogsOnError takes: the last 2 KiB...
	MaxContainerTerminationMessageLogLength = 1024 * 2
	// MaxContainerTerminationMessageLogLines ...of its last 80 lines.
	MaxContainerTerminationMessageLogLines = 80
)
