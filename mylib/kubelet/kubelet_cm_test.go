package kubelet

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"mykubelet/mylib/cm"
	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/podworkers"
)

// podsHaveIP: the probes may reach the pod IPs of this node's pods, from
// the status the kubelet computed (else the pod's), and no others: not
// another node's pod, not a hostNetwork pod's (the node's own address).
func TestPodsHaveIP(t *testing.T) {
	mk := func(uid, node string, hostNetwork bool, ips ...string) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}, Spec: v1.PodSpec{NodeName: node, HostNetwork: hostNetwork}}
		for _, ip := range ips {
			p.Status.PodIPs = append(p.Status.PodIPs, v1.PodIP{IP: ip})
		}
		return p
	}
	pods := []*v1.Pod{
		mk("a", "node-1", false), // its IP is in the kubelet's status only
		mk("b", "node-1", false, "10.244.7.10", "fd00::10"),
		mk("c", "node-2", false, "10.244.8.9"),
		mk("d", "node-1", true, "192.168.1.5"),
	}
	status := func(uid types.UID) (v1.PodStatus, bool) {
		if uid == "a" {
			return v1.PodStatus{PodIPs: []v1.PodIP{{IP: "10.244.7.9"}}}, true
		}
		return v1.PodStatus{}, false
	}
	for ip, want := range map[string]bool{
		"10.244.7.9": true, "10.244.7.10": true, "fd00::10": true,
		"10.244.8.9":  false, // another node's pod
		"192.168.1.5": false, // a hostNetwork pod: the node's address
		"10.244.7.11": false, "127.0.0.1": false,
	} {
		assert.Equal(t, want, podsHaveIP(pods, "node-1", status, netip.MustParseAddr(ip)), ip)
	}
}

func TestPossiblyRunningPods(t *testing.T) {
	got := possiblyRunningPods(map[types.UID]podworkers.PodWorkerSync{
		"syncing": {State: podworkers.SyncPod}, "terminating": {State: podworkers.TerminatingPod},
		"terminated": {State: podworkers.TerminatedPod},
	})
	assert.Equal(t, map[types.UID]bool{"syncing": true, "terminating": true}, got)
}

// Without a container manager (or with the stub) there are no pod
// cgroups: the sandbox's CgroupParent is "" and nothing is made.
func TestNoPodCgroupsWithoutContainerManager(t *testing.T) {
	kl := &Kubelet{}
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u"}}
	assert.Equal(t, "", kl.GetPodCgroupParent(p))
	assert.NoError(t, kl.ensurePodCgroup(p))
	assert.Nil(t, kl.podCgroups())
	kl.containerManager = cm.NewStubContainerManager()
	assert.Equal(t, "", kl.GetPodCgroupParent(p))
	assert.NoError(t, kl.destroyPodCgroup(p))
}

// cgroupKubelet is a Kubelet with a container manager over a cgroup v1
// layout in a directory (the cgroup files are plain files there).
func cgroupKubelet(t *testing.T, pods ...*v1.Pod) (*Kubelet, *cm.CgroupSubsystems) {
	t.Helper()
	dir := t.TempDir()
	cs := &cm.CgroupSubsystems{MountPoints: map[string]string{}}
	for _, c := range []string{"cpu", "cpuacct", "memory", "pids"} {
		cs.MountPoints[c] = filepath.Join(dir, c)
		require.NoError(t, os.MkdirAll(cs.MountPoints[c], 0o755))
	}
	m, err := cm.NewContainerManager(cs, v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")},
		cm.NodeConfig{CgroupsPerQOS: true, EnforceNodeAllocatable: []string{"pods"}, EnforceCPULimits: true})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, m.Start(ctx, func() []*v1.Pod { return pods }))
	return &Kubelet{containerManager: m, recorder: record.NewFakeRecorder(10)}, cs
}

// A pod's cgroup is made with its limits and named as the sandbox's
// CgroupParent; housekeeping removes it once no worker syncs or
// terminates the pod, and not before.
func TestPodCgroupLifecycle(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-1", Name: "web", Namespace: "default"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app",
		Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("32Mi")}}}}}}
	pod.Spec.Containers[0].Resources.Requests = pod.Spec.Containers[0].Resources.Limits
	kl, cs := cgroupKubelet(t, pod)
	assert.Equal(t, "/kubepods/poduid-1", kl.GetPodCgroupParent(pod), "Guaranteed: straight under kubepods")
	require.NoError(t, kl.ensurePodCgroup(pod))
	b, err := os.ReadFile(filepath.Join(cs.MountPoints["cpu"], "kubepods", "poduid-1", "cpu.cfs_quota_us"))
	require.NoError(t, err)
	assert.Equal(t, "20000", string(b))
	b, err = os.ReadFile(filepath.Join(cs.MountPoints["memory"], "kubepods", "poduid-1", "memory.limit_in_bytes"))
	require.NoError(t, err)
	assert.Equal(t, "33554432", string(b))

	found := kl.podCgroups()
	require.Contains(t, found, types.UID("uid-1"))
	kl.cleanupOrphanedPodCgroups(found, map[types.UID]bool{"uid-1": true})
	assert.DirExists(t, filepath.Join(cs.MountPoints["cpu"], "kubepods", "poduid-1"), "its worker still runs it")
	kl.cleanupOrphanedPodCgroups(found, map[types.UID]bool{})
	for _, mp := range cs.MountPoints {
		assert.NoDirExists(t, filepath.Join(mp, "kubepods", "poduid-1"))
	}
	assert.Empty(t, kl.podCgroups())

	require.NoError(t, kl.ensurePodCgroup(pod))
	require.NoError(t, kl.destroyPodCgroup(pod), "SyncTerminatedPod's")
	assert.NoDirExists(t, filepath.Join(cs.MountPoints["memory"], "kubepods", "poduid-1"))
}

// Two kubelets on one machine share /kubepods: housekeeping removes the
// orphaned cgroups of the pods it made, never another kubelet's.
func TestHousekeepingLeavesAnotherKubeletsPodCgroups(t *testing.T) {
	mine := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-mine", Name: "mine", Namespace: "default"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}}}
	theirs := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-theirs", Name: "theirs", Namespace: "default"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}}}
	kl, cs := cgroupKubelet(t)
	other := &Kubelet{containerManager: kl.containerManager, recorder: record.NewFakeRecorder(10)}
	require.NoError(t, kl.ensurePodCgroup(mine))
	require.NoError(t, other.ensurePodCgroup(theirs))
	found := kl.podCgroups()
	require.Len(t, found, 2)
	kl.cleanupOrphanedPodCgroups(found, map[types.UID]bool{})
	assert.NoDirExists(t, filepath.Join(cs.MountPoints["memory"], "kubepods", "besteffort", "poduid-mine"))
	assert.DirExists(t, filepath.Join(cs.MountPoints["memory"], "kubepods", "besteffort", "poduid-theirs"), "another kubelet's pod")
	other.cleanupOrphanedPodCgroups(other.podCgroups(), map[types.UID]bool{})
	assert.NoDirExists(t, filepath.Join(cs.MountPoints["memory"], "kubepods", "besteffort", "poduid-theirs"))
}

// A kubelet that stops with pods still bound removes the cgroups of the
// pods it made, and only those: with the mock runtime no process is in
// them, and on this course's machine no later kubelet removes them
// (housekeeping removes only its own). Before, every chapter test that
// ended with pods bound left their empty pod<uid> cgroups under kubepods.
func TestRunRemovesItsPodCgroupsOnExit(t *testing.T) {
	mine := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-mine", Name: "mine", Namespace: "default"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}}}
	theirs := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-theirs", Name: "theirs", Namespace: "default"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}}}
	kl, cs := cgroupKubelet(t)
	other := &Kubelet{containerManager: kl.containerManager, recorder: record.NewFakeRecorder(10)}
	require.NoError(t, kl.ensurePodCgroup(mine))
	require.NoError(t, other.ensurePodCgroup(theirs))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, kl.Run(ctx))
	for _, mp := range cs.MountPoints {
		assert.NoDirExists(t, filepath.Join(mp, "kubepods", "besteffort", "poduid-mine"))
		assert.DirExists(t, filepath.Join(mp, "kubepods", "besteffort", "poduid-theirs"), "another kubelet's pod")
		assert.DirExists(t, filepath.Join(mp, "kubepods", "besteffort"), "the QoS cgroups stay, as upstream's")
	}
}

// The sandbox the runtime manager asks for carries the pod's cgroup as
// CgroupParent (the mock records it).
func TestSandboxGetsThePodCgroup(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: v1.PodSpec{NodeName: "node-a", RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{
			Name: "app", Image: "busybox:1.37", ImagePullPolicy: v1.PullIfNotPresent,
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}},
		}}}}
	kl, _ := cgroupKubelet(t, pod)
	clk := clocktesting.NewFakeClock(podT0)
	rt := fakeruntime.New(clk)
	sock := fakeruntimetest.Serve(t, rt)
	conn, err := kuberuntime.Connect(context.Background(), "unix://"+sock, clk)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	m, err := kuberuntime.NewKubeGenericRuntimeManager(context.Background(), &record.FakeRecorder{}, nil, nil, t.TempDir(),
		&PodRuntimeHelper{Client: fake.NewClientset(), HostIPs: []string{"127.0.0.1"}, PodCgroupParent: kl.GetPodCgroupParent}, "", clk,
		conn.RuntimeService(), conn.ImageService())
	require.NoError(t, err)
	require.NoError(t, kl.ensurePodCgroup(pod))
	require.NoError(t, m.SyncPod(context.Background(), pod, &kubecontainer.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}, nil, nil).Error())
	list, err := conn.RuntimeService().ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	st, err := conn.RuntimeService().PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: list.Items[0].Id, Verbose: true})
	require.NoError(t, err)
	assert.Contains(t, st.Info["info"], `"cgroupParent":"/kubepods/burstable/poduid-web"`)
}
