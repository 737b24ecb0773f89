package fakeruntime

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"mykubelet/mylib/kubetypes"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fixture is a runtime on a fake clock with one pulled image.
func fixture(t *testing.T) (*Runtime, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	r, err := NewRuntime(Config{Clock: clk, StateDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	for _, img := range []string{"busybox:1.36", "registry.k8s.io/pause:3.10"} {
		_, err = r.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img}})
		require.NoError(t, err)
	}
	return r, clk
}

func runSandbox(t *testing.T, r *Runtime, name, uid string, labels map[string]string) string {
	t.Helper()
	resp, err := r.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: uid},
		Labels:   labels,
	}})
	require.NoError(t, err)
	return resp.PodSandboxId
}

// createContainer creates a busybox container running cmd, or with no cmd
// a pause container (runs until stopped, exits 0 on SIGTERM), with a PID
// namespace of its own, as the kubelet asks for a pod's containers unless
// it shares its process namespace.
func createContainer(t *testing.T, r *Runtime, sandboxID, name string, cmd ...string) string {
	t.Helper()
	image := "busybox:1.36"
	if len(cmd) == 0 {
		image = "registry.k8s.io/pause:3.10"
	}
	resp, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{
		PodSandboxId: sandboxID,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name},
			Image:    &runtimeapi.ImageSpec{Image: image},
			Labels:   map[string]string{kubetypes.KubernetesContainerNameLabel: name},
			Command:  cmd,
			Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER}}},
		},
	})
	require.NoError(t, err)
	return resp.ContainerId
}

func startContainer(t *testing.T, r *Runtime, id string) {
	t.Helper()
	_, err := r.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: id})
	require.NoError(t, err)
}

func containerStatus(t *testing.T, r *Runtime, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	resp, err := r.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	require.NoError(t, err)
	return resp.Status
}

func sandboxState(t *testing.T, r *Runtime, id string) runtimeapi.PodSandboxState {
	t.Helper()
	resp, err := r.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	require.NoError(t, err)
	return resp.Status.State
}

func TestStateMachine(t *testing.T) {
	ctx := context.Background()
	r, clk := fixture(t)

	sb := runSandbox(t, r, "web", "uid-1", nil)
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_READY, sandboxState(t, r, sb))

	c := createContainer(t, r, sb, "app")
	st := containerStatus(t, r, c)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_CREATED, st.State)
	assert.Equal(t, t0.UnixNano(), st.CreatedAt)
	assert.Zero(t, st.StartedAt)

	clk.Step(time.Second)
	startContainer(t, r, c)
	st = containerStatus(t, r, c)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, st.State)
	assert.Equal(t, t0.Add(time.Second).UnixNano(), st.StartedAt)

	_, err := r.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c})
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "a running container cannot be started again")

	clk.Step(time.Second)
	_, err = r.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c, Timeout: 30})
	require.NoError(t, err)
	st = containerStatus(t, r, c)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.State)
	assert.Equal(t, int32(0), st.ExitCode, "a container that honours SIGTERM exits 0")
	assert.Equal(t, ReasonCompleted, st.Reason)
	assert.Equal(t, t0.Add(2*time.Second).UnixNano(), st.FinishedAt)

	_, err = r.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c, Timeout: 30})
	assert.NoError(t, err, "StopContainer is idempotent")

	_, err = r.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c})
	require.NoError(t, err)
	_, err = r.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c})
	assert.Equal(t, codes.NotFound, status.Code(err))
	_, err = r.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c})
	assert.NoError(t, err, "RemoveContainer is idempotent")
}

func TestStopPodSandboxKillsItsContainers(t *testing.T) {
	ctx := context.Background()
	r, clk := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	running := createContainer(t, r, sb, "running")
	startContainer(t, r, running)
	created := createContainer(t, r, sb, "created")

	clk.Step(time.Second)
	_, err := r.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb})
	require.NoError(t, err)
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, sandboxState(t, r, sb))
	st := containerStatus(t, r, running)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.State)
	assert.Equal(t, int32(ExitCodeSIGKILL), st.ExitCode)
	assert.Equal(t, ReasonError, st.Reason)
	assert.Equal(t, t0.Add(time.Second).UnixNano(), st.FinishedAt)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_CREATED, containerStatus(t, r, created).State, "never started: nothing to kill")

	_, err = r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "late"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}}})
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "no new containers in a stopped sandbox")

	_, err = r.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb})
	require.NoError(t, err)
	list, err := r.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	require.NoError(t, err)
	assert.Empty(t, list.Containers, "removing a sandbox removes its containers")
	_, err = r.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb})
	assert.Equal(t, codes.NotFound, status.Code(err))
	_, err = r.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb})
	assert.NoError(t, err, "RemovePodSandbox is idempotent")
}

func TestBadRequestsAreErrorsNotPanics(t *testing.T) {
	ctx := context.Background()
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	for name, call := range map[string]func() error{
		"RunPodSandbox nil config": func() error { _, err := r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{}); return err },
		"CreateContainer nil config": func() error {
			_, err := r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb})
			return err
		},
		"CreateContainer image not pulled": func() error {
			_, err := r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: "x"}, Image: &runtimeapi.ImageSpec{Image: "nginx"}}})
			return err
		},
		"CreateContainer unquotable argument": func() error {
			_, err := r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: "x"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
				Command: []string{"echo", "a\x00b"}}})
			return err
		},
		"CreateContainer unknown sandbox": func() error {
			_, err := r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: "nope", Config: &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: "x"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}}})
			return err
		},
		"StartContainer empty ID": func() error { _, err := r.StartContainer(ctx, &runtimeapi.StartContainerRequest{}); return err },
		"StopPodSandbox nil":      func() error { _, err := r.StopPodSandbox(ctx, nil); return err },
		"PodSandboxStatus nil":    func() error { _, err := r.PodSandboxStatus(ctx, nil); return err },
		"ContainerStatus nil":     func() error { _, err := r.ContainerStatus(ctx, nil); return err },
		"PullImage empty":         func() error { _, err := r.PullImage(ctx, &runtimeapi.PullImageRequest{}); return err },
	} {
		t.Run(name, func(t *testing.T) {
			err := call()
			require.Error(t, err)
			assert.Contains(t, []codes.Code{codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.FailedPrecondition}, status.Code(err), err)
		})
	}
	// Nil requests to list and inspect calls are fine: no filter.
	_, err := r.ListContainers(ctx, nil)
	assert.NoError(t, err)
	_, err = r.ListPodSandbox(ctx, nil)
	assert.NoError(t, err)
	_, err = r.ListImages(ctx, nil)
	assert.NoError(t, err)
	s, err := r.ImageStatus(ctx, nil)
	assert.NoError(t, err)
	assert.Nil(t, s.Image)
}

func TestListFilters(t *testing.T) {
	ctx := context.Background()
	r, clk := fixture(t)
	sb1 := runSandbox(t, r, "web", "uid-1", map[string]string{"app": "web"})
	clk.Step(time.Second)
	sb2 := runSandbox(t, r, "db", "uid-2", map[string]string{"app": "db"})
	c1 := createContainer(t, r, sb1, "a")
	startContainer(t, r, c1)
	clk.Step(time.Second)
	c2 := createContainer(t, r, sb2, "b")
	_, err := r.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb2})
	require.NoError(t, err)

	sandboxIDs := func(f *runtimeapi.PodSandboxFilter) []string {
		resp, err := r.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: f})
		require.NoError(t, err)
		var ids []string
		for _, s := range resp.Items {
			ids = append(ids, s.Id)
		}
		return ids
	}
	assert.Equal(t, []string{sb2, sb1}, sandboxIDs(nil), "newest first")
	assert.Equal(t, []string{sb1}, sandboxIDs(&runtimeapi.PodSandboxFilter{Id: sb1[:12]}), "by ID prefix")
	assert.Equal(t, []string{sb1}, sandboxIDs(&runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}))
	assert.Equal(t, []string{sb2}, sandboxIDs(&runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "db"}}))
	assert.Empty(t, sandboxIDs(&runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "db", "x": "y"}}))

	containerIDs := func(f *runtimeapi.ContainerFilter) []string {
		resp, err := r.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: f})
		require.NoError(t, err)
		var ids []string
		for _, c := range resp.Containers {
			ids = append(ids, c.Id)
		}
		return ids
	}
	assert.Equal(t, []string{c2, c1}, containerIDs(nil))
	assert.Equal(t, []string{c1}, containerIDs(&runtimeapi.ContainerFilter{Id: c1}))
	assert.Equal(t, []string{c2}, containerIDs(&runtimeapi.ContainerFilter{PodSandboxId: sb2}))
	assert.Equal(t, []string{c1}, containerIDs(&runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}))
	assert.Equal(t, []string{c2}, containerIDs(&runtimeapi.ContainerFilter{LabelSelector: map[string]string{kubetypes.KubernetesContainerNameLabel: "b"}}))
	assert.Empty(t, containerIDs(&runtimeapi.ContainerFilter{Id: c1, PodSandboxId: sb2}), "filters combine")
}

// TestListItemsAreSharedUntilTheStateChanges checks the contract of
// listItem: two lists with nothing changed in between answer the same item,
// and a state change makes a new item while the one already answered keeps
// what it said (it may be in flight to a gRPC client).
func TestListItemsAreSharedUntilTheStateChanges(t *testing.T) {
	ctx := context.Background()
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "a")
	startContainer(t, r, c)
	list := func() (*runtimeapi.PodSandbox, *runtimeapi.Container) {
		sresp, err := r.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		require.NoError(t, err)
		cresp, err := r.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
		require.NoError(t, err)
		require.Len(t, sresp.Items, 1)
		require.Len(t, cresp.Containers, 1)
		return sresp.Items[0], cresp.Containers[0]
	}

	s1, c1 := list()
	s2, c2 := list()
	assert.Same(t, s1, s2, "nothing changed: the same sandbox item")
	assert.Same(t, c1, c2, "nothing changed: the same container item")

	_, err := r.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb})
	require.NoError(t, err)
	s3, c3 := list()
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, s3.State)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, c3.State)
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_READY, s1.State, "an item already answered never changes")
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, c1.State, "an item already answered never changes")
	assert.Equal(t, c1.Id, c3.Id)
	assert.Equal(t, c1.Labels, c3.Labels)
}

func TestImages(t *testing.T) {
	ctx := context.Background()
	r, _ := fixture(t)
	pulled, err := r.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "nginx"}})
	require.NoError(t, err)
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, pulled.ImageRef)

	st, err := r.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "docker.io/library/nginx:latest"}})
	require.NoError(t, err)
	require.NotNil(t, st.Image, "found by its normalized name")
	assert.Equal(t, pulled.ImageRef, st.Image.Id)
	assert.Equal(t, []string{"docker.io/library/nginx:latest"}, st.Image.RepoTags)
	assert.Regexp(t, `^docker.io/library/nginx@sha256:[0-9a-f]{64}$`, st.Image.RepoDigests[0])
	assert.True(t, st.Image.Size >= 2_000_000 && st.Image.Size < 200_000_000, "plausible size: %d", st.Image.Size)

	list, err := r.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	require.NoError(t, err)
	assert.Len(t, list.Images, 3) // busybox and pause from the fixture, and nginx

	fs, err := r.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	require.NoError(t, err)
	assert.Equal(t, list.Images[0].Size+list.Images[1].Size+list.Images[2].Size, fs.ImageFilesystems[0].UsedBytes.Value)

	_, err = r.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: pulled.ImageRef}})
	require.NoError(t, err)
	st, err = r.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "nginx"}})
	require.NoError(t, err)
	assert.Nil(t, st.Image, "a missing image is no image, not an error")
	_, err = r.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: "nginx"}})
	assert.NoError(t, err, "RemoveImage is idempotent")
}

func TestNormalizeRef(t *testing.T) {
	for in, want := range map[string]string{
		"nginx":                          "docker.io/library/nginx:latest",
		"nginx:1.27":                     "docker.io/library/nginx:1.27",
		"bitnami/redis":                  "docker.io/bitnami/redis:latest",
		"registry.k8s.io/pause:3.10":     "registry.k8s.io/pause:3.10",
		"localhost:5000/app":             "localhost:5000/app:latest",
		"docker.io/library/busybox:1.36": "docker.io/library/busybox:1.36",
		"nginx@sha256:abc":               "docker.io/library/nginx@sha256:abc",
	} {
		assert.Equal(t, want, normalizeRef(in), in)
	}
}

func TestSeed(t *testing.T) {
	r, _ := fixture(t)
	require.NoError(t, r.Seed(context.Background()))
	snap := r.Snapshot()
	require.Len(t, snap.Sandboxes, len(SeedPods))
	for _, s := range snap.Sandboxes {
		assert.Equal(t, "READY", s.State)
		require.Len(t, s.Containers, 1)
		assert.Equal(t, "RUNNING", s.Containers[0].State)
		assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`, s.UID, "a valid UID")
	}
	assert.Equal(t, "default/busybox", snap.Sandboxes[0].Pod)
	assert.Equal(t, "default/nginx", snap.Sandboxes[1].Pod)
	assert.Empty(t, New(clocktesting.NewFakeClock(t0)).Snapshot().Sandboxes, "empty unless seeded")
}

func TestNamesAreFreedOnRemoval(t *testing.T) {
	ctx := context.Background()
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "app")
	_, err := r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}}})
	assert.Equal(t, codes.AlreadyExists, status.Code(err), "same name and attempt in one sandbox")
	_, err = r.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c})
	require.NoError(t, err)
	createContainer(t, r, sb, "app") // the name is free again

	_, err = r.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb})
	require.NoError(t, err)
	runSandbox(t, r, "web", "uid-1", nil)
}

// A stopped sandbox gives its address back at once, as containerd's CNI
// teardown does: a range full of stopped (not yet removed) sandboxes still
// has room for new ones, and removing a stopped sandbox later does not
// free the address a running one has taken since.
func TestStoppedSandboxFreesItsIP(t *testing.T) {
	ctx := context.Background()
	r := fixtureConfig(t, Config{PodCIDR: "10.77.0.0/29"}) // .2 to .6: five addresses
	ipOf := func(id string) string {
		t.Helper()
		st, err := r.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
		require.NoError(t, err)
		return st.Status.GetNetwork().GetIp()
	}
	var first []string
	for i := range 5 {
		first = append(first, runSandbox(t, r, fmt.Sprintf("a%d", i), fmt.Sprintf("uid-a%d", i), nil))
	}
	_, err := r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "full", Namespace: "default", Uid: "uid-full"}}})
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "five running sandboxes fill a /29")
	stoppedIP := ipOf(first[0])
	for _, id := range first {
		_, err := r.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
		require.NoError(t, err)
	}
	assert.Equal(t, stoppedIP, ipOf(first[0]), "a stopped sandbox's status still shows its address")
	seen := map[string]bool{}
	var second []string
	for i := range 5 {
		id := runSandbox(t, r, fmt.Sprintf("b%d", i), fmt.Sprintf("uid-b%d", i), nil)
		second = append(second, id)
		seen[ipOf(id)] = true
	}
	assert.Len(t, seen, 5, "five new sandboxes, five addresses, with the stopped ones not removed yet")
	for _, id := range first {
		_, err := r.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
		require.NoError(t, err)
	}
	_, err = r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "full", Namespace: "default", Uid: "uid-full"}}})
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "removing the stopped sandboxes freed none of the running ones' addresses")
}
