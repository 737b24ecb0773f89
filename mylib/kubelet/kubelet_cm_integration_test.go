package kubelet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/cm"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

// TestPodCgroupsOnThisMachine runs a kubelet with the container manager on
// this machine's cgroup filesystem (root only), under a cgroup root of the
// test's own (/mykubelet-test-<random>, removed at the end), against a
// real control plane and the mock runtime: a Guaranteed and a BestEffort
// pod get their cgroups with their limits, their sandboxes get them as
// CgroupParent, and the cgroups go when the pods are deleted.
func TestPodCgroupsOnThisMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: it makes cgroups on this machine")
	}
	cs, err := cm.GetCgroupSubsystems()
	require.NoError(t, err)
	if cs.Version() != 1 {
		t.Skip("reads cgroup v1 files") // the v2 layout: mylib/cm's tests
	}
	if err := unix.Access(cs.MountPoints["memory"], unix.W_OK); err != nil {
		t.Skipf("cgroup filesystem not writable: %v", err)
	}
	cgm, err := cm.NewCgroupManager(cs, cm.CgroupfsDriver)
	require.NoError(t, err)
	root := cm.CgroupName{fmt.Sprintf("mykubelet-test-%08x", rand.Uint32())}
	require.NoError(t, cgm.Create(&cm.CgroupConfig{Name: root, ResourceParameters: &cm.ResourceConfig{}}))
	t.Cleanup(func() {
		assert.NoError(t, cgm.Destroy(&cm.CgroupConfig{Name: root}), "the test's cgroups are removed")
	})
	capacity, err := cm.MachineCapacity()
	require.NoError(t, err)
	manager, err := cm.NewContainerManager(cs, capacity, cm.NodeConfig{CgroupsPerQOS: true, CgroupRoot: root.ToCgroupfs(),
		CgroupDriver: cm.CgroupfsDriver, EnforceNodeAllocatable: []string{"pods"}, EnforceCPULimits: true})
	require.NoError(t, err)

	c := testcluster.Start(t)
	admin := c.Clientset(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	const name = "cgroups-a"
	mock := fakeruntime.New(clock.RealClock{})
	t.Cleanup(func() { mock.Close() })
	dir := chaptertest.ShortTempDir(t)
	lis, err := fakeruntime.ListenUnix(filepath.Join(dir, "rt.sock"))
	require.NoError(t, err)
	wg.Go(func() { _ = mock.Serve(ctx, lis) })
	rt, err := kuberuntime.Connect(ctx, "unix://"+filepath.Join(dir, "rt.sock"), clock.RealClock{})
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close() })
	client, _, err := NewClients(chaptertest.RegisterNode(t, c, name))
	require.NoError(t, err)
	podConfig, err := MakePodSourceConfig(ctx, &wg, PodSources{Client: client, NodeName: name, Clock: clock.RealClock{}})
	require.NoError(t, err)
	kl, err := New(Config{Client: client, NodeName: name, Clock: clock.RealClock{},
		Node: &NodeConfig{Status: &NodeStatusOptions{RootDir: dir, NodeIP: net.IPv4(127, 0, 0, 1)}, NodeStatusUpdateFrequency: time.Second},
		Pods: &PodsConfig{Updates: podConfig.Updates(), SourcesReady: podConfig.SeenAllSources, RemoteRuntimeService: rt.RuntimeService(),
			RemoteImageService: rt.ImageService(), RunContainers: true, PodLogsDirectory: filepath.Join(dir, "logs"),
			HousekeepingPeriod: 200 * time.Millisecond, ContainerManager: manager}})
	require.NoError(t, err)
	wg.Go(func() { _ = kl.Run(ctx) })

	limits := v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("48Mi")}
	pods := map[string]v1.ResourceRequirements{"guaranteed": {Requests: limits, Limits: limits}, "besteffort": {}}
	uids := map[string]string{}
	for podName, res := range pods {
		p, err := admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: podName},
			Spec: v1.PodSpec{NodeName: name, TerminationGracePeriodSeconds: ptr.To[int64](1), Containers: []v1.Container{{
				Name: "app", Image: "busybox:1.37", Command: []string{"sleep", "3600"}, Resources: res}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		uids[podName] = string(p.UID)
	}
	for podName := range pods {
		require.Eventually(t, func() bool {
			p, err := admin.CoreV1().Pods("default").Get(ctx, podName, metav1.GetOptions{})
			return err == nil && p.Status.Phase == v1.PodRunning
		}, time.Minute, 100*time.Millisecond, podName)
	}
	cpu, memory := cs.MountPoints["cpu"], cs.MountPoints["memory"]
	read := func(parts ...string) string {
		b, err := os.ReadFile(filepath.Join(parts...))
		require.NoError(t, err)
		return strings.TrimSpace(string(b))
	}
	g := filepath.Join(root.ToCgroupfs(), "kubepods", "pod"+uids["guaranteed"])
	be := filepath.Join(root.ToCgroupfs(), "kubepods", "besteffort", "pod"+uids["besteffort"])
	assert.Equal(t, "256", read(cpu, g, "cpu.shares"))
	assert.Equal(t, "25000", read(cpu, g, "cpu.cfs_quota_us"))
	assert.Equal(t, "50331648", read(memory, g, "memory.limit_in_bytes"))
	assert.Equal(t, "2", read(cpu, be, "cpu.shares"))

	sandboxes, err := rt.RuntimeService().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	parents := map[string]string{}
	for _, sb := range sandboxes.Items {
		st, err := rt.RuntimeService().PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.Id, Verbose: true})
		require.NoError(t, err)
		parents[sb.Metadata.Name] = st.Info["info"]
	}
	assert.Contains(t, parents["guaranteed"], `"cgroupParent":"`+g+`"`)
	assert.Contains(t, parents["besteffort"], `"cgroupParent":"`+be+`"`)

	for podName := range pods {
		require.NoError(t, admin.CoreV1().Pods("default").Delete(ctx, podName, metav1.DeleteOptions{}))
	}
	for podName := range pods {
		require.Eventually(t, func() bool {
			_, err := admin.CoreV1().Pods("default").Get(ctx, podName, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, time.Minute, 100*time.Millisecond, podName)
	}
	for _, mp := range cs.MountPoints {
		assert.NoDirExists(t, filepath.Join(mp, g), "the pod's cgroup goes with it")
		assert.NoDirExists(t, filepath.Join(mp, be))
	}
	assert.DirExists(t, filepath.Join(cpu, root.ToCgroupfs(), "kubepods", "burstable"), "the QoS cgroups stay")
}
