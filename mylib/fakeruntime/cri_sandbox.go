package fakeruntime

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "mykubelet/mylib/container"
)

// Version reports the runtime's name and versions (`crictl version`).
func (r *Runtime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0", // the kubelet's CRI "version of the runtime API"
		RuntimeName:       RuntimeName,
		RuntimeVersion:    RuntimeVersion,
		RuntimeApiVersion: RuntimeAPIVersion,
	}, nil
}

// Status reports the RuntimeReady and NetworkReady conditions (`crictl info`).
// With verbose, Info holds the runtime's configuration as JSON, as
// containerd's does.
func (r *Runtime) Status(_ context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	resp := &runtimeapi.StatusResponse{
		Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			{Type: runtimeapi.RuntimeReady, Status: true},
			{Type: runtimeapi.NetworkReady, Status: true},
		}},
		RuntimeHandlers: []*runtimeapi.RuntimeHandler{{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{}}},
		Features:        &runtimeapi.RuntimeFeatures{},
	}
	if req.GetVerbose() {
		r.mu.Lock()
		info := map[string]any{
			"runtimeName": RuntimeName, "runtimeVersion": RuntimeVersion,
			"sandboxes": len(r.sandboxes), "containers": len(r.containers), "images": len(r.images),
			"podCIDR": r.ips.Prefix().String(), "stateDir": r.stateDir, "utilities": Utilities, "mountRoots": r.mountRoots,
		}
		r.mu.Unlock()
		b, _ := json.Marshal(info) // a map of strings and ints always marshals
		resp.Info = map[string]string{"config": string(b)}
	}
	return resp, nil
}

// RunPodSandbox creates a READY sandbox with an IP address from the pod
// CIDR. Running a sandbox that already runs (same name, namespace, uid and
// attempt) returns its ID, as the CRI asks; the same metadata for a
// sandbox that is stopped is an error, the name is still taken.
func (r *Runtime) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	cfg := req.GetConfig()
	m := cfg.GetMetadata()
	if m.GetName() == "" || m.GetNamespace() == "" || m.GetUid() == "" {
		return nil, status.Error(codes.InvalidArgument, "RunPodSandbox: config.metadata needs a name, a namespace and a uid")
	}
	s, running, err := r.newSandbox(req)
	if err != nil {
		return nil, err
	}
	if running {
		return &runtimeapi.RunPodSandboxResponse{PodSandboxId: s.id}, nil
	}
	// The pod network's address is added without the lock (netlink): the
	// sandboxes of a burst do not wait behind each other. The address and
	// the name are reserved meanwhile.
	if r.testHookUnlocked != nil {
		r.testHookUnlocked("sandbox")
	}
	if r.net != nil {
		err = r.net.AddIP(s.ip)
	}
	if err == nil && r.sandbox != nil {
		// Its sandbox process, with its user (its containers' files are
		// given to it) and in its cgroup, started now, without the lock:
		// the pods of a burst start theirs side by side.
		if err = r.sandbox.startPod(s.id, s.cgroupParent); err != nil && r.net != nil {
			r.net.DelIP(s.ip)
		}
	}
	if err == nil && ctx.Err() != nil {
		// The kubelet gave up on this call meanwhile (the pod was deleted
		// while its sandbox started): undo it, as containerd does when a
		// step of the request fails, rather than leave a sandbox that no
		// pod wants, its process in the pod's cgroup.
		if r.sandbox != nil {
			r.sandbox.removePod(s.id)
		}
		if r.net != nil {
			r.net.DelIP(s.ip)
		}
		err = ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.ips.Release(s.ip)
		delete(r.names, s.nameKey())
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return nil, status.Errorf(codes.Internal, "RunPodSandbox %s/%s: %v", m.GetNamespace(), m.GetName(), err)
	}
	s.state = runtimeapi.PodSandboxState_SANDBOX_READY
	r.addSandbox(s)
	r.sandboxEvent(runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, s)
	r.sandboxEvent(runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, s)
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: s.id}, nil
}

// newSandbox returns the sandbox RunPodSandbox makes, not yet ready, with
// its name and address reserved; or, when it runs already, that sandbox
// and running true. It takes the lock.
func (r *Runtime) newSandbox(req *runtimeapi.RunPodSandboxRequest) (*sandbox, bool, error) {
	cfg := req.GetConfig()
	m := cfg.GetMetadata()
	r.mu.Lock()
	defer r.mu.Unlock()
	key := (&sandbox{meta: m}).nameKey()
	if id, ok := r.names[key]; ok {
		if s := r.sandboxes[id]; s != nil && s.state == runtimeapi.PodSandboxState_SANDBOX_READY {
			return s, true, nil
		}
		return nil, false, status.Errorf(codes.AlreadyExists, "RunPodSandbox: sandbox %s/%s (uid %s, attempt %d) already exists as %s and is not ready: remove it first",
			m.GetNamespace(), m.GetName(), m.GetUid(), m.GetAttempt(), id)
	}
	resolv, err := resolvConf(cfg.GetDnsConfig())
	if err != nil {
		return nil, false, status.Errorf(codes.InvalidArgument, "RunPodSandbox %s/%s: %v", m.GetNamespace(), m.GetName(), err)
	}
	if err := r.podNetworkReady(); err != nil { // as containerd's CNI setup fails
		return nil, false, status.Errorf(codes.Unavailable, "RunPodSandbox %s/%s: %v", m.GetNamespace(), m.GetName(), err)
	}
	if r.sandbox != nil {
		// The sandbox process mounts its root on the containers' directory.
		if _, err := r.containersDir(); err != nil {
			return nil, false, status.Errorf(codes.Internal, "RunPodSandbox %s/%s: %v", m.GetNamespace(), m.GetName(), err)
		}
	}
	ip, err := r.ips.Allocate()
	if err != nil {
		return nil, false, status.Errorf(codes.ResourceExhausted, "RunPodSandbox %s/%s: %v", m.GetNamespace(), m.GetName(), err)
	}
	hostname := cfg.GetHostname()
	if hostname == "" {
		hostname = m.GetName()
	}
	s := &sandbox{
		id: newID(),
		meta: &runtimeapi.PodSandboxMetadata{
			Name: m.GetName(), Namespace: m.GetNamespace(), Uid: m.GetUid(), Attempt: m.GetAttempt(),
		},
		labels:         copyMap(cfg.GetLabels()),
		annotations:    copyMap(cfg.GetAnnotations()),
		state:          runtimeapi.PodSandboxState_SANDBOX_NOTREADY, // until its address is added
		createdAt:      r.now(),
		ip:             ip,
		hostname:       hostname,
		resolvConf:     resolv,
		runtimeHandler: req.GetRuntimeHandler(),
		logDir:         cfg.GetLogDirectory(),
		cgroupParent:   cfg.GetLinux().GetCgroupParent(),
	}
	r.names[key] = s.id // reserved until it is added, or fails
	return s, false, nil
}

// StopPodSandbox makes the sandbox NOTREADY and kills its running
// containers at once, as containerd does. Stopping it twice, or stopping a
// sandbox that is gone, is not an error (the CRI says so).
func (r *Runtime) StopPodSandbox(_ context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, err := r.findSandbox(req.GetPodSandboxId())
	if status.Code(err) == codes.NotFound {
		return &runtimeapi.StopPodSandboxResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	r.stopSandbox(s)
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// stopSandbox kills s's containers and makes it NOTREADY. Caller holds mu.
func (r *Runtime) stopSandbox(s *sandbox) {
	for _, c := range r.containersOf(s.id) {
		r.kill(c)
	}
	if r.sandbox != nil {
		r.sandbox.stopPod(s.id) // its sandbox process ends with them
	}
	wasReady := s.state == runtimeapi.PodSandboxState_SANDBOX_READY
	if wasReady {
		// A stopped sandbox's network is torn down and its address goes
		// back to the range, as containerd's CNI DEL gives it back to
		// host-local: its status still names the address, which a new
		// sandbox may get. Kept until removal, the addresses of a kubelet
		// that never removes sandboxes (no container GC) ran out.
		if r.net != nil {
			r.net.DelIP(s.ip)
		}
		r.ips.Release(s.ip)
	}
	s.state = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if wasReady { // after its containers' events
		r.sandboxEvent(runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, s)
	}
}

// RemovePodSandbox removes the sandbox and all its containers, running or
// not. Removing a sandbox that is gone is not an error (the CRI says so).
func (r *Runtime) RemovePodSandbox(_ context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, err := r.findSandbox(req.GetPodSandboxId())
	if status.Code(err) == codes.NotFound {
		return &runtimeapi.RemovePodSandboxResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	r.removeSandbox(s)
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

// PodSandboxStatus returns the sandbox's status (`crictl inspectp`). With
// verbose, Info["info"] holds extra details as JSON, as containerd's does:
// the pod, its log directory, its containers, the CgroupParent it was
// given (its sandbox process's cgroup is a child of it) and, when its
// scripts run in a sandbox process, the user that process runs as.
func (r *Runtime) PodSandboxStatus(_ context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, err := r.findSandbox(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: s.status()}
	if req.GetVerbose() {
		var ids []string
		for _, c := range r.containersOf(s.id) {
			ids = append(ids, c.id)
		}
		info := map[string]any{"pod": s.podName(), "logDirectory": s.logDir, "containers": ids}
		if s.cgroupParent != "" {
			info["cgroupParent"] = s.cgroupParent
		}
		if r.sandbox != nil {
			if p := r.sandbox.lookup(s.id); p != nil {
				info["sandboxUID"] = p.uid.uid
			}
		}
		b, _ := json.Marshal(info)
		resp.Info = map[string]string{"info": string(b)}
	}
	return resp, nil
}

// status is the sandbox's status as PodSandboxStatus answers it without
// verbose, and as its container events carry it. Caller holds mu.
func (s *sandbox) status() *runtimeapi.PodSandboxStatus {
	return &runtimeapi.PodSandboxStatus{
		Id:             s.id,
		Metadata:       s.meta,
		State:          s.state,
		CreatedAt:      s.createdAt,
		Network:        &runtimeapi.PodSandboxNetworkStatus{Ip: s.ip},
		Linux:          &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{}}},
		Labels:         s.labels,
		Annotations:    s.annotations,
		RuntimeHandler: s.runtimeHandler,
	}
}

// ListPodSandbox lists sandboxes matching the filter (`crictl pods`): by ID
// or unique ID prefix, by state, by labels. Newest first.
func (r *Runtime) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f := req.GetFilter()
	r.mu.Lock()
	defer r.mu.Unlock()
	items := make([]*runtimeapi.PodSandbox, 0, len(r.sandboxes))
	for _, s := range r.sandboxes {
		if !strings.HasPrefix(s.id, f.GetId()) {
			continue
		}
		if f.GetState() != nil && f.GetState().GetState() != s.state {
			continue
		}
		if !labelsMatch(f.GetLabelSelector(), s.labels) {
			continue
		}
		items = append(items, s.listItem())
	}
	slices.SortFunc(items, func(a, b *runtimeapi.PodSandbox) int {
		return kubecontainer.NewestFirst(a.CreatedAt, a.Id, b.CreatedAt, b.Id)
	})
	return &runtimeapi.ListPodSandboxResponse{Items: items}, nil
}
