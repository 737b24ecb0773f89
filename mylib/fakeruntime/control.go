package fakeruntime

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Action is what the control API does to a container, a sandbox or a pod.
type Action string

// The control actions. They are teaching shortcuts, not CRI calls: they let
// a learner change the runtime behind the kubelet's back and watch it
// notice. None restarts a container: a real runtime never does; the kubelet
// creates a new container (attempt + 1).
const (
	// ActionKill SIGKILLs a running container (exit code 137), as the
	// kernel's OOM killer or `kill -9` would. On a sandbox or pod it also
	// makes the sandbox NOTREADY, as StopPodSandbox does.
	ActionKill Action = "kill"
	// ActionStop stops a container as StopContainer does: SIGTERM, then
	// SIGKILL when the timeout (query parameter timeout=N seconds, default
	// DefaultStopTimeout) ends.
	ActionStop Action = "stop"
	// ActionRemove removes a container, or a sandbox with its containers,
	// running or not.
	ActionRemove Action = "remove"
	// ActionExec runs a command (query parameter cmd, a shell script) in a
	// running container, as ExecSync does, and answers its output: the way
	// to break or mend what an exec probe checks (cmd=rm /tmp/healthy).
	ActionExec Action = "exec"
	// ActionFail makes a running container's servers fail their probes
	// (shell_servers.go): HTTP answers 500, TCP refuses, gRPC health is
	// NOT_SERVING. ActionRecover undoes it. The container runs on.
	ActionFail    Action = "fail"
	ActionRecover Action = "recover"
)

// DefaultStopTimeout is the grace period of the stop action, in seconds.
const DefaultStopTimeout = 10

// MaxControlTimeout bounds the stop and exec actions' timeouts, in seconds.
const MaxControlTimeout = 60

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

// ContainerAction kills or removes the container whose ID (or unique ID
// prefix) is id. (Stop and exec are StopContainer and ExecSync.)
func (r *Runtime) ContainerAction(id string, a Action) (Ref, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.findContainer(id)
	if err != nil {
		return Ref{}, controlErr(err)
	}
	ref := r.containerRef(c)
	switch a {
	case ActionKill:
		r.kill(c)
	case ActionRemove:
		r.removeContainer(c)
	case ActionFail, ActionRecover:
		c.fault.Set(a == ActionFail)
	default:
		return Ref{}, badAction(a)
	}
	return ref, nil
}

// LookupContainer returns what the container whose ID (or unique ID
// prefix) is id is, for an answer.
func (r *Runtime) LookupContainer(id string) (Ref, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.findContainer(id)
	if err != nil {
		return Ref{}, controlErr(err)
	}
	return r.containerRef(c), nil
}

// SandboxAction kills or removes the sandbox whose ID (or unique ID prefix)
// is id.
func (r *Runtime) SandboxAction(id string, a Action) (Ref, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, err := r.findSandbox(id)
	if err != nil {
		return Ref{}, controlErr(err)
	}
	return r.sandboxAction(s, a)
}

// PodAction kills or removes the newest sandbox of the pod namespace/name.
func (r *Runtime) PodAction(namespace, name string, a Action) (Ref, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.newestSandbox(namespace, name)
	if s == nil {
		return Ref{}, fmt.Errorf("%w: no pod %s/%s", ErrNotFound, namespace, name)
	}
	return r.sandboxAction(s, a)
}

// sandboxAction does a to s. Caller holds mu.
func (r *Runtime) sandboxAction(s *sandbox, a Action) (Ref, error) {
	ref := Ref{Kind: "sandbox", ID: s.id, Pod: s.podName()}
	switch a {
	case ActionKill:
		r.stopSandbox(s)
	case ActionRemove:
		r.removeSandbox(s)
	default:
		return Ref{}, fmt.Errorf("%w: unknown action %q for a sandbox or pod: want %s or %s", ErrBadRequest, a, ActionKill, ActionRemove)
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
	return fmt.Errorf("%w: unknown action %q: want %s, %s, %s, %s, %s or %s", ErrBadRequest, a, ActionKill, ActionStop, ActionRemove, ActionExec, ActionFail, ActionRecover)
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
	Attempt                        uint32
	ExitCode                       int32
	// Command is the script the container runs, on one line.
	Command string
}

// Snapshot returns the current sandboxes (sorted by pod name, newest first)
// and their containers (oldest first).
func (r *Runtime) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	var snap Snapshot
	for _, s := range r.sandboxes {
		si := SandboxInfo{ID: s.id, Pod: s.podName(), UID: s.meta.GetUid(), State: strings.TrimPrefix(s.state.String(), "SANDBOX_")}
		for _, c := range r.containersOf(s.id) {
			si.Containers = append(si.Containers, ContainerInfo{
				ID: c.id, Name: c.meta.GetName(), Image: c.image.GetImage(),
				State: strings.TrimPrefix(c.state.String(), "CONTAINER_"), Reason: c.reason,
				Attempt: c.meta.GetAttempt(), ExitCode: c.exitCode, Command: oneLine(c.script),
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

// oneLine shortens a script to one line of at most 40 characters.
func oneLine(script string) string {
	s := strings.Join(strings.Fields(script), " ")
	if s == "" {
		return "-"
	}
	if r := []rune(s); len(r) > 40 {
		s = string(r[:37]) + "..."
	}
	return s
}

// grpcStatus reports whether err is a gRPC status error, and its status.
func grpcStatus(err error) (*status.Status, bool) {
	return status.FromError(err)
}
