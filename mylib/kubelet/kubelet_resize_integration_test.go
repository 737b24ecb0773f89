package kubelet

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"mykubelet/mylib/events"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/scripts/testkit/testcluster"
)

// TestResizeStatusOnARealControlPlane runs a Kubelet with admission and a
// root directory against a real control plane: a running pod's container
// status shows its allocatedResources and the resources the runtime
// applies; a resize (the pods/resize subresource) asking for more CPU
// than is left beside another pod ends with PodResizePending, reason
// Deferred, at the pod's new generation, and changes neither. (One beyond
// the node's allocatable never reaches the kubelet: the API server refuses
// it, "node didn't have enough allocatable resources"; the unit tests
// cover Infeasible.)
func TestResizeStatusOnARealControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx, admin, _ := startResizeNode(t)
	var err error

	var node *v1.Node
	require.Eventually(t, func() bool {
		node, err = admin.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		return err == nil && node.Status.Allocatable.Cpu().MilliValue() > 0 && node.Status.Allocatable.Memory().Value() > 64<<20
	}, time.Minute, 100*time.Millisecond, "the node registers with allocatable CPU and memory")

	create := func(name, cpu string) {
		rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("64Mi")}
		_, err := admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "app", Image: "busybox:1.36",
				Command: []string{"sh", "-c", "sleep 3600"}, Resources: v1.ResourceRequirements{Requests: rl, Limits: rl}}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	allocatable := node.Status.Allocatable.Cpu().MilliValue()
	otherCPU := allocatable - 500 // leaves 500m: web's 100m fits, 1 CPU does not
	create("other", fmt.Sprintf("%dm", otherCPU))
	create("web", "100m")
	var pod *v1.Pod
	require.Eventually(t, func() bool {
		pod, err = admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && len(pod.Status.ContainerStatuses) == 1 && pod.Status.ContainerStatuses[0].State.Running != nil &&
			pod.Status.ContainerStatuses[0].Resources != nil
	}, time.Minute, 100*time.Millisecond, "the pod runs and its status shows its resources")
	cs := pod.Status.ContainerStatuses[0]
	assert.Equal(t, "100m", cs.AllocatedResources.Cpu().String())
	assert.Equal(t, "64Mi", cs.AllocatedResources.Memory().String())
	assert.Equal(t, "100m", cs.Resources.Requests.Cpu().String(), "the runtime's CPU request (from its shares)")
	assert.Equal(t, "100m", cs.Resources.Limits.Cpu().String(), "the runtime's CPU limit (from its quota)")
	assert.Equal(t, "64Mi", cs.Resources.Limits.Memory().String(), "the runtime's memory limit")

	// One CPU: within the node, not beside the other pod.
	pod.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("1")
	pod.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = resource.MustParse("1")
	resized, err := admin.CoreV1().Pods("default").UpdateResize(ctx, "web", pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	want := fmt.Sprintf("Node didn't have enough resource: cpu, requested: 1000, used: %d, capacity: %d", otherCPU, allocatable)
	var pending v1.PodCondition
	require.Eventually(t, func() bool {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range p.Status.Conditions {
			// CI once saw the condition first at generation 1 (not
			// looked into): what counts is that it reaches the
			// resize's generation.
			if c.Type == v1.PodResizePending && c.ObservedGeneration == resized.Generation {
				pending, pod = c, p
				return true
			}
		}
		return false
	}, time.Minute, 100*time.Millisecond, "PodResizePending appears at the resize's generation")
	assert.Equal(t, v1.ConditionTrue, pending.Status)
	assert.Equal(t, v1.PodReasonDeferred, pending.Reason)
	assert.Equal(t, want, pending.Message)
	cs = pod.Status.ContainerStatuses[0]
	assert.Equal(t, "100m", cs.AllocatedResources.Cpu().String(), "a deferred resize is not allocated")
	assert.Equal(t, "100m", cs.Resources.Limits.Cpu().String(), "nor applied")
	assert.Equal(t, int32(0), cs.RestartCount)
}

// TestResizeActuationOnARealControlPlane: a running pod's CPU and memory
// resized through the pods/resize subresource are applied in place: its
// status shows the new allocatedResources and resources, without
// PodResizePending or PodResizeInProgress, the same container ID and
// restart count, and the runtime reports (and enforces) the new limits.
func TestResizeActuationOnARealControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx, admin, runtime := startResizeNode(t)
	var err error

	require.Eventually(t, func() bool {
		node, err := admin.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		return err == nil && node.Status.Allocatable.Cpu().MilliValue() >= 1000 && node.Status.Allocatable.Memory().Value() > 256<<20
	}, time.Minute, 100*time.Millisecond, "the node registers with allocatable CPU and memory")

	rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")}
	_, err = admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "app", Image: "busybox:1.36",
			Command: []string{"sh", "-c", "sleep 3600"}, Resources: v1.ResourceRequirements{Requests: rl, Limits: rl.DeepCopy()}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	var pod *v1.Pod
	require.Eventually(t, func() bool {
		pod, err = admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && len(pod.Status.ContainerStatuses) == 1 && pod.Status.ContainerStatuses[0].State.Running != nil &&
			pod.Status.ContainerStatuses[0].Resources != nil
	}, time.Minute, 100*time.Millisecond, "the pod runs and its status shows its resources")
	before := pod.Status.ContainerStatuses[0]
	require.Equal(t, "64Mi", before.Resources.Limits.Memory().String())

	newRL := v1.ResourceList{v1.ResourceCPU: resource.MustParse("300m"), v1.ResourceMemory: resource.MustParse("128Mi")}
	pod.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: newRL, Limits: newRL.DeepCopy()}
	resized, err := admin.CoreV1().Pods("default").UpdateResize(ctx, "web", pod, metav1.UpdateOptions{})
	require.NoError(t, err)

	hasResizeCondition := func(p *v1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodResizeInProgress || c.Type == v1.PodResizePending {
				return true
			}
		}
		return false
	}
	require.Eventually(t, func() bool {
		pod, err = admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(pod.Status.ContainerStatuses) != 1 || pod.Status.ObservedGeneration < resized.Generation {
			return false
		}
		cs := pod.Status.ContainerStatuses[0]
		return cs.Resources != nil && cs.Resources.Limits.Memory().String() == "128Mi" && cs.Resources.Limits.Cpu().String() == "300m" &&
			!hasResizeCondition(pod)
	}, time.Minute, 100*time.Millisecond, "the resize is applied and no longer in progress")
	cs := pod.Status.ContainerStatuses[0]
	assert.Equal(t, "300m", cs.AllocatedResources.Cpu().String())
	assert.Equal(t, "128Mi", cs.AllocatedResources.Memory().String())
	assert.Equal(t, "300m", cs.Resources.Requests.Cpu().String(), "the runtime's CPU request (from its shares)")
	assert.Equal(t, before.ContainerID, cs.ContainerID, "resized in place, not replaced")
	assert.Equal(t, before.RestartCount, cs.RestartCount)
	require.NotNil(t, cs.State.Running)

	// A later sync (for a label's update here) writes the same resources:
	// the pod cache holds the resized container's, not the ones before.
	_, err = admin.CoreV1().Pods("default").Patch(ctx, "web", types.MergePatchType, []byte(`{"metadata":{"labels":{"synced":"again"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.Never(t, func() bool {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Resources != nil &&
			p.Status.ContainerStatuses[0].Resources.Limits.Cpu().String() != "300m"
	}, 3*time.Second, 100*time.Millisecond, "a sync after the resize writes the old resources back")

	_, id, _ := strings.Cut(cs.ContainerID, "://")
	resp, err := runtime.RuntimeService().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	require.NoError(t, err, "container %s", cs.ContainerID)
	linux := resp.GetStatus().GetResources().GetLinux()
	assert.Equal(t, int64(128<<20), linux.GetMemoryLimitInBytes(), "the runtime holds the container to the new memory limit")
	assert.Equal(t, int64(30000), linux.GetCpuQuota(), "and to the new CPU limit")

	// A pod with pod-level resources (the documentation's
	// pod-resources-demo): its containers set none, so each is created
	// with the pod's limits.
	_, err = admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-level"},
		Spec: v1.PodSpec{NodeName: "n1", Resources: &v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		}, Containers: []v1.Container{{Name: "app", Image: "busybox:1.36", Command: []string{"sh", "-c", "sleep 3600"}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		pod, err = admin.CoreV1().Pods("default").Get(ctx, "pod-level", metav1.GetOptions{})
		return err == nil && len(pod.Status.ContainerStatuses) == 1 && pod.Status.ContainerStatuses[0].State.Running != nil
	}, time.Minute, 100*time.Millisecond, "the pod with pod-level resources is admitted and runs")
	assert.Equal(t, v1.PodQOSBurstable, pod.Status.QOSClass)
	_, id, _ = strings.Cut(pod.Status.ContainerStatuses[0].ContainerID, "://")
	resp, err = runtime.RuntimeService().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	require.NoError(t, err)
	linux = resp.GetStatus().GetResources().GetLinux()
	assert.Equal(t, int64(64<<20), linux.GetMemoryLimitInBytes(), "the pod's memory limit")
	assert.Equal(t, int64(20000), linux.GetCpuQuota(), "the pod's CPU limit")
	assert.Equal(t, "100m", pod.Status.AllocatedResources.Cpu().String(), "status.allocatedResources: the pod's requests")
	require.NotNil(t, pod.Status.Resources, "status.resources")
	assert.Equal(t, "200m", pod.Status.Resources.Limits.Cpu().String())

	// Its pod-level resize: the API server takes it only from a node that
	// declares the feature; the container, which takes the pod's limits,
	// gets the new CPU limit in place.
	node, err := admin.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, node.Status.DeclaredFeatures, "InPlacePodLevelResourcesVerticalScaling")
	pod.Spec.Resources.Limits[v1.ResourceCPU] = resource.MustParse("300m")
	resized, err = admin.CoreV1().Pods("default").UpdateResize(ctx, "pod-level", pod, metav1.UpdateOptions{})
	require.NoError(t, err, "a pod-level resize, on a node that declares it")
	require.Eventually(t, func() bool {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "pod-level", metav1.GetOptions{})
		if err != nil || p.Status.ObservedGeneration < resized.Generation || hasResizeCondition(p) || p.Status.Resources == nil {
			return false
		}
		pod = p
		return p.Status.Resources.Limits.Cpu().String() == "300m"
	}, time.Minute, 100*time.Millisecond, "the pod-level resize is applied and no longer in progress")
	cs = pod.Status.ContainerStatuses[0]
	_, id2, _ := strings.Cut(cs.ContainerID, "://")
	assert.Equal(t, id, id2, "resized in place, not replaced")
	assert.Equal(t, int32(0), cs.RestartCount)
	resp, err = runtime.RuntimeService().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	require.NoError(t, err)
	assert.Equal(t, int64(30000), resp.GetStatus().GetResources().GetLinux().GetCpuQuota(), "the pod's new CPU limit")

	// A sidecar (an init container with restartPolicy Always) is resized
	// in place too, as a regular container.
	_, err = admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "with-sidecar"},
		Spec: v1.PodSpec{NodeName: "n1",
			InitContainers: []v1.Container{{Name: "sidecar", Image: "busybox:1.36", Command: []string{"sh", "-c", "sleep 3600"},
				RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways), Resources: v1.ResourceRequirements{Requests: rl, Limits: rl.DeepCopy()}}},
			Containers: []v1.Container{{Name: "app", Image: "busybox:1.36", Command: []string{"sh", "-c", "sleep 3600"},
				Resources: v1.ResourceRequirements{Requests: rl, Limits: rl.DeepCopy()}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		pod, err = admin.CoreV1().Pods("default").Get(ctx, "with-sidecar", metav1.GetOptions{})
		return err == nil && len(pod.Status.InitContainerStatuses) == 1 && pod.Status.InitContainerStatuses[0].State.Running != nil &&
			len(pod.Status.ContainerStatuses) == 1 && pod.Status.ContainerStatuses[0].State.Running != nil
	}, time.Minute, 100*time.Millisecond, "the sidecar and the app run")
	before = pod.Status.InitContainerStatuses[0]
	pod.Spec.InitContainers[0].Resources = v1.ResourceRequirements{Requests: newRL, Limits: newRL.DeepCopy()}
	resized, err = admin.CoreV1().Pods("default").UpdateResize(ctx, "with-sidecar", pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "with-sidecar", metav1.GetOptions{})
		if err != nil || p.Status.ObservedGeneration < resized.Generation || hasResizeCondition(p) || len(p.Status.InitContainerStatuses) != 1 {
			return false
		}
		pod = p
		r := p.Status.InitContainerStatuses[0].Resources
		return r != nil && r.Limits.Cpu().String() == "300m" && r.Limits.Memory().String() == "128Mi"
	}, time.Minute, 100*time.Millisecond, "the sidecar's resize is applied and no longer in progress")
	cs = pod.Status.InitContainerStatuses[0]
	assert.Equal(t, before.ContainerID, cs.ContainerID, "the sidecar resized in place, not replaced")
	assert.Equal(t, before.RestartCount, cs.RestartCount)
	_, id, _ = strings.Cut(cs.ContainerID, "://")
	resp, err = runtime.RuntimeService().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	require.NoError(t, err)
	assert.Equal(t, int64(30000), resp.GetStatus().GetResources().GetLinux().GetCpuQuota(), "the sidecar's new CPU limit")

	// A memory limit below what the container uses (the resize
	// chapter's exercise): the runtime refuses it, and the resize stays in
	// progress with reason Error and the refusal as its message, until a
	// limit that fits replaces it.
	hog := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("200Mi")}
	_, err = admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hog"},
		Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "app", Image: "polinux/stress",
			Command:   []string{"stress", "--vm", "1", "--vm-bytes", "50M", "--vm-hang", "1"},
			Resources: v1.ResourceRequirements{Requests: hog, Limits: hog.DeepCopy()}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		pod, err = admin.CoreV1().Pods("default").Get(ctx, "hog", metav1.GetOptions{})
		if err != nil || len(pod.Status.ContainerStatuses) != 1 || pod.Status.ContainerStatuses[0].State.Running == nil {
			return false
		}
		_, id, _ = strings.Cut(pod.Status.ContainerStatuses[0].ContainerID, "://")
		stats, err := runtime.RuntimeService().ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: id})
		return err == nil && stats.GetStats().GetMemory().GetWorkingSetBytes().GetValue() >= 50<<20
	}, time.Minute, 100*time.Millisecond, "stress runs and holds its 50M")
	resize := func(memory string) {
		t.Helper()
		p, err := admin.CoreV1().Pods("default").Get(ctx, "hog", metav1.GetOptions{})
		require.NoError(t, err)
		p.Spec.Containers[0].Resources.Limits[v1.ResourceMemory] = resource.MustParse(memory)
		p.Spec.Containers[0].Resources.Requests[v1.ResourceMemory] = resource.MustParse(memory)
		_, err = admin.CoreV1().Pods("default").UpdateResize(ctx, "hog", p, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	resize("20Mi")
	var inProgress v1.PodCondition
	require.Eventually(t, func() bool {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "hog", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodResizeInProgress && c.Reason == v1.PodReasonError {
				inProgress = c
				return true
			}
		}
		return false
	}, time.Minute, 100*time.Millisecond, "PodResizeInProgress, reason Error")
	assert.Contains(t, inProgress.Message, "device or resource busy", "the runtime's refusal")
	resize("80Mi")
	require.Eventually(t, func() bool {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "hog", metav1.GetOptions{})
		return err == nil && !hasResizeCondition(p) && p.Status.ContainerStatuses[0].Resources != nil &&
			p.Status.ContainerStatuses[0].Resources.Limits.Memory().String() == "80Mi"
	}, time.Minute, 100*time.Millisecond, "a limit that fits is applied, and the error goes with the condition")
}

// startResizeNode runs a Kubelet with admission and a root directory, on
// the mock runtime, as node n1 of a control plane of its own, until the
// test ends: the resize tests' node. It returns the test's context, the
// admin's clientset and the kubelet's connection to the runtime.
func startResizeNode(t *testing.T) (context.Context, *kubernetes.Clientset, *kuberuntime.Manager) {
	ctx, cancel := context.WithCancel(context.Background())
	c := testcluster.Start(t)
	client, eventClient, err := NewClients(c.UserConfig(t, "system:node:n1", "system:nodes"))
	require.NoError(t, err)

	clk := clock.RealClock{}
	sock := fakeruntimetest.Serve(t, fakeruntime.New(clk))
	runtime, err := kuberuntime.Connect(ctx, "unix://"+sock, clk)
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait(); runtime.Close() })
	podConfig, err := MakePodSourceConfig(ctx, &wg, PodSources{Client: client, NodeName: "n1", Clock: clk})
	require.NoError(t, err)
	recorder, stopEvents := events.NewRecorder(ctx, eventClient, "n1")
	t.Cleanup(stopEvents)
	kl, err := New(Config{Client: client, NodeName: "n1", Clock: clk,
		Node: &NodeConfig{Status: &NodeStatusOptions{RootDir: t.TempDir(), MaxPods: 10}},
		Pods: &PodsConfig{Updates: podConfig.Updates(), SourcesReady: podConfig.SeenAllSources, RemoteRuntimeService: runtime.RuntimeService(), RemoteImageService: runtime.ImageService(),
			RunContainers: true, Recorder: recorder, PodLogsDirectory: t.TempDir(), Admit: true, RootDirectory: t.TempDir()},
	})
	require.NoError(t, err)
	wg.Go(func() { _ = kl.Run(ctx) })
	return ctx, c.Clientset(t), runtime
}
