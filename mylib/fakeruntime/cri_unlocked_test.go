package fakeruntime

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestSandboxAndContainerAreMadeWithoutTheLock: while RunPodSandbox adds
// the address and CreateContainer makes the files, the runtime's lock is
// free (the runtime answers other calls), and the name is taken: a second
// call with the same name is refused.
func TestSandboxAndContainerAreMadeWithoutTheLock(t *testing.T) {
	ctx := context.Background()
	r, _ := fixture(t)
	var seen []string
	r.testHookUnlocked = func(what string) {
		require.True(t, r.mu.TryLock(), "the lock is held while the %s is made", what)
		r.mu.Unlock()
		seen = append(seen, what)
		switch what {
		case "sandbox":
			_, err := r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
				Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "uid-p"}}})
			assert.Equal(t, codes.AlreadyExists, status.Code(err), "the sandbox's name is reserved: %v", err)
		case "container":
			sandboxes, err := r.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
			require.NoError(t, err)
			_, err = r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxes.Items[0].Id, Config: &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}}})
			assert.Equal(t, codes.AlreadyExists, status.Code(err), "the container's name is reserved: %v", err)
		}
	}
	id := runSandbox(t, r, "p", "uid-p", nil)
	createContainer(t, r, id, "c", "sleep", "1000")
	assert.Equal(t, []string{"sandbox", "container"}, seen)
}

// TestContainerOfASandboxStoppedMeanwhile: a sandbox stopped while one of
// its containers was being made gets no container: the call fails, and
// neither the container's name nor its directory is left behind.
func TestContainerOfASandboxStoppedMeanwhile(t *testing.T) {
	ctx := context.Background()
	r, _ := fixture(t)
	id := runSandbox(t, r, "p", "uid-p", nil)
	r.testHookUnlocked = func(string) {
		_, err := r.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
		require.NoError(t, err)
	}
	_, err := r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: id, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}}})
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	list, err := r.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	require.NoError(t, err)
	assert.Empty(t, list.Containers)
	r.mu.Lock()
	assert.NotContains(t, r.names, containerNameKey(id, &runtimeapi.ContainerMetadata{Name: "c"}), "the name is free again")
	r.mu.Unlock()
	entries, err := os.ReadDir(filepath.Join(r.stateDir, "containers"))
	require.NoError(t, err)
	assert.Empty(t, entries, "the container's directory is removed")
}

// TestSandboxWhoseCallerGaveUpIsUndone: the kubelet cancels RunPodSandbox
// (its pod was deleted) while the sandbox is being made: the call fails
// with Canceled, and no sandbox, name, address or sandbox process is left;
// the same pod's sandbox can be made again.
func TestSandboxWhoseCallerGaveUpIsUndone(t *testing.T) {
	r, _ := fixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	r.testHookUnlocked = func(what string) {
		if what == "sandbox" {
			cancel()
		}
	}
	_, err := r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "uid-p"}}})
	assert.Equal(t, codes.Canceled, status.Code(err), "%v", err)
	list, err := r.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	assert.Empty(t, list.Items)
	if r.sandbox != nil {
		assert.Empty(t, r.sandbox.pods, "no sandbox process")
	}

	r.testHookUnlocked = nil
	id := runSandbox(t, r, "p", "uid-p", nil)
	st, err := r.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	require.NoError(t, err)
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_READY, st.Status.State)
}
