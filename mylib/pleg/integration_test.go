package pleg_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/pleg"
)

// serveRuntime serves rt on a unix socket in a short temporary directory and
// returns a CRI client Manager connected to it.
func serveRuntime(tb testing.TB, rt *fakeruntime.Runtime, clk clock.Clock) *kuberuntime.Manager {
	tb.Helper()
	sock := fakeruntimetest.Serve(tb, rt)
	m, err := kuberuntime.Connect(context.Background(), "unix://"+sock, clk)
	require.NoError(tb, err)
	tb.Cleanup(func() { m.Close() })
	return m
}

func events(ch chan *pleg.PodLifecycleEvent) []string {
	var out []string
	for {
		select {
		case e := <-ch:
			out = append(out, fmt.Sprintf("%s %s %v", e.Type, e.ID, e.Data))
		default:
			return out
		}
	}
}

// TestPLEGOverTheRuntimeSocket drives the README's walkthrough through the
// real CRI socket: kill → ContainerDied, remove → ContainerRemoved, a stop
// → ContainerDied (exit code 1, the script's), a new attempt →
// ContainerStarted.
func TestPLEGOverTheRuntimeSocket(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	rt := fakeruntime.New(clk)
	require.NoError(t, rt.Seed(ctx))
	m := serveRuntime(t, rt, clk)

	cache := kubecontainer.NewCache()
	ch := make(chan *pleg.PodLifecycleEvent, pleg.ChannelCapacity)
	g := pleg.NewGenericPLEG(m, ch, &pleg.RelistDuration{RelistPeriod: pleg.RelistPeriod, RelistThreshold: pleg.RelistThreshold}, cache, clk)

	nginx, busybox := fakeruntime.SeedPods[0], fakeruntime.SeedPods[1]
	nginxID, err := rt.FindContainer(nginx.Namespace, nginx.Name, nginx.Container)
	require.NoError(t, err)
	busyboxID, err := rt.FindContainer(busybox.Namespace, busybox.Name, busybox.Container)
	require.NoError(t, err)
	snap := rt.Snapshot()
	sandboxOf := map[string]string{}
	for _, s := range snap.Sandboxes {
		sandboxOf[s.Pod] = s.ID
	}

	g.Relist(ctx)
	assert.ElementsMatch(t, []string{
		"ContainerStarted " + nginx.UID + " " + nginxID,
		"ContainerStarted " + nginx.UID + " " + sandboxOf["default/nginx"],
		"ContainerStarted " + busybox.UID + " " + busyboxID,
		"ContainerStarted " + busybox.UID + " " + sandboxOf["default/busybox"],
	}, events(ch))
	ok, err := g.Healthy()
	assert.True(t, ok, err)

	clk.Step(time.Second)
	_, err = rt.ContainerAction(nginxID, fakeruntime.ActionKill)
	require.NoError(t, err)
	g.Relist(ctx)
	assert.Equal(t, []string{"ContainerDied " + nginx.UID + " " + nginxID}, events(ch))
	st, err := cache.Get(types.UID(nginx.UID))
	require.NoError(t, err)
	require.Len(t, st.ContainerStatuses, 1)
	assert.Equal(t, 137, st.ContainerStatuses[0].ExitCode)
	assert.Equal(t, "Error", st.ContainerStatuses[0].Reason)

	clk.Step(time.Second)
	_, err = rt.ContainerAction(nginxID, fakeruntime.ActionRemove)
	require.NoError(t, err)
	g.Relist(ctx)
	assert.Equal(t, []string{"ContainerRemoved " + nginx.UID + " " + nginxID}, events(ch))

	// Stopped: busybox's script traps SIGTERM and exits 1. A real runtime
	// never restarts it: the kubelet creates a new container, attempt 1.
	clk.Step(time.Second)
	lastSync := clk.Now()
	_, err = m.RuntimeService().StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: busyboxID, Timeout: 30})
	require.NoError(t, err)
	clk.Step(time.Second)
	g.Relist(ctx)
	assert.Equal(t, []string{"ContainerDied " + busybox.UID + " " + busyboxID}, events(ch))
	st, err = cache.GetNewerThan(types.UID(busybox.UID), lastSync)
	require.NoError(t, err)
	assert.Equal(t, kubecontainer.ContainerStateExited, st.ContainerStatuses[0].State)
	assert.Equal(t, 1, st.ContainerStatuses[0].ExitCode)

	created, err := m.RuntimeService().CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sandboxOf["default/busybox"],
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: busybox.Container, Attempt: 1},
			Image:    &runtimeapi.ImageSpec{Image: busybox.Image},
			Command:  busybox.Command,
			Labels: map[string]string{"io.kubernetes.pod.name": busybox.Name, "io.kubernetes.pod.namespace": busybox.Namespace,
				"io.kubernetes.pod.uid": busybox.UID, "io.kubernetes.container.name": busybox.Container},
		}})
	require.NoError(t, err)
	_, err = m.RuntimeService().StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: created.ContainerId})
	require.NoError(t, err)
	clk.Step(time.Second)
	g.Relist(ctx)
	assert.Equal(t, []string{"ContainerStarted " + busybox.UID + " " + created.ContainerId}, events(ch))
	assert.NotEqual(t, busyboxID, created.ContainerId, "a new container, not the old one restarted")
	busyboxID = created.ContainerId

	// Stopping the pod: its sandbox dies like a container.
	clk.Step(time.Second)
	_, err = rt.PodAction(busybox.Namespace, busybox.Name, fakeruntime.ActionKill)
	require.NoError(t, err)
	g.Relist(ctx)
	assert.ElementsMatch(t, []string{
		"ContainerDied " + busybox.UID + " " + busyboxID,
		"ContainerDied " + busybox.UID + " " + sandboxOf["default/busybox"],
	}, events(ch))
}

// TestEventedPLEGOverTheRuntimeSocket: with the mock runtime's event
// stream, a kill and a start are seen without any relist and without the
// clock moving: the EventedPLEG relists the pod the event names.
func TestEventedPLEGOverTheRuntimeSocket(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	rt := fakeruntime.New(clk)
	require.NoError(t, rt.Seed(ctx))
	m := serveRuntime(t, rt, clk)

	ch := make(chan *pleg.PodLifecycleEvent, pleg.ChannelCapacity)
	g := pleg.NewGenericPLEG(m, ch, &pleg.RelistDuration{RelistPeriod: pleg.RelistPeriod, RelistThreshold: pleg.RelistThreshold}, kubecontainer.NewCache(), clk)
	g.Relist(ctx) // the one relist of this test
	events(ch)
	done := make(chan struct{})
	go func() { pleg.NewEventedPLEG(g, m.RuntimeService()).Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	nginx, busybox := fakeruntime.SeedPods[0], fakeruntime.SeedPods[1]
	nginxID, err := rt.FindContainer(nginx.Namespace, nginx.Name, nginx.Container)
	require.NoError(t, err)
	var got []string
	heard := func(want ...string) {
		t.Helper()
		require.Eventually(t, func() bool { got = append(got, events(ch)...); return len(got) >= len(want) }, 10*time.Second, time.Millisecond)
		assert.Equal(t, want, got)
		got = nil
	}
	// The stream is open once the runtime has a subscriber; until then an
	// event would be missed (the relist would find it a second later).
	require.Eventually(t, func() bool { return rt.EventSubscribers() == 1 }, 10*time.Second, time.Millisecond)

	_, err = rt.ContainerAction(nginxID, fakeruntime.ActionKill)
	require.NoError(t, err)
	heard("ContainerDied " + nginx.UID + " " + nginxID)

	var sandboxID string
	for _, s := range rt.Snapshot().Sandboxes {
		if s.Pod == "default/busybox" {
			sandboxID = s.ID
		}
	}
	created, err := m.RuntimeService().CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sandboxID,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "second"},
			Image:    &runtimeapi.ImageSpec{Image: busybox.Image},
			Command:  busybox.Command,
			Labels: map[string]string{"io.kubernetes.pod.name": busybox.Name, "io.kubernetes.pod.namespace": busybox.Namespace,
				"io.kubernetes.pod.uid": busybox.UID, "io.kubernetes.container.name": "second"},
		}})
	require.NoError(t, err)
	_, err = m.RuntimeService().StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: created.ContainerId})
	require.NoError(t, err)
	heard("ContainerStarted " + busybox.UID + " " + created.ContainerId)
}
