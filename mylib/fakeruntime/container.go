package fakeruntime

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CreateContainer creates a CREATED container in a READY sandbox. The image
// must have been pulled, as with containerd. The script annotations (see
// Script) are read here; a malformed one is an InvalidArgument error.
func (r *Runtime) CreateContainer(_ context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	cfg := req.GetConfig()
	m := cfg.GetMetadata()
	if m.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "CreateContainer: config.metadata.name is empty")
	}
	if cfg.GetImage().GetImage() == "" {
		return nil, status.Errorf(codes.InvalidArgument, "CreateContainer %s: config.image.image is empty", m.GetName())
	}
	script, err := ParseScript(cfg.GetAnnotations())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "CreateContainer %s: %v", m.GetName(), err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s, err := r.findSandbox(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	if s.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.FailedPrecondition, "CreateContainer %s: sandbox %s of pod %s is not ready", m.GetName(), short(s.id), s.podName())
	}
	img := r.findImage(cfg.GetImage().GetImage())
	if img == nil {
		return nil, status.Errorf(codes.NotFound, "CreateContainer %s: image %q not found: pull it first (PullImage)", m.GetName(), cfg.GetImage().GetImage())
	}
	if id, ok := r.names[containerNameKey(s.id, m)]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "CreateContainer: container %q attempt %d already exists in pod %s as %s",
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
	}
	if cfg.GetLogPath() != "" {
		c.logPath = filepath.Join(s.logDir, cfg.GetLogPath())
	}
	r.addContainer(s, c)
	return &runtimeapi.CreateContainerResponse{ContainerId: c.id}, nil
}

// StartContainer starts a CREATED container. Its script clock starts now.
func (r *Runtime) StartContainer(_ context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advance()
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
	c.start(r.now())
	return &runtimeapi.StartContainerResponse{}, nil
}

// StopContainer stops a running container. A container exits on SIGTERM at
// once with code 0, unless its script ignores SIGTERM: then StopContainer
// waits the timeout (on the runtime's clock) and kills it with SIGKILL (exit
// code 137). A timeout of 0 kills at once. Stopping a container that is not
// running is not an error.
func (r *Runtime) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	r.mu.Lock()
	r.advance()
	c, err := r.findContainer(req.GetContainerId())
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
	if !c.script.IgnoreSIGTERM {
		c.exit(r.now(), 0)
		r.mu.Unlock()
		return &runtimeapi.StopContainerResponse{}, nil
	}
	id := c.id
	r.mu.Unlock()

	// The container ignores SIGTERM: wait out the grace period without
	// holding the lock, so that the rest of the runtime keeps answering.
	select {
	case <-r.clock.After(timeout):
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advance()
	if c, ok := r.containers[id]; ok {
		r.kill(c) // no-op if it exited on its own meanwhile
	}
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
	r.advance()
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
		return newestFirst(a.CreatedAt, a.Id, b.CreatedAt, b.Id)
	})
	return &runtimeapi.ListContainersResponse{Containers: items}, nil
}

// ContainerStatus returns the container's status (`crictl inspect`), with
// nanosecond timestamps, exit code and reason. With verbose, Info["info"]
// holds extra details as JSON.
func (r *Runtime) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advance()
	c, err := r.findContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	st := &runtimeapi.ContainerStatus{
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
	}
	resp := &runtimeapi.ContainerStatusResponse{Status: st}
	if req.GetVerbose() {
		info := map[string]any{"sandboxID": c.sandboxID, "restarts": c.restarts, "script": c.script.String()}
		if s := r.sandboxes[c.sandboxID]; s != nil {
			info["pod"] = s.podName()
		}
		b, _ := json.Marshal(info) // strings and ints always marshal
		resp.Info = map[string]string{"info": string(b)}
	}
	return resp, nil
}
