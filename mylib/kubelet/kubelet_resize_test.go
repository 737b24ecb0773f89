package kubelet

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"mykubelet/mylib/allocation"
	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/kubetypes"
	kubepod "mykubelet/mylib/pod"
)

func cpuMemory(cpu, memory string) v1.ResourceList {
	return v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(memory)}
}

func resizablePod(cpu, memory string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: v1.PodSpec{NodeName: "node-a", RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{
			Name: "app", Image: "busybox:1.37", ImagePullPolicy: v1.PullIfNotPresent,
			Resources: v1.ResourceRequirements{Requests: cpuMemory(cpu, memory), Limits: cpuMemory(cpu, memory)},
		}}},
	}
}

func newAllocationManager(t *testing.T) *allocation.Manager {
	t.Helper()
	m, err := allocation.NewManager(t.TempDir())
	require.NoError(t, err)
	return m
}

// A running container's status shows its allocation's requests as
// allocatedResources, and as resources what the runtime applies: after
// the allocation grew, the runtime's (old) values until it applies the new.
func TestRunningContainerStatusShowsAllocatedAndRuntimeResources(t *testing.T) {
	pod := resizablePod("500m", "128Mi")
	client := fake.NewClientset(pod.DeepCopy())
	pm := kubepod.NewBasicPodManager()
	pm.AddPod(pod)
	p := newPodPipeline(t, client, pm)
	kl := &Kubelet{allocationManager: newAllocationManager(t)}
	kl.allocate(pod)
	require.NotNil(t, p.m.SyncPod(context.Background(), pod, p.runtimeStatus(t, pod), nil, nil))

	ps := p.runtimeStatus(t, pod)
	require.Len(t, ps.ContainerStatuses, 1)
	require.NotNil(t, ps.ContainerStatuses[0].Resources, "the runtime reported no resources")
	s := generateAPIPodStatusProbed(pod, ps, v1.PodStatus{}, false, nil, nil, nil, kl.allocations())
	require.Len(t, s.ContainerStatuses, 1)
	cs := s.ContainerStatuses[0]
	require.NotNil(t, cs.State.Running)
	assert.Equal(t, "500m", cs.AllocatedResources.Cpu().String())
	assert.Equal(t, "128Mi", cs.AllocatedResources.Memory().String())
	require.NotNil(t, cs.Resources)
	assert.Equal(t, "500m", cs.Resources.Requests.Cpu().String())
	assert.Equal(t, "500m", cs.Resources.Limits.Cpu().String())
	assert.Equal(t, "128Mi", cs.Resources.Limits.Memory().String())
	assert.Equal(t, "128Mi", cs.Resources.Requests.Memory().String(), "no cgroup holds a memory request: the allocation's")

	// The allocation grows; the runtime still applies the old values.
	require.NoError(t, kl.allocationManager.SetAllocatedResources(resizablePod("1", "256Mi")))
	cs = generateAPIPodStatusProbed(pod, ps, s, false, nil, nil, nil, kl.allocations()).ContainerStatuses[0]
	assert.Equal(t, "1", cs.AllocatedResources.Cpu().String())
	assert.Equal(t, "256Mi", cs.AllocatedResources.Memory().String())
	assert.Equal(t, "500m", cs.Resources.Requests.Cpu().String(), "resources are the runtime's")
	assert.Equal(t, "500m", cs.Resources.Limits.Cpu().String(), "resources are the runtime's")
	assert.Equal(t, "128Mi", cs.Resources.Limits.Memory().String(), "resources are the runtime's")
	assert.Equal(t, "256Mi", cs.Resources.Requests.Memory().String(), "the memory request is the allocation's")
}

func TestContainerStatusResourcesWithoutRuntimeWord(t *testing.T) {
	pod := resizablePod("500m", "128Mi")
	kl := &Kubelet{allocationManager: newAllocationManager(t)}
	kl.allocate(pod)
	running := rtStatus("app", "c1", kubecontainer.ContainerStateRunning, 0, 0, podT0)
	ps := &kubecontainer.PodStatus{ID: pod.UID, ContainerStatuses: []*kubecontainer.Status{running}}

	// The previous status of the same running container said 300m: kept.
	old := v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "app", ContainerID: running.ID.String(),
		State:     v1.ContainerState{Running: &v1.ContainerStateRunning{}},
		Resources: &v1.ResourceRequirements{Requests: cpuMemory("300m", "128Mi"), Limits: cpuMemory("300m", "64Mi")}}}}
	cs := generateAPIPodStatusProbed(pod, ps, old, false, nil, nil, nil, kl.allocations()).ContainerStatuses[0]
	assert.Equal(t, "300m", cs.Resources.Requests.Cpu().String())
	assert.Equal(t, "300m", cs.Resources.Limits.Cpu().String())
	assert.Equal(t, "64Mi", cs.Resources.Limits.Memory().String())

	// An exited container shows its allocation.
	exited := rtStatus("app", "c1", kubecontainer.ContainerStateExited, 0, 1, podT0)
	ps.ContainerStatuses = []*kubecontainer.Status{exited}
	cs = generateAPIPodStatusProbed(pod, ps, old, false, nil, nil, nil, kl.allocations()).ContainerStatuses[0]
	assert.Equal(t, "500m", cs.Resources.Limits.Cpu().String())
	assert.Equal(t, "128Mi", cs.Resources.Limits.Memory().String())

	// Without an allocation manager, the status is as it always was.
	cs = generateAPIPodStatus(pod, ps, old, false, nil, nil).ContainerStatuses[0]
	assert.Nil(t, cs.Resources)
	assert.Nil(t, cs.AllocatedResources)
}

func TestAllocationIsRecordedOnceAndForgottenWithThePod(t *testing.T) {
	kl := &Kubelet{allocationManager: newAllocationManager(t)}
	pod := resizablePod("500m", "128Mi")
	kl.allocate(pod)
	// A second ADD (after a kubelet restart) with a resized spec keeps
	// what was allocated.
	kl.allocate(resizablePod("2", "1Gi"))
	got, ok := kl.allocationManager.GetContainerResourceAllocation(pod.UID, "app")
	require.True(t, ok)
	assert.Equal(t, "500m", got.Requests.Cpu().String())

	ended := resizablePod("1", "1Gi")
	ended.UID, ended.Status.Phase = "uid-ended", v1.PodSucceeded
	kl.allocate(ended)
	_, ok = kl.allocationManager.GetContainerResourceAllocation("uid-ended", "app")
	assert.False(t, ok, "an ended pod got an allocation")

	kl.removeOrphanedAllocations(nil)
	_, ok = kl.allocationManager.GetContainerResourceAllocation(pod.UID, "app")
	assert.False(t, ok, "the allocation of a pod that is gone is still there")
}

// newResizeFixture: admission on, against a Node with 2 CPUs and 1Gi
// allocatable, and an allocation manager.
func newResizeFixture(t *testing.T) *podFixture {
	t.Helper()
	f, _ := newAdmissionFixture(t, 10)
	f.kl.admission.node = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourcePods: resource.MustParse("10"), v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi")}}}
	f.kl.admission.nodeAt = f.clock.Now()
	f.kl.allocationManager = newAllocationManager(t)
	return f
}

func sized(p *v1.Pod, cpu, memory string) *v1.Pod {
	p = p.DeepCopy()
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: cpuMemory(cpu, memory), Limits: cpuMemory(cpu, memory)}
	return p
}

func resizeConditions(kl *Kubelet, pod *v1.Pod) []v1.PodCondition {
	var s v1.PodStatus
	kl.withResizeConditions(pod, &s)
	return s.Conditions
}

func allocatedCPU(t *testing.T, kl *Kubelet, pod *v1.Pod) string {
	t.Helper()
	r, ok := kl.allocationManager.GetContainerResourceAllocation(pod.UID, pod.Spec.Containers[0].Name)
	require.True(t, ok, "no allocation")
	return r.Requests.Cpu().String()
}

func TestResizeBeyondAllocatableIsInfeasibleAndDeferredUntilRoomIsMade(t *testing.T) {
	f := newResizeFixture(t)
	ctx := context.Background()
	web := sized(created(apiPod("web", "u1"), t0), "1", "256Mi")
	other := sized(created(apiPod("other", "u2"), t0), "500m", "256Mi")
	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{web, other}}, nil, false, false)
	assert.Equal(t, "1", allocatedCPU(t, f.kl, web), "the allocation is recorded at admission")

	// 4 CPUs: more than the node has.
	web = sized(web, "4", "256Mi")
	web.Generation = 2
	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.UPDATE, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{web}}, nil, false, false)
	conds := resizeConditions(f.kl, web)
	require.Len(t, conds, 1)
	assert.Equal(t, v1.PodResizePending, conds[0].Type)
	assert.Equal(t, v1.ConditionTrue, conds[0].Status)
	assert.Equal(t, v1.PodReasonInfeasible, conds[0].Reason)
	assert.Equal(t, "Node didn't have enough capacity: cpu, requested: 4000, capacity: 2000", conds[0].Message)
	assert.Equal(t, int64(2), conds[0].ObservedGeneration)
	assert.Equal(t, "1", allocatedCPU(t, f.kl, web), "an infeasible resize is not allocated")

	// 1600m: within the node, not beside the other pod's 500m.
	web = sized(web, "1600m", "256Mi")
	web.Generation = 3
	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.UPDATE, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{web}}, nil, false, false)
	conds = resizeConditions(f.kl, web)
	require.Len(t, conds, 1)
	assert.Equal(t, v1.PodReasonDeferred, conds[0].Reason)
	assert.Equal(t, "Node didn't have enough resource: cpu, requested: 1600, used: 500, capacity: 2000", conds[0].Message)
	assert.Equal(t, int64(3), conds[0].ObservedGeneration)
	assert.Equal(t, "1", allocatedCPU(t, f.kl, web), "a deferred resize is not allocated")

	// The other pod goes: the deferred resize is retried and allocated.
	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.REMOVE, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{other}}, nil, false, false)
	assert.Equal(t, "1600m", allocatedCPU(t, f.kl, web))
	assert.Empty(t, resizeConditions(f.kl, web), "no pending condition once allocated (nothing runs yet: none in progress)")
	assert.Contains(t, f.out.String(), "pod default/web resize allocated")
}

func TestAcceptedResizeOfARunningContainerIsInProgressUntilActuated(t *testing.T) {
	f := newResizeFixture(t)
	ctx := context.Background()
	web := sized(created(apiPod("web", "u1"), t0), "500m", "256Mi")
	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{web}}, nil, false, false)
	require.NoError(t, f.kl.allocationManager.SetActuatedResources(web, nil))
	f.kl.podCache.Set(web.UID, &kubecontainer.PodStatus{ID: web.UID, ContainerStatuses: []*kubecontainer.Status{
		{Name: "c", State: kubecontainer.ContainerStateRunning}}}, nil, t0)

	resized := sized(web, "1", "512Mi")
	resized.Generation = 2
	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.UPDATE, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{resized}}, nil, false, false)
	assert.Equal(t, "1", allocatedCPU(t, f.kl, web))
	conds := resizeConditions(f.kl, resized)
	require.Len(t, conds, 1)
	assert.Equal(t, v1.PodResizeInProgress, conds[0].Type)
	assert.Equal(t, int64(2), conds[0].ObservedGeneration)

	// Actuated: no longer in progress.
	require.NoError(t, f.kl.allocationManager.SetActuatedResources(resized, nil))
	f.kl.updateResizeInProgress(resized)
	assert.Empty(t, resizeConditions(f.kl, resized))
}

func TestAPodNeverResizedGetsNoResizeCondition(t *testing.T) {
	f := newResizeFixture(t)
	ctx := context.Background()
	web := sized(created(apiPod("web", "u1"), t0), "500m", "256Mi")
	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{web}}, nil, false, false)
	labelled := web.DeepCopy()
	labelled.Labels = map[string]string{"a": "b"}
	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.UPDATE, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{labelled}}, nil, false, false)
	assert.Empty(t, resizeConditions(f.kl, labelled))
	assert.Empty(t, f.kl.pendingResizes.uids)
}

// A resize allocated when its update arrives is synced once more, after
// the allocation: the sync the update itself asked for may have run with
// the old one (upstream: RetryPendingResizes triggers a pod sync).
func TestAllocatedResizeIsSyncedAfterItsAllocation(t *testing.T) {
	f := newResizeFixture(t)
	ctx := context.Background()
	web := sized(created(apiPod("web", "u1"), t0), "500m", "256Mi")
	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{web}}, nil, false, false)

	resized := sized(web, "1", "256Mi")
	resized.Generation = 2
	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.UPDATE, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{resized}}, nil, false, false)
	assert.Equal(t, "1", allocatedCPU(t, f.kl, web))
	assert.Empty(t, resizeConditions(f.kl, resized), "allocated at once, and nothing runs yet: no condition changed")
	// Allocated before the update is handed to the pod's worker: its sync
	// of generation 2 applies the resize (or says it is in progress).
	assert.Equal(t, []string{"create web", "sync web", "update web"}, f.workers.dispatched())
}

// A kubelet restarted in the middle of a deferred resize admits each pod
// with what was allocated to it (the checkpoint), not with what its spec
// asks: the resize it had deferred takes no room, the other pod is
// admitted, and the resize stays deferred (upstream's AddPod).
func TestRestartInTheMiddleOfADeferredResizeAdmitsWithTheAllocation(t *testing.T) {
	f := newResizeFixture(t)
	ctx := context.Background()
	web := sized(created(apiPod("web", "u1"), t0), "1", "256Mi")
	require.NoError(t, f.kl.allocationManager.SetAllocatedResources(web), "checkpointed before the restart")
	deferred := sized(web, "1600m", "256Mi")
	deferred.Generation = 2
	other := sized(created(apiPod("other", "u2"), t0.Add(time.Second)), "500m", "256Mi")

	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{deferred, other}}, nil, false, false)
	assert.Contains(t, f.workers.dispatched(), "create other", "admitted beside web's 1 CPU")
	assert.NotContains(t, f.out.String(), "rejected")
	assert.Equal(t, "1", allocatedCPU(t, f.kl, web), "the allocation checkpointed before the restart")
	conds := resizeConditions(f.kl, deferred)
	require.Len(t, conds, 1)
	assert.Equal(t, v1.PodReasonDeferred, conds[0].Reason)
}

// A pod-level resize (spec.resources) of a running pod is allocated and
// in progress until the pod-level resources are actuated, even when no
// container's own resources change.
func TestAcceptedPodLevelResizeIsInProgressUntilActuated(t *testing.T) {
	f := newResizeFixture(t)
	ctx := context.Background()
	web := created(apiPod("web", "u1"), t0)
	podLevel := v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("128Mi")}}
	podLevel.Limits = podLevel.Requests.DeepCopy()
	web.Spec.Resources = &podLevel
	web = sized(web, "100m", "64Mi") // its container's own: a pod-level change leaves them
	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{web}}, nil, false, false)
	require.NoError(t, f.kl.allocationManager.SetActuatedResources(web, nil))
	f.kl.podCache.Set(web.UID, &kubecontainer.PodStatus{ID: web.UID, ContainerStatuses: []*kubecontainer.Status{
		{Name: "c", State: kubecontainer.ContainerStateRunning}}}, nil, t0)

	resized := web.DeepCopy()
	resized.Spec.Resources.Limits[v1.ResourceCPU] = resource.MustParse("300m")
	resized.Spec.Resources.Requests[v1.ResourceCPU] = resource.MustParse("300m")
	resized.Generation = 2
	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.UPDATE, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{resized}}, nil, false, false)
	allocated, _ := f.kl.allocationManager.UpdatePodFromAllocation(web)
	assert.Equal(t, "300m", allocated.Spec.Resources.Limits.Cpu().String(), "the pod-level resize is allocated")
	conds := resizeConditions(f.kl, resized)
	require.Len(t, conds, 1)
	assert.Equal(t, v1.PodResizeInProgress, conds[0].Type)

	// Actuated (the runtime manager records the pod-level resources once
	// the pod cgroup and every container that takes its limits have
	// them): no longer in progress.
	require.NoError(t, f.kl.allocationManager.SetActuatedPodLevelResources(resized))
	f.kl.updateResizeInProgress(resized)
	assert.Empty(t, resizeConditions(f.kl, resized))
}
