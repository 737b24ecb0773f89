package fakeruntime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/fakeruntime/podnet"
	"mykubelet/mylib/fakeruntime/sandboxproc"
)

// What Version reports.
const (
	// RuntimeName is the runtime's name; the kubelet uses it as the scheme of
	// container IDs ("mykubelet-fake://<id>").
	RuntimeName = "mykubelet-fake"
	// RuntimeVersion is this runtime's version.
	RuntimeVersion = "0.1.0"
	// RuntimeAPIVersion is the CRI version it speaks.
	RuntimeAPIVersion = "v1"
)

// Exit codes and reasons, as containerd reports them.
const (
	// ReasonCompleted is the reason of a container that exited with code 0.
	ReasonCompleted = "Completed"
	// ReasonError is the reason of a container that exited with another code.
	ReasonError = "Error"
)

// Runtime is the in-memory CRI runtime. It implements
// runtimeapi.RuntimeServiceServer and runtimeapi.ImageServiceServer and is
// safe for concurrent use: every call takes one lock, and never holds it
// while a container's script runs or while it waits. Answers share with the
// runtime's records only what never changes after creation (metadata,
// labels, annotations, and the list items of listItem), so callers in the
// same process must treat answers as read-only; gRPC callers get their own
// copy anyway.
type Runtime struct {
	// The embedded servers answer Unimplemented for every call this runtime
	// does not define (the streaming lists StreamContainers, …).
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	clock         clock.Clock
	shutdownGrace time.Duration
	pullLatency   time.Duration
	pullBandwidth int64
	podPidsLimit  int64
	memory        int64    // Config.MemoryCapacity
	mountRoots    []string // Config.MountRoots, clean

	mu         sync.Mutex
	stateDir   string // "" until the first container needs it (see containersDir)
	tempState  bool   // stateDir is a temporary directory of ours: Close removes it
	sandboxes  map[string]*sandbox
	containers map[string]*container
	images     map[string]*image // by image ID
	ips        *podnet.IPAllocator

	// Indexes, so that no call costs more than a list of everything:
	// names reserves each sandbox's and container's name, as containerd
	// does; imageNames maps tags and digests to image IDs.
	names      map[string]string
	imageNames map[string]string

	// streams is the streaming server of Exec and Attach (streaming.go).
	streams streamServer

	// events are the GetContainerEvents subscriptions (cri_events.go).
	events containerEvents

	// testHookStopWaiting, if set, is called when StopContainer starts
	// waiting out its timeout.
	testHookStopWaiting func()
	// testHookUnlocked, if set, is called where RunPodSandbox and
	// CreateContainer work without the lock ("sandbox", "container").
	testHookUnlocked func(what string)

	// The pod network (podnet.Network): nil without Config.PodNetwork or
	// when it could not be made (netErr says why). net never changes
	// once NewRuntime has made it; netErr and netWaits change under mu:
	// a network whose first range was taken waits, with no range, for
	// the node's pod CIDR (netWaits; netErr wraps ErrPodNetworkWaits),
	// and RunPodSandbox fails until UpdateRuntimeConfig brings it.
	net      *podnet.Network
	netErr   error
	netWaits bool

	// sandbox runs the containers' scripts in a process of their own
	// (sandboxproc.go); nil: they run in this one.
	sandbox *sandboxProcess
}

// DefaultPodCIDR is the range sandbox IPs come from: containerd's default
// bridge network. The addresses are only written into the runtime's
// answers; nothing ever listens on or connects to them.
const DefaultPodCIDR = "10.88.0.0/16"

// DefaultShutdownGrace is how long Serve lets calls in flight finish.
const DefaultShutdownGrace = 5 * time.Second

// Config configures a Runtime; every field has a default.
type Config struct {
	// Clock is where time comes from (default: the real clock).
	Clock clock.Clock
	// StateDir holds a directory per container, its root file system
	// (default: a temporary directory, created when first needed and
	// removed by Close).
	StateDir string
	// PodCIDR is the range of sandbox IPs (default DefaultPodCIDR).
	PodCIDR string
	// ShutdownGrace is how long Serve lets calls in flight finish before it
	// cuts them (default DefaultShutdownGrace).
	ShutdownGrace time.Duration
	// PullLatency is the round trip to the registry that every PullImage
	// pays, on the runtime's clock, even for an image it has: containerd
	// asks the registry what a tag points at now (default 0: none).
	PullLatency time.Duration
	// PullBandwidth is how fast, in bytes per second of the runtime's
	// clock, a missing image's bytes arrive (default 0: at once).
	PullBandwidth int64
	// PodPidsLimit is how many processes each container may run at once
	// (the kubelet's podPidsLimit; here per container): its script, its
	// execs, their utilities and background jobs. 0 is
	// DefaultPodPidsLimit, -1 unlimited.
	PodPidsLimit int64
	// MemoryCapacity is the node's memory in bytes (the mock machine's,
	// cadvisor.MockMachine): a container whose config sets no memory
	// limit is OOM-killed past it, as the node's memory bounds a real one.
	// 0: DefaultContainerMemory bounds it.
	MemoryCapacity int64
	// PodNetwork makes the sandboxes' IPs reachable from the host, in a
	// network namespace of the runtime's own (mylib/fakeruntime/podnet),
	// so that the images' servers answer probes and curl. It needs root;
	// without them the runtime runs without it (PodNetworkError says why).
	PodNetwork bool
	// Isolation says where container scripts run (default IsolationAuto:
	// in the sandbox process when the runtime is root on the real clock).
	Isolation Isolation
	// MountRoots are the only host directories a CRI mount's host path may
	// be in (absolute; the kubelet's wiring passes its root directory's
	// pods and host directories). A mount whose host path, symlinks
	// resolved, is anywhere else is refused (cri_mounts.go). nil: every
	// mount is refused.
	MountRoots []string
}

// Pulls as long as a real one, for a runtime on the real clock (unit tests
// on a fake clock keep the default: pulls take no time).
const (
	// TypicalPullLatency is a round trip to a registry across the internet.
	TypicalPullLatency = 50 * time.Millisecond
	// TypicalPullBandwidth is a good home connection: 100 MiB/s.
	TypicalPullBandwidth = 100 << 20
)

// NewRuntime returns an empty runtime configured by cfg.
func NewRuntime(cfg Config) (*Runtime, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.PodCIDR == "" {
		cfg.PodCIDR = DefaultPodCIDR
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	ips, err := podnet.NewIPAllocator(cfg.PodCIDR)
	if err != nil {
		return nil, err
	}
	var roots []string
	for _, root := range cfg.MountRoots {
		if !filepath.IsAbs(root) {
			return nil, fmt.Errorf("mount root %q is not an absolute path", root)
		}
		root = filepath.Clean(root)
		if containers := filepath.Join(filepath.Clean(cfg.StateDir), "containers"); cfg.StateDir != "" && (within(root, containers) || within(containers, root)) {
			return nil, fmt.Errorf("mount root %q holds the runtime's containers or is in them", root)
		}
		roots = append(roots, root)
	}
	r := &Runtime{
		clock:         cfg.Clock,
		shutdownGrace: cfg.ShutdownGrace,
		pullLatency:   max(cfg.PullLatency, 0),
		pullBandwidth: max(cfg.PullBandwidth, 0),
		podPidsLimit:  cfg.PodPidsLimit,
		memory:        max(cfg.MemoryCapacity, 0),
		mountRoots:    roots,
		stateDir:      cfg.StateDir,
		sandboxes:     map[string]*sandbox{},
		containers:    map[string]*container{},
		images:        map[string]*image{},
		ips:           ips,
		names:         map[string]string{},
		imageNames:    map[string]string{},
		netErr:        ErrNoPodNetwork,
	}
	if cfg.PodNetwork {
		r.net, r.netErr = podnet.New(ips.Prefix())
		r.waitForPodCIDR()
	}
	if useSandboxProcess(cfg.Isolation, cfg.Clock) {
		r.sandbox = newSandboxProcess(r.net)
	}
	return r, nil
}

// PodNetworkError is nil when the sandboxes' IPs are reachable from the
// host (Config.PodNetwork, made), else why not, in one sentence; while
// the network waits for the node's pod CIDR, an error that wraps
// ErrPodNetworkWaits (nil once UpdateRuntimeConfig has built it).
func (r *Runtime) PodNetworkError() error { r.mu.Lock(); defer r.mu.Unlock(); return r.netErr }

// PodCIDR is the range new sandboxes' IPs come from (UpdateRuntimeConfig changes it).
func (r *Runtime) PodCIDR() netip.Prefix { r.mu.Lock(); defer r.mu.Unlock(); return r.ips.Prefix() }

// New returns an empty runtime that reads time from clk, with the defaults
// of Config. Call Close when done with it.
func New(clk clock.Clock) *Runtime {
	r, err := NewRuntime(Config{Clock: clk})
	if err != nil {
		panic(err) // the default configuration is valid
	}
	return r
}

// Close kills every container, ends every GetContainerEvents call (a new
// one ends at once) and, if the state directory is a temporary one of the
// runtime's, removes it. The runtime keeps answering, empty of processes;
// Serve calls Close when it stops.
func (r *Runtime) Close() error {
	r.closeStreams()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.containers {
		r.kill(c)
		c.closeFiles()
	}
	r.stopContainerEvents()
	if r.sandbox != nil {
		r.sandbox.close()
	}
	if r.net != nil {
		r.net.Close()
	}
	if r.tempState && r.stateDir != "" {
		err := os.RemoveAll(r.stateDir)
		r.stateDir, r.tempState = "", false
		return err
	}
	return nil
}

// sandbox is the runtime's record of a pod sandbox. Metadata, labels and
// annotations never change after RunPodSandbox, so answers may share them.
type sandbox struct {
	id             string
	meta           *runtimeapi.PodSandboxMetadata
	labels         map[string]string
	annotations    map[string]string
	state          runtimeapi.PodSandboxState
	createdAt      int64
	ip             string
	hostname       string
	resolvConf     string // its containers' /etc/resolv.conf ("": none)
	runtimeHandler string
	logDir         string
	// cgroupParent is the config's Linux.CgroupParent, the pod's cgroup
	// (mylib/cm): recorded and shown (PodSandboxStatus's verbose info),
	// not used: the mock's processes stay in the kubelet's cgroup.
	cgroupParent string
	containers   map[string]*container

	// item is the sandbox as ListPodSandbox answers it, built once and
	// shared by every answer (see listItem).
	item *runtimeapi.PodSandbox

	cpuRate cpuRate // its CPU at the previous stats read (cri_stats.go)

	// pidns is the pod's PID namespace, made for its first container
	// that shares it (shareProcessNamespace: NamespaceMode POD).
	pidns *sandboxproc.PidNamespace
}

// nameKey is the sandbox's reserved name: one sandbox per pod and attempt.
func (s *sandbox) nameKey() string {
	return fmt.Sprintf("sandbox/%s/%s/%s/%d", s.meta.GetNamespace(), s.meta.GetName(), s.meta.GetUid(), s.meta.GetAttempt())
}

// container is the runtime's record of a container. Metadata, image, labels
// and annotations never change after CreateContainer.
type container struct {
	id          string
	sandboxID   string
	meta        *runtimeapi.ContainerMetadata
	image       *runtimeapi.ImageSpec
	imageID     string
	labels      map[string]string
	annotations map[string]string
	logPath     string

	// What it runs: a script for the interpreter, with its positional
	// parameters, in its root directory with its environment.
	script   string
	params   []string
	env      []string
	hostname string
	workDir  string                   // WorkingDir, made at creation
	mounts   []*runtimeapi.Mount      // as asked, for ContainerStatus
	mapped   []sandboxproc.MountSpec  // the mounts as the runtime maps them (cri_mounts.go)
	running  sandboxproc.ProcTable    // the utilities running in it (pgrep)
	fault    sandboxproc.FaultSwitch  // the control API makes its servers fail (shell_servers.go)
	dir      string                   // on the host: the container's directory; rootfs is in it
	fs       *sandboxproc.ContainerFS // its "/" and its mounts (shell_fs.go); nil once removed
	log      *logFile

	// resources are its memory and CPU limits as the CRI gave them, at
	// CreateContainer or since UpdateContainerResources; replaced, never
	// changed in place (ContainerStatus shares them).
	resources *runtimeapi.LinuxContainerResources

	state      runtimeapi.ContainerState
	createdAt  int64
	startedAt  int64
	finishedAt int64
	exitCode   int32
	reason     string

	// proc is the running script; cancel kills it; done is closed once it
	// returned and its exit is recorded.
	proc   process
	cancel context.CancelFunc
	done   chan struct{}

	// item is the container as ListContainers answers it, built once and
	// shared by every answer (see listItem).
	item *runtimeapi.Container

	// What the stats need (cri_stats.go): its usage as the sandbox
	// process last reported it, and its CPU at the previous read.
	remote  remoteUsage
	cpuRate cpuRate

	// io is its stdin and its live output to attached sessions
	// (streaming_attach.go); interactive: its main process is a shell
	// reading its commands from that stdin.
	io          *containerIO
	interactive bool
	pidTarget   string // the container whose PID namespace it shares (NamespaceMode TARGET)
	podPID      bool   // it shares its pod's PID namespace (NamespaceMode POD)
	// process is the command line ps lists its main process as, nil if
	// it is a single command (pid_namespace.go); programs are its image's
	// only programs, nil if it has a shell (cri_exec.go).
	process  []string
	programs []string
}

// containerNameKey is a container's reserved name: one container per name
// and attempt in a sandbox.
func containerNameKey(sandboxID string, m *runtimeapi.ContainerMetadata) string {
	return fmt.Sprintf("container/%s/%s/%d", sandboxID, m.GetName(), m.GetAttempt())
}

// addSandbox records s. Caller holds mu.
func (r *Runtime) addSandbox(s *sandbox) {
	s.containers = map[string]*container{}
	r.sandboxes[s.id] = s
	r.names[s.nameKey()] = s.id
}

// removeSandbox stops s if it is ready, as containerd's RemovePodSandbox
// does (stopSandbox frees its IP), and forgets it and its containers.
// Caller holds mu.
func (r *Runtime) removeSandbox(s *sandbox) {
	r.stopSandbox(s)
	for _, c := range s.containersOldestFirst() {
		r.removeContainer(c)
	}
	if r.sandbox != nil {
		r.sandbox.removePod(s.id) // its process, user and cgroup
	}
	delete(r.names, s.nameKey())
	delete(r.sandboxes, s.id)
	r.sandboxEvent(runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, s) // after its containers'
}

// addContainer records c in sandbox s. Caller holds mu.
func (r *Runtime) addContainer(s *sandbox, c *container) {
	r.containers[c.id] = c
	s.containers[c.id] = c
	r.names[containerNameKey(s.id, c.meta)] = c.id
}

// removeContainer kills c, deletes its directory and forgets it. Caller
// holds mu.
func (r *Runtime) removeContainer(c *container) {
	r.kill(c)
	c.io.closeStdin()
	c.closeFiles()
	if c.dir != "" {
		_ = os.RemoveAll(c.dir) // what cannot be removed stays in the state directory, harmless
	}
	s := r.sandboxes[c.sandboxID]
	if s != nil {
		delete(s.containers, c.id)
	}
	delete(r.names, containerNameKey(c.sandboxID, c.meta))
	delete(r.containers, c.id)
	r.generateAndSendContainerEvent(runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, s, c.id)
}

// closeFiles closes c's root, its mounts and its log. Caller holds mu.
func (c *container) closeFiles() {
	if c.fs != nil {
		c.fs.Close()
		c.fs = nil
	}
	if c.log != nil {
		c.log.close()
	}
}

// newID returns a random 64-hex-digit ID, like containerd's.
func newID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// now is the current time in nanoseconds, the unit of CRI timestamps.
func (r *Runtime) now() int64 { return r.clock.Now().UnixNano() }

// process is a container's running script: a proc in this process, or a
// remoteRun in the sandbox process.
type process interface {
	Sigterm() bool
}

// start runs c's script in a goroutine. Caller holds mu.
func (r *Runtime) start(c *container) error {
	c.state = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.startedAt = r.now()
	stdout, stderr := c.log.stream(StreamStdout), c.log.stream(StreamStderr)
	in, out, errw := c.io.processIO(stdout, stderr)
	if r.sandbox != nil {
		return r.startInSandbox(c, in, out, errw, stdout, stderr)
	}
	p := sandboxproc.NewProc(scriptClock{r.clock}, c.fs, c.hostname, c.env, out, errw, &c.running)
	p.WorkDir = c.workDir
	p.Net = r.containerNet(c)
	p.Stdin = in
	p.Process = c.process
	ctx, cancel := context.WithCancel(context.Background())
	c.proc, c.cancel, c.done = p, cancel, make(chan struct{})
	done := c.done
	interactive, prompt := c.interactive && in != nil, c.prompt()
	go func() {
		var code int
		if interactive {
			code = p.Interactive(ctx, in, prompt)
		} else {
			code = p.Run(ctx, c.script, c.params)
		}
		stdout.flush()
		stderr.flush()
		r.mu.Lock()
		if c.proc == p && c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
			c.exit(r.now(), int32(code))
			r.containerEvent(runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, c)
		}
		r.mu.Unlock()
		cancel()
		close(done)
	}()
	return nil
}

// exit marks c exited at at with code.
func (c *container) exit(at int64, code int32) {
	c.state = runtimeapi.ContainerState_CONTAINER_EXITED
	c.io.closeStdin() // nothing reads it any more
	c.finishedAt = at
	c.exitCode = code
	c.reason = ReasonError
	if code == 0 {
		c.reason = ReasonCompleted
	}
	if c.running.Killed() {
		c.exitCode, c.reason = ExitCodeSIGKILL, ReasonOOMKilled
	}
}

// kill ends a running container with SIGKILL now: it is EXITED with 137 at
// once, and its script is cancelled (its goroutine ends on its own).
// Caller holds mu.
func (r *Runtime) kill(c *container) {
	if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
		c.exit(r.now(), ExitCodeSIGKILL)
		r.containerEvent(runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, c)
	}
	if c.cancel != nil {
		c.cancel()
	}
}

// containersDir returns the directory that holds the containers'
// directories, creating the state directory if needed. Caller holds mu.
func (r *Runtime) containersDir() (string, error) {
	if r.stateDir == "" {
		dir, err := os.MkdirTemp("", "fakeruntime-")
		if err != nil {
			return "", err
		}
		r.stateDir, r.tempState = dir, true
	}
	dir := filepath.Join(r.stateDir, "containers")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

// findSandbox returns the sandbox whose ID is id or starts with id, as
// containerd accepts a unique ID prefix. Caller holds mu.
func (r *Runtime) findSandbox(id string) (*sandbox, error) {
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "pod sandbox ID is empty")
	}
	if s, ok := r.sandboxes[id]; ok {
		return s, nil
	}
	var found *sandbox
	for sid, s := range r.sandboxes {
		if strings.HasPrefix(sid, id) {
			if found != nil {
				return nil, status.Errorf(codes.InvalidArgument, "pod sandbox ID prefix %q is ambiguous", id)
			}
			found = s
		}
	}
	if found == nil {
		return nil, status.Errorf(codes.NotFound, "pod sandbox %q not found", id)
	}
	return found, nil
}

// findContainer is findSandbox for containers. Caller holds mu.
func (r *Runtime) findContainer(id string) (*container, error) {
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "container ID is empty")
	}
	if c, ok := r.containers[id]; ok {
		return c, nil
	}
	var found *container
	for cid, c := range r.containers {
		if strings.HasPrefix(cid, id) {
			if found != nil {
				return nil, status.Errorf(codes.InvalidArgument, "container ID prefix %q is ambiguous", id)
			}
			found = c
		}
	}
	if found == nil {
		return nil, status.Errorf(codes.NotFound, "container %q not found", id)
	}
	return found, nil
}

// containersOf returns the sandbox's containers, oldest first. Caller holds mu.
func (r *Runtime) containersOf(sandboxID string) []*container {
	s := r.sandboxes[sandboxID]
	if s == nil {
		return nil
	}
	cs := make([]*container, 0, len(s.containers))
	for _, c := range s.containers {
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].createdAt < cs[j].createdAt })
	return cs
}

// podName is "namespace/name" of a sandbox.
func (s *sandbox) podName() string { return s.meta.GetNamespace() + "/" + s.meta.GetName() }

// labelsMatch reports whether every selector label is in labels.
func labelsMatch(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// copyMap returns a copy of m (nil stays nil), so records never share a map
// with a caller.
func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// short is the first 13 characters of an ID, as crictl prints them.
func short(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}

// listItem is the sandbox as ListPodSandbox answers it.
//
// A list answer is mostly the same from one call to the next (the kubelet
// lists everything every second), so rather than building thousands of
// protos per call, each record keeps its answer and builds a new one only
// when its state changed since; everything else in it never changes. The
// answer is shared with every caller (and with gRPC encoding it on another
// goroutine), so it is never modified once built: a change makes a new one.
// Caller holds mu.
func (s *sandbox) listItem() *runtimeapi.PodSandbox {
	if s.item == nil || s.item.State != s.state {
		s.item = &runtimeapi.PodSandbox{
			Id:             s.id,
			Metadata:       s.meta,
			State:          s.state,
			CreatedAt:      s.createdAt,
			Labels:         s.labels,
			Annotations:    s.annotations,
			RuntimeHandler: s.runtimeHandler,
		}
	}
	return s.item
}

// listItem is the container as ListContainers answers it: like
// sandbox.listItem, built anew only when the container's state changed.
// Caller holds mu.
func (c *container) listItem() *runtimeapi.Container {
	if c.item == nil || c.item.State != c.state {
		c.item = &runtimeapi.Container{
			Id:           c.id,
			PodSandboxId: c.sandboxID,
			Metadata:     c.meta,
			Image:        c.image,
			ImageRef:     c.imageID,
			ImageId:      c.imageID,
			State:        c.state,
			CreatedAt:    c.createdAt,
			Labels:       c.labels,
			Annotations:  c.annotations,
		}
	}
	return c.item
}

// PodNetworkName names the pod network's namespace and host interface
// ("" without one), for a learner's `ip netns exec` and `ip addr`.
func (r *Runtime) PodNetworkName() (namespace, hostInterface string) {
	if r.net == nil {
		return "", ""
	}
	return r.net.Name(), r.net.HostInterface()
}
