package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/cadvisor"
	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/kubetypes"
)

const (
	// MaxMsgSize is the largest answer the client accepts, 16 MiB, as the
	// kubelet's CRI client: a list of 10,000 containers is over gRPC's
	// default of 4 MiB.
	MaxMsgSize = 16 * 1024 * 1024
	// ConnectTimeout bounds the first Version call of Connect.
	ConnectTimeout = 10 * time.Second
	// DefaultRuntimeRequestTimeout bounds every CRI call, as the kubelet's
	// --runtime-request-timeout (2 min) does: a runtime that hangs makes the
	// call fail, and the caller (the PLEG's relist, a pod sync) log it,
	// instead of waiting for ever. RunPodSandbox gets twice as long,
	// StopContainer and ExecSync this plus their own timeout, and PullImage
	// no limit but the caller's, as upstream's CRI client does.
	DefaultRuntimeRequestTimeout = 2 * time.Minute
)

// The connection's back-off, as upstream's CRI client (k8s.io/cri-client,
// NewRemoteRuntimeService): after the runtime goes away, gRPC tries again
// after 100 ms, then longer, but never waits more than 3 s between tries, so
// calls work again within a few seconds of the runtime's return. (gRPC's own
// default grows to 120 s.)
const (
	baseBackoffDelay     = 100 * time.Millisecond
	maxBackoffDelay      = 3 * time.Second
	minConnectionTimeout = 5 * time.Second
)

// Option changes how Dial and Connect talk to the runtime.
type Option func(*dialOptions)

type dialOptions struct {
	requestTimeout time.Duration
}

// WithRuntimeRequestTimeout sets the per-call timeout (default
// DefaultRuntimeRequestTimeout); it must be positive.
func WithRuntimeRequestTimeout(d time.Duration) Option {
	return func(o *dialOptions) { o.requestTimeout = d }
}

// Manager talks to a CRI runtime and answers in mylib/container types
// (upstream's kubeGenericRuntimeManager). It implements container.Runtime
// and is safe for concurrent use. NewKubeGenericRuntimeManager builds it
// whole; nothing but SetLifecycleHTTPDial, before its first use, changes
// it afterwards.
type Manager struct {
	runtimeName string
	conn        *grpc.ClientConn // nil unless Connect opened it
	rs          runtimeapi.RuntimeServiceClient
	is          runtimeapi.ImageServiceClient
	clock       clock.Clock
	version     *runtimeapi.VersionResponse

	// What SyncPod and KillPod need besides the CRI.
	recorder         record.EventRecorder // nil drops the events
	helper           kubecontainer.RuntimeHelper
	podLogsDirectory string
	runtimeHandler   string
	livenessManager  ProbeResults // nil: no probes
	startupManager   ProbeResults
	imagePulls       imagePulls   // the image manager (kuberuntime_image.go)
	hookHTTP         *http.Client // httpGet hooks' client (SetLifecycleHTTPDial); nil: a plain one
	// allocationManager records the resources actuated for each
	// container (SetAllocationManager); nil: no in-place resize.
	allocationManager AllocationManager
	// containerManager resizes the pod's cgroup in an in-place resize
	// (SetContainerManager); nil: only the containers are resized.
	containerManager ContainerManager
	// machineInfo is the node's machine (SetMachineInfo): its memory
	// sets the containers' OOM score adjustment.
	machineInfo *cadvisor.MachineInfo
}

// Dial opens a gRPC connection to a CRI endpoint: "unix:///path/to.sock" or
// a plain socket path. The connection is lazy; Connect checks it. Every
// unary call on it gets a deadline (see DefaultRuntimeRequestTimeout), and
// it reconnects with a back-off capped at 3 s.
func Dial(endpoint string, opts ...Option) (*grpc.ClientConn, error) {
	o := dialOptions{requestTimeout: DefaultRuntimeRequestTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if o.requestTimeout <= 0 {
		return nil, fmt.Errorf("container runtime endpoint %s: the runtime request timeout must be positive, not %v", endpoint, o.requestTimeout)
	}
	target, err := grpcTarget(endpoint)
	if err != nil {
		return nil, err
	}
	params := grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: minConnectionTimeout}
	params.Backoff.BaseDelay = baseBackoffDelay
	params.Backoff.MaxDelay = maxBackoffDelay
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()), // a unix socket, guarded by file permissions
		grpc.WithConnectParams(params),
		grpc.WithUnaryInterceptor(requestTimeoutInterceptor(o.requestTimeout)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMsgSize), grpc.MaxCallSendMsgSize(MaxMsgSize)))
	if err != nil {
		return nil, fmt.Errorf("container runtime endpoint %s: %w", endpoint, err)
	}
	return conn, nil
}

// requestTimeoutInterceptor gives each unary CRI call the deadline
// callTimeout picks. Upstream sets it in each method of its CRI client; an
// interceptor does the same for every caller of the raw clients too.
func requestTimeoutInterceptor(timeout time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if d, ok := callTimeout(method, req, timeout); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// callTimeout is the deadline of one CRI call, given the runtime request
// timeout, as upstream's CRI client picks it; false means none but the
// caller's.
func callTimeout(method string, req any, timeout time.Duration) (time.Duration, bool) {
	switch method {
	case runtimeapi.ImageService_PullImage_FullMethodName:
		return 0, false // a big image takes as long as it takes
	case runtimeapi.RuntimeService_RunPodSandbox_FullMethodName:
		return 2 * timeout, true
	case runtimeapi.RuntimeService_StopContainer_FullMethodName:
		// Leave the grace period, then time for SIGKILL.
		grace, _ := req.(*runtimeapi.StopContainerRequest)
		return timeout + time.Duration(grace.GetTimeout())*time.Second, true
	case runtimeapi.RuntimeService_ExecSync_FullMethodName:
		r, _ := req.(*runtimeapi.ExecSyncRequest)
		if r.GetTimeout() == 0 {
			return 0, false // the command has no timeout, so neither has the call
		}
		return timeout + time.Duration(r.GetTimeout())*time.Second, true
	}
	return timeout, true
}

// grpcTarget turns an endpoint into a gRPC target "unix:///abs/path".
func grpcTarget(endpoint string) (string, error) {
	path, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok && strings.Contains(endpoint, "://") {
		return "", fmt.Errorf("container runtime endpoint %q: only unix:// endpoints are supported", endpoint)
	}
	if path == "" {
		return "", fmt.Errorf("container runtime endpoint %q: the socket path is empty", endpoint)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("container runtime endpoint %q: %w", endpoint, err)
	}
	return "unix://" + abs, nil
}

// Connect dials endpoint and asks the runtime its Version, so that a runtime
// that is not there is reported once, clearly. Close the Manager when done.
// The Manager lists, inspects, syncs and kills pods with no more than the
// CRI: no events, env values as written, no probes. The kubelet builds its
// own, whole, from the same clients (RuntimeService, ImageService) with
// NewKubeGenericRuntimeManager.
func Connect(ctx context.Context, endpoint string, clk clock.Clock, opts ...Option) (*Manager, error) {
	conn, err := Dial(endpoint, opts...)
	if err != nil {
		return nil, err
	}
	m, err := NewKubeGenericRuntimeManager(ctx, nil, nil, nil, "", nil, "", clk,
		runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("cannot reach the container runtime at %s: %w", endpoint, err)
	}
	m.conn = conn
	return m, nil
}

// NewKubeGenericRuntimeManager returns a Manager over the CRI clients
// runtimeService and imageService, with everything SyncPod and KillPod
// need (upstream's name; its arguments are upstream's that this kubelet
// uses):
//   - recorder receives the events on pods (Pulling, Created, Started,
//     Killing, the failures); nil drops them;
//   - livenessManager and startupManager are the prober's results: a
//     running container whose liveness or startup probe failed is killed
//     (and started again by the restart policy); nil: no probes;
//   - podLogsDirectory is where pods' log directories are made ("":
//     DefaultPodLogsDirectory);
//   - runtimeHelper computes each container's environment and mounts and
//     the pod's hostname and DNS; nil: literal env values only, no mounts,
//     the pod's name as hostname and the runtime's DNS;
//   - runtimeHandler is the CRI runtime handler of sandboxes ("": the
//     runtime's default).
//
// It asks the runtime its Version (within ConnectTimeout) to learn its
// name, the scheme of every ContainerID, as upstream does.
func NewKubeGenericRuntimeManager(ctx context.Context,
	recorder record.EventRecorder,
	livenessManager, startupManager ProbeResults,
	podLogsDirectory string,
	runtimeHelper kubecontainer.RuntimeHelper,
	runtimeHandler string,
	clk clock.Clock,
	runtimeService runtimeapi.RuntimeServiceClient,
	imageService runtimeapi.ImageServiceClient,
) (*Manager, error) {
	if runtimeService == nil || imageService == nil {
		return nil, errors.New("kuberuntime: NewKubeGenericRuntimeManager needs the runtime and image services")
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	if podLogsDirectory == "" {
		podLogsDirectory = DefaultPodLogsDirectory
	}
	if runtimeHelper == nil {
		runtimeHelper = literalHelper{}
	}
	m := &Manager{
		rs: runtimeService, is: imageService, clock: clk,
		recorder: recorder, helper: runtimeHelper, podLogsDirectory: podLogsDirectory, runtimeHandler: runtimeHandler,
		livenessManager: livenessManager, startupManager: startupManager,
	}
	vctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	defer cancel()
	v, err := m.rs.Version(vctx, &runtimeapi.VersionRequest{Version: "v1"})
	if err != nil {
		return nil, fmt.Errorf("CRI Version: %w", err)
	}
	if v.GetRuntimeName() == "" {
		return nil, errors.New("CRI Version: the runtime did not say its name")
	}
	m.version, m.runtimeName = v, v.GetRuntimeName()
	return m, nil
}

// Close closes the connection Connect opened.
func (m *Manager) Close() error {
	if m.conn == nil {
		return nil
	}
	return m.conn.Close()
}

// Type is the runtime's name, e.g. "containerd".
func (m *Manager) Type() string { return m.runtimeName }

// Version is the runtime's answer to Version when the Manager was made.
func (m *Manager) Version() *runtimeapi.VersionResponse { return m.version }

// RuntimeService is the raw CRI runtime client, for calls the Manager does not wrap.
func (m *Manager) RuntimeService() runtimeapi.RuntimeServiceClient { return m.rs }

// ImageService is the raw CRI image client.
func (m *Manager) ImageService() runtimeapi.ImageServiceClient { return m.is }

// GetPods lists sandboxes and containers (only READY and RUNNING ones unless
// all) and groups them by pod UID: sandboxes by their metadata, containers
// by the kubelet's labels. Pods come newest first, and in each pod sandboxes
// and containers newest first.
func (m *Manager) GetPods(ctx context.Context, all bool) ([]*kubecontainer.Pod, error) {
	sf := &runtimeapi.PodSandboxFilter{}
	cf := &runtimeapi.ContainerFilter{}
	if !all {
		sf.State = &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}
		cf.State = &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}
	}
	return m.listPods(ctx, sf, cf)
}

// GetPod returns one pod's sandboxes and containers, dead ones too, asking
// the runtime only for those labelled with its UID (as upstream's
// GetPodStatus lists them); a pod the runtime does not have comes back
// with nothing in it.
func (m *Manager) GetPod(ctx context.Context, uid types.UID) (*kubecontainer.Pod, error) {
	byUID := map[string]string{kubetypes.KubernetesPodUIDLabel: string(uid)}
	pods, err := m.listPods(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: byUID}, &runtimeapi.ContainerFilter{LabelSelector: byUID})
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		if p.ID == uid {
			return p, nil
		}
	}
	return &kubecontainer.Pod{ID: uid, Timestamp: m.clock.Now()}, nil
}

// listPods groups what the runtime lists with these filters by pod.
func (m *Manager) listPods(ctx context.Context, sf *runtimeapi.PodSandboxFilter, cf *runtimeapi.ContainerFilter) ([]*kubecontainer.Pod, error) {
	timestamp := m.clock.Now()
	sresp, err := m.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: sf})
	if err != nil {
		return nil, fmt.Errorf("CRI ListPodSandbox: %w", err)
	}
	// The runtime's order is not part of the CRI: sort newest first here.
	// (The fake runtime already sends that order, which sorts quickly.)
	sandboxes := sresp.GetItems()
	slices.SortFunc(sandboxes, func(a, b *runtimeapi.PodSandbox) int {
		return kubecontainer.NewestFirst(a.CreatedAt, a.Id, b.CreatedAt, b.Id)
	})

	// One pod per sandbox is the usual case: size the map and list for it.
	pods := make(map[types.UID]*kubecontainer.Pod, len(sandboxes))
	order := make([]*kubecontainer.Pod, 0, len(sandboxes))
	podFor := func(uid types.UID, name, namespace string) *kubecontainer.Pod {
		p, ok := pods[uid]
		if !ok {
			p = &kubecontainer.Pod{ID: uid, Name: name, Namespace: namespace, Timestamp: timestamp}
			pods[uid] = p
			order = append(order, p)
		}
		return p
	}
	for _, s := range sandboxes {
		if s.GetMetadata() == nil || s.GetId() == "" {
			continue // not a sandbox the kubelet could have made; upstream skips it too
		}
		p := podFor(types.UID(s.Metadata.Uid), s.Metadata.Name, s.Metadata.Namespace)
		p.Sandboxes = append(p.Sandboxes, m.sandboxToKubeContainer(s))
		if p.CreatedAt == 0 {
			p.CreatedAt = uint64(s.CreatedAt) // the newest sandbox's
		}
	}

	cresp, err := m.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: cf})
	if err != nil {
		return nil, fmt.Errorf("CRI ListContainers: %w", err)
	}
	containers := cresp.GetContainers()
	slices.SortFunc(containers, func(a, b *runtimeapi.Container) int {
		return kubecontainer.NewestFirst(a.CreatedAt, a.Id, b.CreatedAt, b.Id)
	})
	for _, c := range containers {
		if c.GetMetadata() == nil || c.GetId() == "" || c.GetImage() == nil {
			continue // upstream skips what it cannot convert
		}
		info := getContainerInfoFromLabels(c.Labels)
		p := podFor(info.PodUID, info.PodName, info.PodNamespace)
		p.Containers = append(p.Containers, m.toKubeContainer(c))
	}
	return order, nil
}

func (m *Manager) toKubeContainer(c *runtimeapi.Container) *kubecontainer.Container {
	imageID := c.ImageRef
	if c.ImageId != "" {
		imageID = c.ImageId
	}
	return &kubecontainer.Container{
		ID:           kubecontainer.ContainerID{Type: m.runtimeName, ID: c.Id},
		Name:         c.Metadata.Name,
		Image:        c.Image.Image,
		ImageID:      imageID,
		Hash:         getContainerInfoFromAnnotations(c.Annotations).Hash,
		State:        toKubeContainerState(c.State),
		PodSandboxID: c.PodSandboxId,
		CreatedAt:    c.CreatedAt,
	}
}

// sandboxToKubeContainer turns a sandbox into a Container, as upstream does,
// so the PLEG can watch sandboxes like containers: READY reads as running,
// anything else as exited.
func (m *Manager) sandboxToKubeContainer(s *runtimeapi.PodSandbox) *kubecontainer.Container {
	return &kubecontainer.Container{
		ID:           kubecontainer.ContainerID{Type: m.runtimeName, ID: s.Id},
		State:        SandboxToContainerState(s.State),
		PodSandboxID: s.Id,
		CreatedAt:    s.CreatedAt,
	}
}

// SandboxToContainerState maps a sandbox state to a container state.
func SandboxToContainerState(state runtimeapi.PodSandboxState) kubecontainer.State {
	switch state {
	case runtimeapi.PodSandboxState_SANDBOX_READY:
		return kubecontainer.ContainerStateRunning
	case runtimeapi.PodSandboxState_SANDBOX_NOTREADY:
		return kubecontainer.ContainerStateExited
	}
	return kubecontainer.ContainerStateUnknown
}

func toKubeContainerState(state runtimeapi.ContainerState) kubecontainer.State {
	switch state {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return kubecontainer.ContainerStateCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return kubecontainer.ContainerStateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return kubecontainer.ContainerStateExited
	}
	return kubecontainer.ContainerStateUnknown
}

// GetPodStatus asks the runtime for the status of each of the pod's
// sandboxes and containers. Something removed since GetPods listed it is
// skipped, not an error, as upstream. The status is stamped with the pod's
// Timestamp: it describes what GetPods saw then, no newer.
func (m *Manager) GetPodStatus(ctx context.Context, pod *kubecontainer.Pod) (*kubecontainer.PodStatus, error) {
	ps := &kubecontainer.PodStatus{ID: pod.ID, Name: pod.Name, Namespace: pod.Namespace, TimeStamp: pod.Timestamp}
	for i, s := range pod.Sandboxes {
		resp, err := m.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: s.ID.ID})
		if status.Code(err) == codes.NotFound {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("CRI PodSandboxStatus %s of pod %s/%s: %w", s.ID.ID, pod.Namespace, pod.Name, err)
		}
		st := resp.GetStatus()
		if st == nil {
			return nil, fmt.Errorf("CRI PodSandboxStatus %s of pod %s/%s: the runtime returned no status", s.ID.ID, pod.Namespace, pod.Name)
		}
		ps.SandboxStatuses = append(ps.SandboxStatuses, st)
		// Only the newest sandbox gives the pod its IPs, and only when ready.
		if i == 0 && st.State == runtimeapi.PodSandboxState_SANDBOX_READY && st.GetNetwork().GetIp() != "" {
			ps.IPs = append(ps.IPs, st.Network.Ip)
			for _, ip := range st.Network.AdditionalIps {
				ps.IPs = append(ps.IPs, ip.GetIp())
			}
		}
	}
	for _, c := range pod.Containers {
		resp, err := m.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.ID.ID})
		if status.Code(err) == codes.NotFound {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("CRI ContainerStatus %s of pod %s/%s: %w", c.ID.ID, pod.Namespace, pod.Name, err)
		}
		if resp.GetStatus() == nil {
			return nil, fmt.Errorf("CRI ContainerStatus %s of pod %s/%s: the runtime returned no status", c.ID.ID, pod.Namespace, pod.Name)
		}
		ps.ContainerStatuses = append(ps.ContainerStatuses, m.toKubeContainerStatus(resp.Status))
	}
	sort.SliceStable(ps.ContainerStatuses, func(i, j int) bool {
		return ps.ContainerStatuses[i].CreatedAt.After(ps.ContainerStatuses[j].CreatedAt)
	})
	return ps, nil
}

func (m *Manager) toKubeContainerStatus(s *runtimeapi.ContainerStatus) *kubecontainer.Status {
	annotated := getContainerInfoFromAnnotations(s.Annotations)
	imageID := s.ImageRef
	if s.ImageId != "" {
		imageID = s.ImageId
	}
	name := getContainerInfoFromLabels(s.Labels).ContainerName
	if name == "" {
		name = s.GetMetadata().GetName() // a container the kubelet did not label (e.g. made by crictl)
	}
	cs := &kubecontainer.Status{
		ID:           kubecontainer.ContainerID{Type: m.runtimeName, ID: s.Id},
		Name:         name,
		State:        toKubeContainerState(s.State),
		CreatedAt:    time.Unix(0, s.CreatedAt),
		Image:        s.GetImage().GetImage(),
		ImageID:      imageID,
		ImageRef:     s.ImageRef,
		Hash:         annotated.Hash,
		RestartCount: annotated.RestartCount,
		Resources:    toKubeContainerResources(s.GetResources()),
	}
	if s.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		cs.StartedAt = time.Unix(0, s.StartedAt) // it was started at least once
	}
	if s.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		cs.FinishedAt = time.Unix(0, s.FinishedAt)
		cs.ExitCode = int(s.ExitCode)
		cs.Reason = s.Reason
		cs.Message = s.Message
		// The termination message: the file's, or with
		// FallbackToLogsOnError after a failure the log's tail (not for a
		// container that could not even start: it has no log).
		fallbackToLogs := annotated.TerminationMessagePolicy == v1.TerminationMessageFallbackToLogsOnError &&
			cs.ExitCode != 0 && cs.Reason != "ContainerCannotRun"
		msg, checkLogs := getTerminationMessage(s, annotated.TerminationMessagePath, fallbackToLogs)
		if checkLogs {
			msg = readLastStringFromContainerLogs(s.GetLogPath())
		}
		if msg != "" {
			if cs.Message != "" {
				cs.Message += ": "
			}
			cs.Message += msg
		}
	}
	return cs
}
