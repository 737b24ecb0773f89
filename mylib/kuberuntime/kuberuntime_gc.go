package kuberuntime

// Garbage collection of dead containers and sandboxes, as upstream's
// pkg/kubelet/kuberuntime/kuberuntime_gc.go (containerGC): every
// ContainerGCPeriod the kubelet removes
//
//   - every dead container and every dead sandbox of a pod that is gone
//     (deleted and terminated, or unknown once the pod sources are ready);
//   - of a pod still here, the dead containers beyond MaxPerPodContainer
//     per container name, oldest first (the default keeps one, the one
//     `kubectl logs --previous` reads), and its dead sandboxes but the newest;
//   - if MaxContainers is set, more until the node is under it.
//
// When disk is short, the eviction manager's DeleteAllUnusedContainers
// also removes everything a terminated pod left (an evicted one, not
// deleted), the container the policy would keep too.
//
// A container is evictable once it is not running and is older than
// MinAge. A sandbox that is ready or still holds a container is never
// removed.
//
// Where it departs from upstream, and why (one line each):
//   - the selection is a pure function (selectContainersToRemove,
//     selectSandboxesToRemove) and the removal a loop over it, so tests
//     can table the choice without a runtime;
//   - a container's log file and its rotated files are removed with it,
//     but there are no legacy /var/log/containers symlinks to clean (this
//     kubelet writes none);
//   - pod log directories of removed pods are not collected (upstream
//     evictPodLogsDirectories): they stay, empty, under the logs root.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"mykubelet/mylib/logs"
)

// ContainerGCPeriod is how often the kubelet collects garbage (upstream
// kubelet.go ContainerGCPeriod).
const ContainerGCPeriod = time.Minute

// GCPolicy says which dead containers to keep (upstream
// kubecontainer.GCPolicy).
type GCPolicy struct {
	// MinAge is the least age of a dead container before it is collected
	// (--minimum-container-ttl-duration, default 0).
	MinAge time.Duration
	// MaxPerPodContainer is how many dead containers to keep per pod and
	// container name; negative for no limit (--maximum-dead-containers-per-container, default 1).
	MaxPerPodContainer int
	// MaxContainers is how many dead containers to keep on the node;
	// negative for no limit (--maximum-dead-containers, default -1).
	MaxContainers int
}

// DefaultGCPolicy is the kubelet's default policy.
func DefaultGCPolicy() GCPolicy {
	return GCPolicy{MinAge: 0, MaxPerPodContainer: 1, MaxContainers: -1}
}

// PodStateProvider tells the collector whether a pod's leftovers may go
// (upstream podStateProvider, implemented by the pod workers).
type PodStateProvider interface {
	// ShouldPodContentBeRemoved: the pod is deleted and terminated (or
	// unknown once all pod sources are synced); its containers, sandboxes
	// and logs may all go.
	ShouldPodContentBeRemoved(uid types.UID) bool
	// ShouldPodRuntimeBeRemoved: the pod is terminated (but may not be
	// deleted yet); its containers may go when disk is short.
	ShouldPodRuntimeBeRemoved(uid types.UID) bool
}

// containerGCInfo is a dead container the collector may remove.
type containerGCInfo struct {
	id         string
	name       string
	createTime time.Time
	// unknown: its state is unknown, so it may be running; it is stopped before removal.
	unknown bool
}

// evictUnit is one pod's containers of one name.
type evictUnit struct {
	uid  types.UID
	name string
}

type containersByEvictUnit map[evictUnit][]containerGCInfo

func (u containersByEvictUnit) numContainers() int {
	n := 0
	for _, cs := range u {
		n += len(cs)
	}
	return n
}

// newestFirstByCreated sorts containers newest first, the order the
// collector keeps them in.
func newestFirstByCreated(cs []containerGCInfo) {
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].createTime.After(cs[j].createTime) })
}

// ContainerGC removes dead containers and sandboxes by a GCPolicy.
type ContainerGC struct {
	manager          *Manager
	podStateProvider PodStateProvider
	policy           GCPolicy

	// Report, if set before Run, is called after each collection that
	// removed something, with how many containers and sandboxes went.
	Report func(containers, sandboxes int)
	// AllSourcesReady, if set before use, is what DeleteAllUnusedContainers
	// asks (Run is given its own); nil: not ready, so only the dead
	// containers beyond the policy's limits go.
	AllSourcesReady func() bool
}

// NewContainerGC returns a collector of m's runtime. The policy's MinAge
// must not be negative.
func NewContainerGC(m *Manager, podStateProvider PodStateProvider, policy GCPolicy) (*ContainerGC, error) {
	if m == nil || podStateProvider == nil {
		return nil, errors.New("container garbage collector: a runtime manager and a pod state provider are required")
	}
	if policy.MinAge < 0 {
		return nil, fmt.Errorf("invalid minimum garbage collection age: %v", policy.MinAge)
	}
	return &ContainerGC{manager: m, podStateProvider: podStateProvider, policy: policy}, nil
}

// Run collects garbage every ContainerGCPeriod on the manager's clock
// until ctx ends. allSourcesReady tells whether every pod source has been
// seen (before that an unknown pod may just not have arrived yet).
func (cgc *ContainerGC) Run(ctx context.Context, allSourcesReady func() bool) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-cgc.manager.clock.After(ContainerGCPeriod):
			if err := cgc.GarbageCollect(ctx, allSourcesReady(), false); err != nil {
				klog.ErrorS(err, "Container garbage collection failed")
			}
		}
	}
}

// GarbageCollect removes dead containers, then sandboxes left empty, by
// the policy. evictNonDeletedPods also removes what terminated pods left
// (upstream does so when disk is short).
func (cgc *ContainerGC) GarbageCollect(ctx context.Context, allSourcesReady, evictNonDeletedPods bool) error {
	var errs []error
	removedContainers, removedSandboxes := 0, 0
	defer func() {
		if cgc.Report != nil && removedContainers+removedSandboxes > 0 {
			cgc.Report(removedContainers, removedSandboxes)
		}
	}()
	units, err := cgc.evictableContainers(ctx)
	if err != nil {
		return err
	}
	for _, c := range selectContainersToRemove(units, cgc.policy, allSourcesReady, evictNonDeletedPods, cgc.podStateProvider) {
		if err := cgc.removeContainer(ctx, c); err != nil {
			errs = append(errs, err)
		} else {
			removedContainers++
		}
	}
	sandboxes, err := cgc.manager.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("CRI ListPodSandbox: %w", err))...)
	}
	containers, err := cgc.manager.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("CRI ListContainers: %w", err))...)
	}
	withContainers := map[string]bool{}
	for _, c := range containers.GetContainers() {
		withContainers[c.PodSandboxId] = true
	}
	for _, id := range selectSandboxesToRemove(sandboxes.GetItems(), withContainers, evictNonDeletedPods, cgc.podStateProvider) {
		if err := cgc.removeSandbox(ctx, id); err != nil {
			errs = append(errs, err)
		} else {
			removedSandboxes++
		}
	}
	return errors.Join(errs...)
}

// evictableContainers lists the dead containers older than MinAge, by
// evict unit, newest first.
func (cgc *ContainerGC) evictableContainers(ctx context.Context) (containersByEvictUnit, error) {
	resp, err := cgc.manager.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return nil, fmt.Errorf("CRI ListContainers: %w", err)
	}
	newestGCTime := cgc.manager.clock.Now().Add(-cgc.policy.MinAge)
	units := containersByEvictUnit{}
	for _, c := range resp.GetContainers() {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING || c.GetMetadata() == nil {
			continue
		}
		created := time.Unix(0, c.CreatedAt)
		if newestGCTime.Before(created) {
			continue
		}
		key := evictUnit{uid: getContainerInfoFromLabels(c.Labels).PodUID, name: c.Metadata.Name}
		units[key] = append(units[key], containerGCInfo{
			id: c.Id, name: c.Metadata.Name, createTime: created,
			unknown: c.State == runtimeapi.ContainerState_CONTAINER_UNKNOWN,
		})
	}
	for _, cs := range units {
		newestFirstByCreated(cs)
	}
	return units, nil
}

// selectContainersToRemove applies the policy to the evictable
// containers and returns those to remove, in upstream's order: every
// container of pods that are gone (once all sources are ready), then the
// oldest beyond MaxPerPodContainer of each unit, then, over MaxContainers,
// an even share per unit (at least one) and finally the oldest on the node.
func selectContainersToRemove(units containersByEvictUnit, policy GCPolicy, allSourcesReady, evictNonDeletedPods bool, psp PodStateProvider) []containerGCInfo {
	// Work on a copy: the caller's lists stay as they were.
	left := make(containersByEvictUnit, len(units))
	for k, cs := range units {
		left[k] = append([]containerGCInfo(nil), cs...)
	}
	var remove []containerGCInfo
	removeOldestN := func(cs []containerGCInfo, n int) []containerGCInfo {
		keep := len(cs) - n
		if keep < 0 {
			keep = 0
		}
		for i := len(cs) - 1; i >= keep; i-- {
			remove = append(remove, cs[i])
		}
		return cs[:keep]
	}
	keys := make([]evictUnit, 0, len(left))
	for k := range left {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { // a stable order, for stable results
		if keys[i].uid != keys[j].uid {
			return keys[i].uid < keys[j].uid
		}
		return keys[i].name < keys[j].name
	})

	if allSourcesReady {
		for _, k := range keys {
			if psp.ShouldPodContentBeRemoved(k.uid) || (evictNonDeletedPods && psp.ShouldPodRuntimeBeRemoved(k.uid)) {
				removeOldestN(left[k], len(left[k]))
				delete(left, k)
			}
		}
	}
	enforcePerUnit := func(max int) {
		for _, k := range keys {
			if cs, ok := left[k]; ok && len(cs) > max {
				left[k] = removeOldestN(cs, len(cs)-max)
			}
		}
	}
	if policy.MaxPerPodContainer >= 0 {
		enforcePerUnit(policy.MaxPerPodContainer)
	}
	if policy.MaxContainers >= 0 && left.numContainers() > policy.MaxContainers {
		perUnit := 1
		if len(left) > 0 {
			perUnit = max(policy.MaxContainers/len(left), 1)
		}
		enforcePerUnit(perUnit)
		if n := left.numContainers(); n > policy.MaxContainers {
			var flat []containerGCInfo
			for _, k := range keys {
				flat = append(flat, left[k]...)
			}
			newestFirstByCreated(flat)
			removeOldestN(flat, n-policy.MaxContainers)
		}
	}
	return remove
}

// selectSandboxesToRemove returns the sandboxes to remove: of a pod that
// is gone, every one not active; of a pod still here, every one not
// active but the newest. A sandbox is active if it is ready or still
// holds a container (withContainers).
func selectSandboxesToRemove(sandboxes []*runtimeapi.PodSandbox, withContainers map[string]bool, evictNonDeletedPods bool, psp PodStateProvider) []string {
	type info struct {
		id      string
		created int64
		active  bool
	}
	byPod := map[types.UID][]info{}
	var uids []types.UID
	for _, s := range sandboxes {
		if s.GetMetadata() == nil {
			continue
		}
		uid := types.UID(s.Metadata.Uid)
		if _, ok := byPod[uid]; !ok {
			uids = append(uids, uid)
		}
		byPod[uid] = append(byPod[uid], info{id: s.Id, created: s.CreatedAt,
			active: s.State == runtimeapi.PodSandboxState_SANDBOX_READY || withContainers[s.Id]})
	}
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
	var remove []string
	for _, uid := range uids {
		ss := byPod[uid]
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].created > ss[j].created })
		keep := 1
		if psp.ShouldPodContentBeRemoved(uid) || (evictNonDeletedPods && psp.ShouldPodRuntimeBeRemoved(uid)) {
			keep = 0 // the newest dead one goes too
		}
		for i := len(ss) - 1; i >= keep; i-- {
			if !ss[i].active {
				remove = append(remove, ss[i].id)
			}
		}
	}
	return remove
}

// removeContainer removes a dead container and its log files; one in an
// unknown state is stopped first, as it may still run.
func (cgc *ContainerGC) removeContainer(ctx context.Context, c containerGCInfo) error {
	rs := cgc.manager.rs
	if c.unknown {
		if _, err := rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.id, Timeout: minimumGracePeriodInSeconds}); err != nil {
			return fmt.Errorf("stop container %q (%s) in an unknown state before removal: %w", c.name, c.id, err)
		}
	}
	if resp, err := rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.id}); err == nil {
		if path := resp.GetStatus().GetLogPath(); path != "" {
			files, err := logs.GetAllLogs(path) // the rotated files too, as upstream's ContainerLogManager.Clean
			if err != nil {
				files = []string{path}
			}
			for _, f := range files {
				if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
					klog.ErrorS(err, "Failed to remove container log", "containerName", c.name, "containerID", c.id, "path", f)
				}
			}
		}
	}
	klog.V(4).InfoS("Removing container", "containerName", c.name, "containerID", c.id)
	if _, err := rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c.id}); err != nil {
		return fmt.Errorf("remove container %q (%s): %w", c.name, c.id, err)
	}
	return nil
}

// removeSandbox stops (in case the kubelet did not) and removes a sandbox.
func (cgc *ContainerGC) removeSandbox(ctx context.Context, id string) error {
	rs := cgc.manager.rs
	if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		return fmt.Errorf("stop sandbox %s before removal: %w", id, err)
	}
	klog.V(4).InfoS("Removing sandbox", "sandboxID", id)
	if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", id, err)
	}
	return nil
}

// DeleteAllUnusedContainers removes every dead container and sandbox the
// collector may, those of pods terminated but not yet deleted too, all of
// them whatever MaxPerPodContainer says (upstream's
// ContainerGC.DeleteAllUnusedContainers, GarbageCollect with
// evictNonDeletedPods: the eviction manager's reclaim when disk is short).
func (cgc *ContainerGC) DeleteAllUnusedContainers(ctx context.Context) error {
	ready := cgc.AllSourcesReady != nil && cgc.AllSourcesReady()
	return cgc.GarbageCollect(ctx, ready, true)
}
