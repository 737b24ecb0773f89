package fakeruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/fakeruntime/sandboxproc"
)

// CreateContainer creates a CREATED container in a READY sandbox. The image
// must have been pulled, as with containerd. It checks the container's
// mounts (cri_mounts.go: InvalidArgument for one outside Config.MountRoots,
// missing, or with a relative container path), makes the container's root
// directory with its mount points, /etc/hostname and /etc/resolv.conf, and
// opens its log file (sandbox LogDirectory + LogPath).
func (r *Runtime) CreateContainer(_ context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	cfg := req.GetConfig()
	m := cfg.GetMetadata()
	if m.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "CreateContainer: config.metadata.name is empty")
	}
	if cfg.GetImage().GetImage() == "" {
		return nil, status.Errorf(codes.InvalidArgument, "CreateContainer %s: config.image.image is empty", m.GetName())
	}
	if err := checkLogPath(cfg.GetLogPath()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "CreateContainer %s: %v", m.GetName(), err)
	}
	argv := append(slices.Clone(cfg.GetCommand()), cfg.GetArgs()...)
	script, params := imageDefault(cfg.GetImage().GetImage()).Script, []string(nil)
	var err error
	if len(argv) > 0 {
		if script, params, err = sandboxproc.ArgvScript(argv); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "CreateContainer %s: command: %v", m.GetName(), err)
		}
	}
	if err := loadSeccompProfile(cfg.GetLinux().GetSecurityContext()); err != nil {
		return nil, status.Errorf(codes.Unknown, "CreateContainer %s: failed to generate seccomp spec opts: %v", m.GetName(), err)
	}
	c, s, containers, err := r.newContainer(req, script, params)
	if err != nil {
		return nil, err
	}
	// The file system work runs without the lock: the runtime keeps
	// answering meanwhile, and a burst of pods gets its containers made
	// side by side, not one after another. The container's name is
	// reserved; the container joins its sandbox only when its files are
	// ready, and only if the sandbox is still ready then.
	if r.testHookUnlocked != nil {
		r.testHookUnlocked("container")
	}
	err = r.prepareContainer(c, cfg, containers, s.resolvConf)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil && (r.sandboxes[s.id] != s || s.state != runtimeapi.PodSandboxState_SANDBOX_READY) {
		err = status.Errorf(codes.FailedPrecondition, "CreateContainer %s: sandbox %s of pod %s stopped while the container was created", m.GetName(), short(s.id), s.podName())
	}
	if err != nil {
		if key := containerNameKey(s.id, c.meta); r.names[key] == c.id {
			delete(r.names, key)
		}
		c.closeFiles()
		if c.dir != "" {
			_ = os.RemoveAll(c.dir)
		}
		return nil, err
	}
	r.addContainer(s, c)
	r.containerEvent(runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, c)
	return &runtimeapi.CreateContainerResponse{ContainerId: c.id}, nil
}

// loadSeccompProfile reads and decodes the Localhost seccomp profile sc
// names, as containerd does before it creates a container (not for a
// privileged one, which runs with none): a profile missing from the node,
// or not JSON, fails CreateContainer, and the pod's container waits in
// CreateContainerError. The mock applies none of its rules: every pod's
// sandbox process runs under the mock's own filter, whatever the profile
// (sandboxproc/seccomp.go; README, "Where it departs from containerd").
func loadSeccompProfile(sc *runtimeapi.LinuxContainerSecurityContext) error {
	sp := sc.GetSeccomp()
	if sp.GetProfileType() != runtimeapi.SecurityProfile_Localhost || sc.GetPrivileged() {
		return nil
	}
	ref := sp.GetLocalhostRef()
	if !filepath.IsAbs(ref) {
		return fmt.Errorf("seccomp profile path must be absolute, but got relative path %q", ref)
	}
	b, err := os.ReadFile(ref)
	if err != nil {
		return fmt.Errorf("cannot load seccomp profile %q: %w", ref, err)
	}
	var profile struct {
		DefaultAction string `json:"defaultAction"`
	}
	if err := json.Unmarshal(b, &profile); err != nil {
		return fmt.Errorf("decoding seccomp profile failed %q: %w", ref, err)
	}
	return nil
}

// newContainer checks what CreateContainer needs of the runtime's state
// (the sandbox ready, the image pulled, the name free) and returns the
// container, its name reserved, with its sandbox and the containers'
// directory. It takes the lock.
func (r *Runtime) newContainer(req *runtimeapi.CreateContainerRequest, script string, params []string) (*container, *sandbox, string, error) {
	cfg := req.GetConfig()
	m := cfg.GetMetadata()
	r.mu.Lock()
	defer r.mu.Unlock()
	s, err := r.findSandbox(req.GetPodSandboxId())
	if err != nil {
		return nil, nil, "", err
	}
	if s.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, nil, "", status.Errorf(codes.FailedPrecondition, "CreateContainer %s: sandbox %s of pod %s is not ready", m.GetName(), short(s.id), s.podName())
	}
	img := r.findImage(cfg.GetImage().GetImage())
	if img == nil {
		return nil, nil, "", status.Errorf(codes.NotFound, "CreateContainer %s: image %q not found: pull it first (PullImage)", m.GetName(), cfg.GetImage().GetImage())
	}
	if len(cfg.GetCommand()) == 0 && len(img.entrypoint) > 0 { // the image's ENTRYPOINT, then the args
		if script, params, err = sandboxproc.ArgvScript(append(slices.Clone(img.entrypoint), cfg.GetArgs()...)); err != nil {
			return nil, nil, "", status.Errorf(codes.InvalidArgument, "CreateContainer %s: entrypoint: %v", m.GetName(), err)
		}
	}
	var pidTarget *container
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns.GetPid() == runtimeapi.NamespaceMode_TARGET {
		if pidTarget = s.containers[ns.GetTargetId()]; pidTarget == nil {
			return nil, nil, "", status.Errorf(codes.NotFound, "CreateContainer %s: target container %q of its PID namespace not found in pod %s",
				m.GetName(), ns.GetTargetId(), s.podName())
		}
	}
	if id, ok := r.names[containerNameKey(s.id, m)]; ok {
		return nil, nil, "", status.Errorf(codes.AlreadyExists, "CreateContainer: container %q attempt %d already exists in pod %s as %s",
			m.GetName(), m.GetAttempt(), s.podName(), id)
	}
	c := &container{
		id:          newID(),
		sandboxID:   s.id,
		meta:        &runtimeapi.ContainerMetadata{Name: m.GetName(), Attempt: m.GetAttempt()},
		image:       &runtimeapi.ImageSpec{Image: cfg.GetImage().GetImage()},
		imageID:     img.id,
		labels:      copyMap(cfg.GetLabels()),
		annotations: copyMap(cfg.GetAnnotations()),
		state:       runtimeapi.ContainerState_CONTAINER_CREATED,
		createdAt:   r.now(),
		script:      script,
		params:      params,
		hostname:    s.hostname,
		workDir:     cfg.GetWorkingDir(),
		io:          newContainerIO(cfg),
		interactive: cfg.GetStdin() && isLoneShell(cfg.GetCommand(), cfg.GetArgs(), img),
	}
	switch {
	case pidTarget != nil:
		c.running.JoinPIDNamespace(&pidTarget.running)
		c.pidTarget = pidTarget.id
	case ns.GetPid() == runtimeapi.NamespaceMode_POD: // shareProcessNamespace
		if s.pidns == nil {
			s.pidns = sandboxproc.NewPodPIDNamespace()
		}
		c.running.UsePIDNamespace(s.pidns)
		c.podPID = true
	}
	c.process, c.programs = mainProcess(cfg, img), img.programs
	c.resources = &runtimeapi.LinuxContainerResources{}
	if res := cfg.GetLinux().GetResources(); res != nil {
		c.resources = proto.Clone(res).(*runtimeapi.LinuxContainerResources)
	}
	c.running.SetLimits(r.podPidsLimit, r.memoryLimit(c.resources))
	// limits.cpu, which the kubelet gives as a CFS quota and period: the
	// interpreter's meter enforces it where no cgroup does (sandboxproc's
	// shell_usage.go; see sandboxProcess.start).
	c.running.SetCPULimit(c.resources.GetCpuQuota(), c.resources.GetCpuPeriod())
	for _, kv := range cfg.GetEnvs() {
		c.env = append(c.env, kv.GetKey()+"="+string(kv.GetValue()))
	}
	c.env = append(c.env, "HOSTNAME="+s.hostname)
	if cfg.GetLogPath() != "" {
		c.logPath = filepath.Join(s.logDir, cfg.GetLogPath())
	}
	containers, err := r.containersDir()
	if err != nil {
		return nil, nil, "", status.Errorf(codes.Internal, "CreateContainer %s: %v", m.GetName(), err)
	}
	r.names[containerNameKey(s.id, c.meta)] = c.id // reserved until it is added, or fails
	return c, s, containers, nil
}

// prepareContainer checks c's mounts and makes its files (makeRoot), then
// gives them to the sandbox process's user. It runs without the lock: c
// is no one else's yet.
func (r *Runtime) prepareContainer(c *container, cfg *runtimeapi.ContainerConfig, containers, resolv string) error {
	name := cfg.GetMetadata().GetName()
	mapped, pinned, err := r.checkMounts(containers, cfg.GetMounts())
	if err != nil {
		return status.Errorf(mountCode(err), "CreateContainer %s: %s", name, r.podFacing(name, err, cfg.GetMounts()))
	}
	c.mapped = mapped
	for _, mt := range cfg.GetMounts() {
		c.mounts = append(c.mounts, &runtimeapi.Mount{ContainerPath: mt.GetContainerPath(), HostPath: mt.GetHostPath(),
			Readonly: mt.GetReadonly(), Propagation: mt.GetPropagation(), SelinuxRelabel: mt.GetSelinuxRelabel()})
	}
	if err := r.makeRoot(c, containers, resolv, pinned); err != nil {
		return status.Errorf(mountCode(err), "CreateContainer %s: %s", name, r.podFacing(name, err, cfg.GetMounts()))
	}
	if r.sandbox != nil {
		if err := r.sandbox.adopt(c); err != nil {
			return status.Errorf(codes.Internal, "CreateContainer %s: %s", name, r.podFacing(name, err, cfg.GetMounts()))
		}
	}
	return nil
}

// mainProcess is the command line ps lists a container's main process
// as (pid_namespace.go): its command and args, or the image's entrypoint
// and the args, if a shell's; with none, the image's default command.
func mainProcess(cfg *runtimeapi.ContainerConfig, img *image) []string {
	argv := append(slices.Clone(cfg.GetCommand()), cfg.GetArgs()...)
	if len(cfg.GetCommand()) == 0 && len(img.entrypoint) > 0 {
		argv = append(slices.Clone(img.entrypoint), cfg.GetArgs()...)
	}
	switch {
	case len(argv) > 0:
		return sandboxproc.ProcessOf(argv)
	case img.def.Shell:
		return []string{"sh"}
	case len(img.def.Process) > 0:
		return slices.Clone(img.def.Process)
	case img.def.Script == "" || len(img.repoDigests) == 0:
		return nil
	}
	repo, _, _ := strings.Cut(img.repoDigests[0], "@")
	return []string{path.Base(repo)}
}

// isLoneShell tells whether what the container runs is a shell with no
// argument: its command and args, or the image's entrypoint and the args,
// or, with none, the image's default command. With a stdin it is
// interactive.
func isLoneShell(command, args []string, img *image) bool {
	argv := append(slices.Clone(command), args...)
	if len(command) == 0 && len(img.entrypoint) > 0 {
		argv = append(slices.Clone(img.entrypoint), args...)
	}
	if len(argv) == 0 {
		return img.def.Shell
	}
	return len(argv) == 1 && sandboxproc.IsShell(argv[0])
}

// prompt is the interactive shell's prompt: with a TTY only, as sh's.
func (c *container) prompt() string {
	if c.io != nil && c.io.tty {
		return "# "
	}
	return ""
}

// mountCode is the code of a CreateContainer that failed with err: a
// mount refused is the caller's mistake.
func mountCode(err error) codes.Code {
	if errors.As(err, new(mountError)) {
		return codes.InvalidArgument
	}
	return codes.Internal
}

// makeRoot makes c's directory with its root file system (a few empty
// directories, /etc/hostname, /etc/resolv.conf from resolv unless a mount
// covers it, and the mount points), opens its view with its pinned mounts
// (which it owns from now on: they are held open for the container's
// life, also when its scripts run in the sandbox process, whose own pins
// must be the same directories and files) and its log, in dir, the
// containers' directory. It touches nothing of the runtime's state: the
// caller need not hold mu.
func (r *Runtime) makeRoot(c *container, dir, resolv string, pinned []*sandboxproc.FsMount) error {
	defer func() {
		if c.fs == nil {
			sandboxproc.CloseMounts(pinned)
		}
	}()
	c.dir = filepath.Join(dir, c.id)
	rootfs := filepath.Join(c.dir, "rootfs")
	for _, d := range []string{"etc", "tmp", "var/log", "dev", "proc"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(rootfs, "etc/hostname"), []byte(c.hostname+"\n"), 0o644); err != nil {
		return err
	}
	if resolv != "" && !covered(c.mapped, "etc/resolv.conf") {
		if err := os.WriteFile(filepath.Join(rootfs, "etc/resolv.conf"), []byte(resolv), 0o644); err != nil {
			return err
		}
	}
	root, err := os.OpenRoot(rootfs)
	if err != nil {
		return err
	}
	if err := makeMountPoints(root, c.mapped); err != nil {
		root.Close()
		return err
	}
	c.fs = sandboxproc.NewContainerFS(root, pinned)
	if rel := strings.TrimPrefix(path.Clean("/"+c.workDir), "/"); rel != "" { // made if missing, as containerd does
		if err := c.fs.MkdirAll(rel, 0o755); err != nil {
			return fmt.Errorf("working directory %q: %w", c.workDir, err)
		}
	}
	if c.log, err = openLog(r.clock, c.logPath); err != nil {
		return fmt.Errorf("log file: %w", err)
	}
	return nil
}

// StartContainer starts a CREATED container: its script starts running.
func (r *Runtime) StartContainer(_ context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.findContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_CREATED {
		return nil, status.Errorf(codes.FailedPrecondition, "StartContainer %s: container is %s, not CONTAINER_CREATED", short(c.id), c.state)
	}
	if s := r.sandboxes[c.sandboxID]; s == nil || s.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.FailedPrecondition, "StartContainer %s: its sandbox is not ready", short(c.id))
	}
	if err := r.start(c); err != nil {
		c.state = runtimeapi.ContainerState_CONTAINER_CREATED // as containerd leaves a container whose task did not start
		return nil, status.Errorf(codes.Internal, "StartContainer %s: %v", short(c.id), err)
	}
	r.containerEvent(runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, c)
	return &runtimeapi.StartContainerResponse{}, nil
}

// StopContainer stops a running container: it sends SIGTERM, waits up to
// the timeout (on the runtime's clock) for the script to exit, then kills
// it with SIGKILL (exit code 137). A script that traps TERM runs its trap
// (`trap 'exit 0' TERM`); one that does not ignores SIGTERM, as PID 1 in a
// container does, and is killed when the timeout ends. A timeout of 0 kills
// at once. Stopping a container that is not running, or gone, is not an
// error (the CRI says so).
func (r *Runtime) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	r.mu.Lock()
	c, err := r.findContainer(req.GetContainerId())
	if status.Code(err) == codes.NotFound {
		r.mu.Unlock()
		return &runtimeapi.StopContainerResponse{}, nil
	}
	if err != nil {
		r.mu.Unlock()
		return nil, err
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.mu.Unlock()
		return &runtimeapi.StopContainerResponse{}, nil
	}
	timeout := time.Duration(req.GetTimeout()) * time.Second
	if timeout <= 0 {
		r.kill(c)
		r.mu.Unlock()
		return &runtimeapi.StopContainerResponse{}, nil
	}
	p, done := c.proc, c.done
	r.mu.Unlock()

	// Wait for the script without holding the lock, so that the rest of
	// the runtime keeps answering.
	p.Sigterm()
	timer := r.clock.NewTimer(timeout)
	defer timer.Stop()
	if r.testHookStopWaiting != nil {
		r.testHookStopWaiting()
	}
	select {
	case <-done:
		return &runtimeapi.StopContainerResponse{}, nil
	case <-timer.C():
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	r.mu.Lock()
	if c.proc == p {
		r.kill(c) // no-op if it exited on its own meanwhile
	}
	r.mu.Unlock()
	return &runtimeapi.StopContainerResponse{}, nil
}

// RemoveContainer removes a container, killing it first if it runs.
// Removing a container that is gone is not an error (the CRI says so).
func (r *Runtime) RemoveContainer(_ context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.findContainer(req.GetContainerId())
	if status.Code(err) == codes.NotFound {
		return &runtimeapi.RemoveContainerResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	r.removeContainer(c)
	return &runtimeapi.RemoveContainerResponse{}, nil
}

// ListContainers lists containers matching the filter (`crictl ps`): by ID
// or ID prefix, by state, by sandbox ID (or prefix), by labels. Newest first.
func (r *Runtime) ListContainers(_ context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	f := req.GetFilter()
	idPrefix, sandboxPrefix := f.GetId(), f.GetPodSandboxId()
	r.mu.Lock()
	defer r.mu.Unlock()
	items := make([]*runtimeapi.Container, 0, len(r.containers))
	for _, c := range r.containers {
		if !strings.HasPrefix(c.id, idPrefix) || !strings.HasPrefix(c.sandboxID, sandboxPrefix) {
			continue
		}
		if f.GetState() != nil && f.GetState().GetState() != c.state {
			continue
		}
		if !labelsMatch(f.GetLabelSelector(), c.labels) {
			continue
		}
		items = append(items, c.listItem())
	}
	slices.SortFunc(items, func(a, b *runtimeapi.Container) int {
		return kubecontainer.NewestFirst(a.CreatedAt, a.Id, b.CreatedAt, b.Id)
	})
	return &runtimeapi.ListContainersResponse{Containers: items}, nil
}

// ContainerStatus returns the container's status (`crictl inspect`), with
// nanosecond timestamps, exit code and reason. With verbose, Info["info"]
// holds extra details as JSON.
func (r *Runtime) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.findContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	resp := &runtimeapi.ContainerStatusResponse{Status: c.status()}
	if req.GetVerbose() {
		info := map[string]any{"sandboxID": c.sandboxID, "script": c.script, "rootfs": filepath.Join(c.dir, "rootfs")}
		if s := r.sandboxes[c.sandboxID]; s != nil {
			info["pod"] = s.podName()
		}
		b, _ := json.Marshal(info) // strings and ints always marshal
		resp.Info = map[string]string{"info": string(b)}
	}
	return resp, nil
}

// status is the container's status as ContainerStatus answers it without
// verbose, and as the container events carry it. Caller holds mu.
func (c *container) status() *runtimeapi.ContainerStatus {
	return &runtimeapi.ContainerStatus{
		Id:          c.id,
		Metadata:    c.meta,
		State:       c.state,
		CreatedAt:   c.createdAt,
		StartedAt:   c.startedAt,
		FinishedAt:  c.finishedAt,
		ExitCode:    c.exitCode,
		Image:       c.image,
		ImageRef:    c.imageID,
		ImageId:     c.imageID,
		Reason:      c.reason,
		Labels:      c.labels,
		Annotations: c.annotations,
		LogPath:     c.logPath,
		Mounts:      c.mounts,
		Resources:   &runtimeapi.ContainerResources{Linux: c.resources},
	}
}

// memoryLimit is the memory the interpreter holds a container with res
// to: its limit, else the node's memory (when the runtime knows it).
func (r *Runtime) memoryLimit(res *runtimeapi.LinuxContainerResources) int64 {
	if m := res.GetMemoryLimitInBytes(); m > 0 {
		return m
	}
	return r.memory
}

// UpdateContainerResources gives a container new memory and CPU limits,
// as containerd does: a field left 0 keeps its value; a container that is
// not running takes them when it starts; a running one is held to them at
// once, its ID and restart count unchanged, and ContainerStatus reports
// them. A memory limit below what the container uses now is refused, as
// the kernel refuses it (cgroup v1's EBUSY, which containerd returns).
// Unlike the kernel's, that check and the new limit are two steps: a
// container that grows past the new limit between them is OOM-killed at
// its next command, as a kernel kills one that grows past its limit.
// CpuShares is recorded and reported, not enforced (the meter has no
// weights), as are the other fields.
func (r *Runtime) UpdateContainerResources(ctx context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	r.mu.Lock()
	c, err := r.findContainer(req.GetContainerId())
	if err != nil {
		r.mu.Unlock()
		return nil, err
	}
	ins := r.statsInputs(func(x *container) bool { return x == c })
	r.mu.Unlock()
	if limit := req.GetLinux().GetMemoryLimitInBytes(); limit > 0 && ins[0].running {
		r.fillUsage(ctx, ins) // without the lock: it may ask the sandbox process
		files, _ := diskUsage(ins[0].rootfs)
		if use := max(ins[0].usage.Mem, 0) + int64(files); use > limit {
			return nil, status.Errorf(codes.Unknown, "UpdateContainerResources %s: failed to update resources: unable to set memory limit to %d (current usage: %d): %v",
				short(c.id), limit, use, syscall.EBUSY)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, err = r.findContainer(c.id); err != nil {
		return nil, err // removed meanwhile
	}
	c.resources = mergeResources(c.resources, req.GetLinux())
	memory, quota, period := r.memoryLimit(c.resources), c.resources.GetCpuQuota(), c.resources.GetCpuPeriod()
	c.running.SetMemoryLimit(memory)
	c.running.SetCPULimit(quota, period)
	if r.sandbox != nil && c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.sandbox.update(c.sandboxID, c.id, sandboxproc.RunLimits{Memory: memory, CPUQuota: quota, CPUPeriod: period})
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// mergeResources is old with the fields of update that are not 0, as
// containerd's WithResources applies a CRI update to a container's spec.
func mergeResources(old, update *runtimeapi.LinuxContainerResources) *runtimeapi.LinuxContainerResources {
	res := proto.Clone(old).(*runtimeapi.LinuxContainerResources)
	if v := update.GetCpuPeriod(); v != 0 {
		res.CpuPeriod = v
	}
	if v := update.GetCpuQuota(); v != 0 {
		res.CpuQuota = v
	}
	if v := update.GetCpuShares(); v != 0 {
		res.CpuShares = v
	}
	if v := update.GetMemoryLimitInBytes(); v != 0 {
		res.MemoryLimitInBytes = v
	}
	if v := update.GetMemorySwapLimitInBytes(); v != 0 {
		res.MemorySwapLimitInBytes = v
	}
	if v := update.GetCpusetCpus(); v != "" {
		res.CpusetCpus = v
	}
	if v := update.GetCpusetMems(); v != "" {
		res.CpusetMems = v
	}
	return res
}

// podPIDNamespace returns the PID namespace name of the pod whose
// namespace c shares, for the sandbox process: its sandbox's ID, or "".
func (c *container) podPIDNamespace() string {
	if c.podPID {
		return c.sandboxID
	}
	return ""
}
