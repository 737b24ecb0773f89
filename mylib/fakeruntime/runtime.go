package fakeruntime

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
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
	// ExitCodeSIGKILL is what a container killed by SIGKILL exits with (128+9).
	ExitCodeSIGKILL = 137
	// ReasonCompleted is the reason of a container that exited with code 0.
	ReasonCompleted = "Completed"
	// ReasonError is the reason of a container that exited with another code.
	ReasonError = "Error"
)

// Runtime is the in-memory CRI runtime. It implements
// runtimeapi.RuntimeServiceServer and runtimeapi.ImageServiceServer and is
// safe for concurrent use: every call takes one lock. Answers share with the
// runtime's records only what never changes after creation (metadata,
// labels, annotations, and the list items of listItem), so callers in the
// same process must treat answers as read-only; gRPC callers get their own
// copy anyway.
type Runtime struct {
	// The embedded servers answer Unimplemented for every call this runtime
	// does not define (Exec, Attach, stats, streaming lists, …).
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	clock clock.Clock

	mu         sync.Mutex
	sandboxes  map[string]*sandbox
	containers map[string]*container
	images     map[string]*image // by image ID
	nextIP     int

	// Indexes, so that no call costs more than a list of everything:
	// names reserves each sandbox's and container's name, as containerd
	// does; scripted holds the containers that have a script to play;
	// imageNames maps tags and digests to image IDs.
	names      map[string]string
	scripted   map[string]*container
	imageNames map[string]string
}

// New returns an empty runtime that reads time from clk.
func New(clk clock.Clock) *Runtime {
	return &Runtime{
		clock:      clk,
		sandboxes:  map[string]*sandbox{},
		containers: map[string]*container{},
		images:     map[string]*image{},
		names:      map[string]string{},
		scripted:   map[string]*container{},
		imageNames: map[string]string{},
	}
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
	runtimeHandler string
	logDir         string
	containers     map[string]*container

	// item is the sandbox as ListPodSandbox answers it, built once and
	// shared by every answer (see listItem).
	item *runtimeapi.PodSandbox
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

	state      runtimeapi.ContainerState
	createdAt  int64
	startedAt  int64
	finishedAt int64
	exitCode   int32
	reason     string

	script Script
	// scriptedExit is true when the container exited on its own, by its
	// script; only then does a crash-loop script start it again.
	scriptedExit bool
	// restarts counts the in-place restarts done by a crash-loop script.
	restarts int

	// item is the container as ListContainers answers it, built once and
	// shared by every answer (see listItem).
	item *runtimeapi.Container
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

// removeSandbox forgets s and its containers. Caller holds mu.
func (r *Runtime) removeSandbox(s *sandbox) {
	for _, c := range s.containers {
		r.removeContainer(c)
	}
	delete(r.names, s.nameKey())
	delete(r.sandboxes, s.id)
}

// addContainer records c in sandbox s. Caller holds mu.
func (r *Runtime) addContainer(s *sandbox, c *container) {
	r.containers[c.id] = c
	s.containers[c.id] = c
	r.names[containerNameKey(s.id, c.meta)] = c.id
	r.setScript(c, c.script)
}

// removeContainer forgets c. Caller holds mu.
func (r *Runtime) removeContainer(c *container) {
	if s := r.sandboxes[c.sandboxID]; s != nil {
		delete(s.containers, c.id)
	}
	delete(r.names, containerNameKey(c.sandboxID, c.meta))
	delete(r.scripted, c.id)
	delete(r.containers, c.id)
}

// setScript gives c the script s. Caller holds mu.
func (r *Runtime) setScript(c *container, s Script) {
	c.script = s
	if s.ExitAfter > 0 {
		r.scripted[c.id] = c
	} else {
		delete(r.scripted, c.id)
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

// advance plays every container's script up to now. Every call that reads
// or changes state calls it first, under the lock, so a script's effects are
// seen at the right time without any timer goroutine. Caller holds mu.
func (r *Runtime) advance() {
	if len(r.scripted) == 0 {
		return
	}
	now := r.clock.Now()
	for _, c := range r.scripted {
		c.advance(now)
	}
}

// advance plays c's script up to now: a running container exits ExitAfter
// after it started; with RestartAfter, it starts again that long after it
// exited on its own, and so on.
func (c *container) advance(now time.Time) {
	s := c.script
	if s.RestartAfter > 0 && c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
		// Skip whole run+pause cycles at once, so that a long gap between
		// two calls costs nothing.
		period := s.ExitAfter + s.RestartAfter
		if n := now.Sub(time.Unix(0, c.startedAt)) / period; n > 1 {
			skip := n - 1
			c.startedAt += int64(skip * period)
			c.restarts += int(skip)
		}
	}
	for {
		switch {
		case c.state == runtimeapi.ContainerState_CONTAINER_RUNNING:
			exitAt := time.Unix(0, c.startedAt).Add(s.ExitAfter)
			if now.Before(exitAt) {
				return
			}
			c.exit(exitAt.UnixNano(), s.ExitCode)
			c.scriptedExit = true
		case c.state == runtimeapi.ContainerState_CONTAINER_EXITED && c.scriptedExit && s.RestartAfter > 0:
			startAt := time.Unix(0, c.finishedAt).Add(s.RestartAfter)
			if now.Before(startAt) {
				return
			}
			c.start(startAt.UnixNano())
			c.restarts++
		default:
			return
		}
	}
}

// start marks c running since at.
func (c *container) start(at int64) {
	c.state = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.startedAt = at
	c.finishedAt, c.exitCode, c.reason, c.scriptedExit = 0, 0, "", false
}

// exit marks c exited at at with code.
func (c *container) exit(at int64, code int32) {
	c.state = runtimeapi.ContainerState_CONTAINER_EXITED
	c.finishedAt = at
	c.exitCode = code
	c.reason = ReasonError
	if code == 0 {
		c.reason = ReasonCompleted
	}
	c.scriptedExit = false
}

// kill ends a running container with SIGKILL now.
func (r *Runtime) kill(c *container) {
	if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
		c.exit(r.now(), ExitCodeSIGKILL)
	}
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

// newestFirst orders list answers newest first, then by ID so that the
// order is the same on every call. Both lists sort with it: pass it each
// item's creation time and ID.
func newestFirst(createdA int64, idA string, createdB int64, idB string) int {
	if c := cmp.Compare(createdB, createdA); c != 0 {
		return c
	}
	return strings.Compare(idA, idB)
}
