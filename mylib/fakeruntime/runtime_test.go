package fakeruntime

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fixture is a runtime on a fake clock with one pulled image.
func fixture(t *testing.T) (*Runtime, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	r := New(clk)
	_, err := r.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}})
	require.NoError(t, err)
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

func createContainer(t *testing.T, r *Runtime, sandboxID, name string, annotations map[string]string) string {
	t.Helper()
	resp, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{
		PodSandboxId: sandboxID,
		Config: &runtimeapi.ContainerConfig{
			Metadata:    &runtimeapi.ContainerMetadata{Name: name},
			Image:       &runtimeapi.ImageSpec{Image: "busybox:1.36"},
			Labels:      map[string]string{labelContainerName: name},
			Annotations: annotations,
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

	c := createContainer(t, r, sb, "app", nil)
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
	running := createContainer(t, r, sb, "running", nil)
	startContainer(t, r, running)
	created := createContainer(t, r, sb, "created", nil)

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
		"RunPodSandbox duplicate": func() error {
			_, err := r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
				Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1"}}})
			return err
		},
		"CreateContainer nil config": func() error {
			_, err := r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb})
			return err
		},
		"CreateContainer image not pulled": func() error {
			_, err := r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: "x"}, Image: &runtimeapi.ImageSpec{Image: "nginx"}}})
			return err
		},
		"CreateContainer bad script": func() error {
			_, err := r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: "x"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
				Annotations: map[string]string{AnnotationExitAfter: "soon"}}})
			return err
		},
		"CreateContainer unknown sandbox": func() error {
			_, err := r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: "nope", Config: &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: "x"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}}})
			return err
		},
		"StartContainer empty ID": func() error { _, err := r.StartContainer(ctx, &runtimeapi.StartContainerRequest{}); return err },
		"StopContainer unknown": func() error {
			_, err := r.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: "nope"})
			return err
		},
		"StopPodSandbox nil":   func() error { _, err := r.StopPodSandbox(ctx, nil); return err },
		"PodSandboxStatus nil": func() error { _, err := r.PodSandboxStatus(ctx, nil); return err },
		"ContainerStatus nil":  func() error { _, err := r.ContainerStatus(ctx, nil); return err },
		"PullImage empty":      func() error { _, err := r.PullImage(ctx, &runtimeapi.PullImageRequest{}); return err },
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
	c1 := createContainer(t, r, sb1, "a", nil)
	startContainer(t, r, c1)
	clk.Step(time.Second)
	c2 := createContainer(t, r, sb2, "b", nil)
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
	assert.Equal(t, []string{c2}, containerIDs(&runtimeapi.ContainerFilter{LabelSelector: map[string]string{labelContainerName: "b"}}))
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
	c := createContainer(t, r, sb, "a", nil)
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

func TestScriptExitAfter(t *testing.T) {
	r, clk := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "app", map[string]string{AnnotationExitAfter: "10s", AnnotationExitCode: "3"})
	startContainer(t, r, c)

	clk.Step(9 * time.Second)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, c).State)
	clk.Step(5 * time.Second) // read late: the exit time is still exact
	st := containerStatus(t, r, c)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.State)
	assert.Equal(t, int32(3), st.ExitCode)
	assert.Equal(t, ReasonError, st.Reason)
	assert.Equal(t, t0.Add(10*time.Second).UnixNano(), st.FinishedAt)
	clk.Step(time.Hour)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, containerStatus(t, r, c).State, "no restart-after: stays exited")
}

func TestScriptCrashLoop(t *testing.T) {
	r, clk := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "app", map[string]string{AnnotationExitAfter: "5s", AnnotationExitCode: "1", AnnotationRestartAfter: "2s"})
	startContainer(t, r, c)

	states := []runtimeapi.ContainerState{}
	for i := 0; i < 8; i++ { // one read per second over 0..7 s: run 0-5, exited 5-7, run from 7
		states = append(states, containerStatus(t, r, c).State)
		clk.Step(time.Second)
	}
	R, E := runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.ContainerState_CONTAINER_EXITED
	assert.Equal(t, []runtimeapi.ContainerState{R, R, R, R, R, E, E, R}, states)
	st := containerStatus(t, r, c) // at 8 s
	assert.Equal(t, t0.Add(7*time.Second).UnixNano(), st.StartedAt)
	assert.Equal(t, c, st.Id, "restarted in place")

	// A long gap skips whole cycles: 7 s cycles, t=8 s+70 s=78 s is 71 s
	// after the start at 7 s: 10 cycles later, 1 s into the 11th run.
	clk.Step(70 * time.Second)
	st = containerStatus(t, r, c)
	assert.Equal(t, R, st.State)
	assert.Equal(t, t0.Add(77*time.Second).UnixNano(), st.StartedAt)
	assert.Equal(t, 11, r.Snapshot().Sandboxes[0].Containers[0].Restarts)

	// A kill stops the loop.
	_, err := r.ContainerAction(c, ActionKill)
	require.NoError(t, err)
	clk.Step(time.Minute)
	st = containerStatus(t, r, c)
	assert.Equal(t, E, st.State)
	assert.Equal(t, int32(ExitCodeSIGKILL), st.ExitCode)
}

func TestStopContainerHonoursTimeoutWhenSIGTERMIsIgnored(t *testing.T) {
	r, clk := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "stubborn", map[string]string{AnnotationIgnoreSIGTERM: "true"})
	startContainer(t, r, c)

	done := make(chan error, 1)
	go func() {
		_, err := r.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: c, Timeout: 30})
		done <- err
	}()
	require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond, "StopContainer waits on the clock")
	// While it waits, the runtime keeps answering and the container runs.
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, c).State)
	clk.Step(29 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("StopContainer returned before its timeout: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	clk.Step(time.Second)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("StopContainer did not return after its timeout")
	}
	st := containerStatus(t, r, c)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.State)
	assert.Equal(t, int32(ExitCodeSIGKILL), st.ExitCode)
	assert.Equal(t, t0.Add(30*time.Second).UnixNano(), st.FinishedAt)
}

func TestStopContainerTimeoutZeroKillsAtOnce(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "stubborn", map[string]string{AnnotationIgnoreSIGTERM: "true"})
	startContainer(t, r, c)
	_, err := r.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: c, Timeout: 0})
	require.NoError(t, err)
	assert.Equal(t, int32(ExitCodeSIGKILL), containerStatus(t, r, c).ExitCode)
}

func TestStopContainerGivesUpWithItsContext(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "stubborn", map[string]string{AnnotationIgnoreSIGTERM: "true"})
	startContainer(t, r, c)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := r.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c, Timeout: 30})
	assert.Equal(t, codes.Canceled, status.Code(err))
}

func TestParseScript(t *testing.T) {
	for _, tc := range []struct {
		ann  map[string]string
		want Script
		err  string
	}{
		{ann: nil, want: Script{}},
		{ann: map[string]string{AnnotationExitAfter: "5s", AnnotationExitCode: "2", AnnotationRestartAfter: "1s", AnnotationIgnoreSIGTERM: "true"},
			want: Script{ExitAfter: 5 * time.Second, ExitCode: 2, RestartAfter: time.Second, IgnoreSIGTERM: true}},
		{ann: map[string]string{AnnotationExitAfter: "-1s"}, err: `exit-after "-1s": want a positive duration such as 5s`},
		{ann: map[string]string{AnnotationExitCode: "256"}, err: `exit-code "256": want a number from 0 to 255`},
		{ann: map[string]string{AnnotationRestartAfter: "1s"}, err: "restart-after needs exit-after: a container must exit before it can restart"},
		{ann: map[string]string{AnnotationIgnoreSIGTERM: "yes"}, err: `ignore-sigterm "yes": want true or false`},
	} {
		got, err := ParseScript(tc.ann)
		if tc.err != "" {
			assert.EqualError(t, err, tc.err)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.want, got)
	}
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
	assert.Len(t, list.Images, 2) // busybox from the fixture, and nginx

	fs, err := r.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	require.NoError(t, err)
	assert.Equal(t, list.Images[0].Size+list.Images[1].Size, fs.ImageFilesystems[0].UsedBytes.Value)

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
	c := createContainer(t, r, sb, "app", nil)
	_, err := r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}}})
	assert.Equal(t, codes.AlreadyExists, status.Code(err), "same name and attempt in one sandbox")
	_, err = r.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c})
	require.NoError(t, err)
	createContainer(t, r, sb, "app", nil) // the name is free again

	_, err = r.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb})
	require.NoError(t, err)
	runSandbox(t, r, "web", "uid-1", nil)
}
