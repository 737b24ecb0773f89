package fakeruntime

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Action is what the control API does to a container, a sandbox or a pod.
type Action string

// The control actions. They are teaching shortcuts, not CRI calls: they let
// a learner change the runtime behind the kubelet's back and watch the PLEG
// notice.
const (
	// ActionKill SIGKILLs a running container (exit code 137). On a sandbox
	// or pod it also makes the sandbox NOTREADY, as StopPodSandbox does.
	ActionKill Action = "kill"
	// ActionStart runs a created or exited container again, in place (same
	// ID). On a sandbox it makes it READY again; on a pod it also starts the
	// pod's containers.
	ActionStart Action = "start"
	// ActionRemove removes a container, or a sandbox with its containers,
	// running or not.
	ActionRemove Action = "remove"
)

// Errors of the control API; the HTTP handler maps them to status codes.
var (
	// ErrNotFound: no container, sandbox or pod matches.
	ErrNotFound = errors.New("not found")
	// ErrAmbiguous: an ID prefix or pod name matches more than one.
	ErrAmbiguous = errors.New("ambiguous")
	// ErrBadRequest: an unknown action or a malformed parameter.
	ErrBadRequest = errors.New("bad request")
)

// Ref names what a control call acted on, for its answer.
type Ref struct {
	// Kind is "container" or "sandbox".
	Kind string
	ID   string
	// Pod is "namespace/name"; Container is the container's name.
	Pod       string
	Container string
}

func (r Ref) String() string {
	if r.Kind == "container" {
		return fmt.Sprintf("container %s (%s, pod %s)", short(r.ID), r.Container, r.Pod)
	}
	return fmt.Sprintf("sandbox %s (pod %s)", short(r.ID), r.Pod)
}

// controlErr turns a lookup's gRPC status into a control error.
func controlErr(err error) error {
	switch status.Code(err) {
	case codes.NotFound:
		return fmt.Errorf("%w: %s", ErrNotFound, status.Convert(err).Message())
	case codes.InvalidArgument:
		return fmt.Errorf("%w: %s", ErrAmbiguous, status.Convert(err).Message())
	}
	return err
}

func (r *Runtime) containerRef(c *container) Ref {
	ref := Ref{Kind: "container", ID: c.id, Container: c.meta.GetName()}
	if s := r.sandboxes[c.sandboxID]; s != nil {
		ref.Pod = s.podName()
	}
	return ref
}

// ContainerAction kills, starts or removes the container whose ID (or unique
// ID prefix) is id.
func (r *Runtime) ContainerAction(id string, a Action) (Ref, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advance()
	c, err := r.findContainer(id)
	if err != nil {
		return Ref{}, controlErr(err)
	}
	ref := r.containerRef(c)
	switch a {
	case ActionKill:
		r.kill(c)
	case ActionStart:
		if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return ref, nil
		}
		if s := r.sandboxes[c.sandboxID]; s == nil || s.state != runtimeapi.PodSandboxState_SANDBOX_READY {
			return Ref{}, fmt.Errorf("%w: the sandbox of %s is not ready; start the pod instead", ErrBadRequest, ref)
		}
		c.start(r.now())
	case ActionRemove:
		r.removeContainer(c)
	default:
		return Ref{}, badAction(a)
	}
	return ref, nil
}

// SandboxAction kills, starts or removes the sandbox whose ID (or unique ID
// prefix) is id.
func (r *Runtime) SandboxAction(id string, a Action) (Ref, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advance()
	s, err := r.findSandbox(id)
	if err != nil {
		return Ref{}, controlErr(err)
	}
	return r.sandboxAction(s, a, false)
}

// PodAction kills, starts or removes the newest sandbox of the pod
// namespace/name; start also starts the pod's containers.
func (r *Runtime) PodAction(namespace, name string, a Action) (Ref, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advance()
	s := r.newestSandbox(namespace, name)
	if s == nil {
		return Ref{}, fmt.Errorf("%w: no pod %s/%s", ErrNotFound, namespace, name)
	}
	return r.sandboxAction(s, a, true)
}

// sandboxAction does a to s; withContainers starts its containers too.
// Caller holds mu.
func (r *Runtime) sandboxAction(s *sandbox, a Action, withContainers bool) (Ref, error) {
	ref := Ref{Kind: "sandbox", ID: s.id, Pod: s.podName()}
	switch a {
	case ActionKill:
		r.stopSandbox(s)
	case ActionStart:
		s.state = runtimeapi.PodSandboxState_SANDBOX_READY
		if withContainers {
			for _, c := range r.containersOf(s.id) {
				if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
					c.start(r.now())
				}
			}
		}
	case ActionRemove:
		r.removeSandbox(s)
	default:
		return Ref{}, badAction(a)
	}
	return ref, nil
}

// FindContainer returns the ID of the newest container named containerName in
// the newest sandbox of the pod namespace/name.
func (r *Runtime) FindContainer(namespace, name, containerName string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.newestSandbox(namespace, name)
	if s == nil {
		return "", fmt.Errorf("%w: no pod %s/%s", ErrNotFound, namespace, name)
	}
	var found *container
	for _, c := range r.containersOf(s.id) { // oldest first: the last match is the newest
		if c.meta.GetName() == containerName {
			found = c
		}
	}
	if found == nil {
		return "", fmt.Errorf("%w: pod %s/%s has no container %q", ErrNotFound, namespace, name, containerName)
	}
	return found.id, nil
}

// SetScript replaces the script of the container whose ID (or unique ID
// prefix) is id. The new script's clock starts now: a running container
// with ExitAfter exits ExitAfter from now.
func (r *Runtime) SetScript(id string, s Script) (Ref, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advance()
	c, err := r.findContainer(id)
	if err != nil {
		return Ref{}, controlErr(err)
	}
	r.setScript(c, s)
	if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
		c.startedAt = r.now()
	}
	return r.containerRef(c), nil
}

// ScriptFromQuery reads a Script from URL query parameters named like the
// annotations without their prefix: exit-after, exit-code, restart-after,
// ignore-sigterm.
func ScriptFromQuery(q url.Values) (Script, error) {
	for k := range q {
		switch k {
		case "exit-after", "exit-code", "restart-after", "ignore-sigterm":
		default:
			return Script{}, fmt.Errorf("%w: unknown parameter %q: want exit-after, exit-code, restart-after or ignore-sigterm", ErrBadRequest, k)
		}
	}
	s, err := parseScript(func(key string) (string, bool) {
		_, ok := q[key]
		return q.Get(key), ok
	})
	if err != nil {
		return Script{}, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	return s, nil
}

// newestSandbox returns the newest sandbox of namespace/name, or nil.
// Caller holds mu.
func (r *Runtime) newestSandbox(namespace, name string) *sandbox {
	var found *sandbox
	for _, s := range r.sandboxes {
		if s.meta.GetNamespace() == namespace && s.meta.GetName() == name &&
			(found == nil || s.createdAt > found.createdAt) {
			found = s
		}
	}
	return found
}

func badAction(a Action) error {
	return fmt.Errorf("%w: unknown action %q: want %s, %s or %s", ErrBadRequest, a, ActionKill, ActionStart, ActionRemove)
}

// Snapshot is a plain view of the runtime's state, for the control API's
// listing and for tests.
type Snapshot struct {
	Sandboxes []SandboxInfo
}

// SandboxInfo is one sandbox and its containers in a Snapshot.
type SandboxInfo struct {
	ID, Pod, UID, State string
	Containers          []ContainerInfo
}

// ContainerInfo is one container in a Snapshot.
type ContainerInfo struct {
	ID, Name, Image, State, Reason string
	ExitCode                       int32
	Restarts                       int
	Script                         string
}

// Snapshot returns the current sandboxes (sorted by pod name, newest first)
// and their containers (oldest first).
func (r *Runtime) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advance()
	var snap Snapshot
	for _, s := range r.sandboxes {
		si := SandboxInfo{ID: s.id, Pod: s.podName(), UID: s.meta.GetUid(), State: strings.TrimPrefix(s.state.String(), "SANDBOX_")}
		for _, c := range r.containersOf(s.id) {
			si.Containers = append(si.Containers, ContainerInfo{
				ID: c.id, Name: c.meta.GetName(), Image: c.image.GetImage(),
				State: strings.TrimPrefix(c.state.String(), "CONTAINER_"), Reason: c.reason,
				ExitCode: c.exitCode, Restarts: c.restarts, Script: c.script.String(),
			})
		}
		snap.Sandboxes = append(snap.Sandboxes, si)
	}
	sort.Slice(snap.Sandboxes, func(i, j int) bool {
		a, b := snap.Sandboxes[i], snap.Sandboxes[j]
		if a.Pod != b.Pod {
			return a.Pod < b.Pod
		}
		return r.sandboxes[a.ID].createdAt > r.sandboxes[b.ID].createdAt
	})
	return snap
}
