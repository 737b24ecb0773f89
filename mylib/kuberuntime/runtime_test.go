package kuberuntime_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/kubetypes"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// connect serves a seeded fake runtime on a unix socket and connects a
// Manager to it, both on one fake clock.
func connect(t *testing.T) (*kuberuntime.Manager, *fakeruntime.Runtime, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	rt := fakeruntime.New(clk)
	require.NoError(t, rt.Seed(context.Background()))
	sock := fakeruntimetest.Serve(t, rt)

	m, err := kuberuntime.Connect(context.Background(), "unix://"+sock, clk)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m, rt, clk
}

func TestGetPodAsksForOnePodOnly(t *testing.T) {
	m, rt, _ := connect(t)
	ctx := context.Background()
	for _, sp := range fakeruntime.SeedPods {
		p, err := m.GetPod(ctx, types.UID(sp.UID))
		require.NoError(t, err)
		assert.Equal(t, sp.Name, p.Name)
		require.Len(t, p.Sandboxes, 1, sp.Name)
		require.Len(t, p.Containers, 1, sp.Name)
		id, err := rt.FindContainer(sp.Namespace, sp.Name, sp.Container)
		require.NoError(t, err)
		assert.Equal(t, id, p.Containers[0].ID.ID, "its own container, no other pod's")
	}
	// Dead ones too.
	sp := fakeruntime.SeedPods[0]
	_, err := rt.PodAction(sp.Namespace, sp.Name, fakeruntime.ActionKill)
	require.NoError(t, err)
	p, err := m.GetPod(ctx, types.UID(sp.UID))
	require.NoError(t, err)
	require.Len(t, p.Containers, 1)
	assert.Equal(t, kubecontainer.ContainerStateExited, p.Containers[0].State)

	none, err := m.GetPod(ctx, "no-such-uid")
	require.NoError(t, err)
	assert.EqualValues(t, "no-such-uid", none.ID)
	assert.Empty(t, none.Sandboxes)
	assert.Empty(t, none.Containers)
}

func TestGetPodsGroupsByPodUID(t *testing.T) {
	m, rt, _ := connect(t)
	assert.Equal(t, fakeruntime.RuntimeName, m.Type())

	pods, err := m.GetPods(context.Background(), true)
	require.NoError(t, err)
	require.Len(t, pods, 2)
	byName := map[string]*kubecontainer.Pod{}
	for _, p := range pods {
		byName[p.Namespace+"/"+p.Name] = p
		assert.Equal(t, t0, p.Timestamp)
	}
	for _, sp := range fakeruntime.SeedPods {
		p := byName[sp.Namespace+"/"+sp.Name]
		require.NotNil(t, p, sp.Name)
		assert.EqualValues(t, sp.UID, p.ID)
		require.Len(t, p.Sandboxes, 1)
		require.Len(t, p.Containers, 1)
		c := p.Containers[0]
		assert.Equal(t, sp.Container, c.Name)
		assert.Equal(t, kubecontainer.ContainerStateRunning, c.State)
		assert.Equal(t, fakeruntime.RuntimeName, c.ID.Type)
		assert.Equal(t, p.Sandboxes[0].ID.ID, c.PodSandboxID)
		assert.Equal(t, kubecontainer.ContainerStateRunning, p.Sandboxes[0].State, "a READY sandbox reads as running")
		id, err := rt.FindContainer(sp.Namespace, sp.Name, sp.Container)
		require.NoError(t, err)
		assert.Equal(t, id, c.ID.ID)
	}

	// all=false lists only ready sandboxes and running containers.
	_, err = rt.PodAction("default", "nginx", fakeruntime.ActionKill)
	require.NoError(t, err)
	running, err := m.GetPods(context.Background(), false)
	require.NoError(t, err)
	require.Len(t, running, 1)
	assert.Equal(t, "busybox", running[0].Name)
	all, err := m.GetPods(context.Background(), true)
	require.NoError(t, err)
	for _, p := range all {
		if p.Name == "nginx" {
			assert.Equal(t, kubecontainer.ContainerStateExited, p.Sandboxes[0].State)
			assert.Equal(t, kubecontainer.ContainerStateExited, p.Containers[0].State)
		}
	}
}

func TestGetPodStatus(t *testing.T) {
	ctx := context.Background()
	m, rt, clk := connect(t)
	clk.Step(time.Second)
	_, err := rt.PodAction("default", "nginx", fakeruntime.ActionKill)
	require.NoError(t, err)

	pods, err := m.GetPods(ctx, true)
	require.NoError(t, err)
	for _, p := range pods {
		st, err := m.GetPodStatus(ctx, p)
		require.NoError(t, err)
		assert.Equal(t, p.ID, st.ID)
		assert.Equal(t, p.Timestamp, st.TimeStamp)
		require.Len(t, st.SandboxStatuses, 1)
		require.Len(t, st.ContainerStatuses, 1)
		cs := st.ContainerStatuses[0]
		assert.Equal(t, p.Containers[0].Name, cs.Name)
		assert.WithinDuration(t, t0, cs.CreatedAt, 0)
		assert.WithinDuration(t, t0, cs.StartedAt, 0)
		switch p.Name {
		case "nginx":
			assert.Empty(t, st.IPs, "a NOTREADY sandbox gives no IP")
			assert.Equal(t, kubecontainer.ContainerStateExited, cs.State)
			assert.Equal(t, 137, cs.ExitCode)
			assert.Equal(t, "Error", cs.Reason)
			assert.WithinDuration(t, t0.Add(time.Second), cs.FinishedAt, 0)
		case "busybox":
			assert.Regexp(t, `^10\.88\.`, st.IPs[0])
			assert.Equal(t, kubecontainer.ContainerStateRunning, cs.State)
			assert.True(t, cs.FinishedAt.IsZero())
		}
	}

	// Something removed between GetPods and GetPodStatus is skipped.
	_, err = rt.PodAction("default", "nginx", fakeruntime.ActionRemove)
	require.NoError(t, err)
	for _, p := range pods {
		if p.Name == "nginx" {
			st, err := m.GetPodStatus(ctx, p)
			require.NoError(t, err)
			assert.Empty(t, st.SandboxStatuses)
			assert.Empty(t, st.ContainerStatuses)
		}
	}
}

func TestGetPodsHandlesManyContainers(t *testing.T) {
	// 5,000 pods is over gRPC's default 4 MiB answer: MaxMsgSize matters.
	m, rt, _ := connect(t)
	ctx := context.Background()
	for i := 0; i < 5000; i++ {
		require.NoError(t, rt.RunPod(ctx, fakeruntime.SeedPod{Namespace: "load", Name: "p" + itoa(i), UID: "uid-" + itoa(i), Container: "c", Image: "busybox"}))
	}
	pods, err := m.GetPods(ctx, true)
	require.NoError(t, err)
	assert.Len(t, pods, 5002)
}

func itoa(i int) string {
	return string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26))
}

func TestConnectErrors(t *testing.T) {
	ctx := context.Background()
	_, err := kuberuntime.Connect(ctx, "tcp://localhost:1", clocktesting.NewFakeClock(t0))
	assert.EqualError(t, err, `container runtime endpoint "tcp://localhost:1": only unix:// endpoints are supported`)
	_, err = kuberuntime.Connect(ctx, "unix://", clocktesting.NewFakeClock(t0))
	assert.EqualError(t, err, `container runtime endpoint "unix://": the socket path is empty`)

	dir, err := os.MkdirTemp("", "crt")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = kuberuntime.Connect(ctx, filepath.Join(dir, "none.sock"), clocktesting.NewFakeClock(t0))
	assert.ErrorContains(t, err, "cannot reach the container runtime at "+filepath.Join(dir, "none.sock"))
}

// The labels GetPods groups by are the ones the fake runtime's seed pods
// carry (it keeps its own copy of the names).
func TestSeedLabelsMatchKubeletLabels(t *testing.T) {
	m, _, _ := connect(t)
	resp, err := m.RuntimeService().ListContainers(context.Background(), &runtimeapi.ListContainersRequest{})
	require.NoError(t, err)
	for _, c := range resp.Containers {
		assert.NotEmpty(t, c.Labels[kubetypes.KubernetesPodUIDLabel])
		assert.NotEmpty(t, c.Labels[kubetypes.KubernetesPodNameLabel])
		assert.NotEmpty(t, c.Labels[kubetypes.KubernetesPodNamespaceLabel])
		assert.Equal(t, c.Metadata.Name, c.Labels[kubetypes.KubernetesContainerNameLabel])
	}
}

func TestNewKubeGenericRuntimeManagerNeedsBothServices(t *testing.T) {
	_, err := kuberuntime.NewKubeGenericRuntimeManager(context.Background(), nil, nil, nil, "", nil, "", nil, nil, nil)
	assert.ErrorContains(t, err, "needs the runtime and image services")
}
