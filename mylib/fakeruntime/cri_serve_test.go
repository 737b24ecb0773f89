package fakeruntime_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/kubetypes"
)

// serve starts a seeded runtime on a unix socket in a short temporary
// directory and returns CRI clients connected to it, as crictl would be.
func serve(t *testing.T) (*fakeruntime.Runtime, runtimeapi.RuntimeServiceClient, runtimeapi.ImageServiceClient, string) {
	t.Helper()
	rt := fakeruntime.New(clock.RealClock{})
	require.NoError(t, rt.Seed(context.Background()))
	sock := fakeruntimetest.Serve(t, rt) // also checks that shutdown removes the socket file

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return rt, runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn), sock
}

// TestCrictlCalls makes, over the real socket, the calls crictl makes for
// version, info, pods, ps, inspectp, inspect and images: crictl itself is
// not installable here, and cri-tools is not a dependency of the tutorial.
func TestCrictlCalls(t *testing.T) {
	ctx := context.Background()
	_, rs, is, _ := serve(t)

	// crictl version
	v, err := rs.Version(ctx, &runtimeapi.VersionRequest{Version: "v1"})
	require.NoError(t, err)
	assert.Equal(t, fakeruntime.RuntimeName, v.RuntimeName)
	assert.Equal(t, "v1", v.RuntimeApiVersion)

	// crictl info: Status with verbose; every Info value must be JSON.
	st, err := rs.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	require.NoError(t, err)
	conds := map[string]bool{}
	for _, c := range st.Status.Conditions {
		conds[c.Type] = c.Status
	}
	assert.Equal(t, map[string]bool{runtimeapi.RuntimeReady: true, runtimeapi.NetworkReady: true}, conds)
	require.NotEmpty(t, st.Info)
	for k, val := range st.Info {
		assert.True(t, json.Valid([]byte(val)), "Info[%q] is JSON: %s", k, val)
	}

	// crictl pods
	pods, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	require.Len(t, pods.Items, 2)
	names := []string{pods.Items[0].Metadata.Name, pods.Items[1].Metadata.Name}
	assert.ElementsMatch(t, []string{"nginx", "busybox"}, names)

	// crictl ps (running only by default), then ps -a
	ps, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	require.NoError(t, err)
	require.Len(t, ps.Containers, 2)
	psa, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	require.NoError(t, err)
	require.Len(t, psa.Containers, 2)

	// crictl inspectp <id-prefix>
	sb := pods.Items[0]
	sst, err := rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.Id[:13], Verbose: true})
	require.NoError(t, err)
	assert.Equal(t, sb.Id, sst.Status.Id)
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_READY, sst.Status.State)
	assert.Regexp(t, `^10\.88\.\d+\.\d+$`, sst.Status.Network.Ip)
	assert.Equal(t, sb.Metadata.Uid, sst.Status.Labels[kubetypes.KubernetesPodUIDLabel])
	assert.True(t, json.Valid([]byte(sst.Info["info"])), sst.Info["info"])

	// crictl inspect <id>
	c := ps.Containers[0]
	cst, err := rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id, Verbose: true})
	require.NoError(t, err)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, cst.Status.State)
	assert.NotZero(t, cst.Status.StartedAt)
	assert.Regexp(t, `^docker.io/library/(nginx|busybox):`, cst.Status.Image.Image)
	assert.Regexp(t, `^sha256:`, cst.Status.ImageRef)
	assert.True(t, json.Valid([]byte(cst.Info["info"])), cst.Info["info"])

	// crictl images, imagefsinfo
	imgs, err := is.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	require.NoError(t, err)
	assert.Len(t, imgs.Images, 2)
	fs, err := is.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	require.NoError(t, err)
	assert.Equal(t, imgs.Images[0].Size+imgs.Images[1].Size, fs.ImageFilesystems[0].UsedBytes.Value)

	// crictl stop / rm over the socket.
	_, err = rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.Id, Timeout: 10})
	require.NoError(t, err)
	cst, err = rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id})
	require.NoError(t, err)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, cst.Status.State)
	assert.NotZero(t, cst.Status.FinishedAt)
}

func TestUnsupportedCallsAreUnimplemented(t *testing.T) {
	ctx := context.Background()
	_, rs, _, _ := serve(t)
	// PortForward, Exec and Attach are served (streaming*.go): an unknown sandbox or container is NotFound.
	_, err := rs.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: "x"})
	assert.Equal(t, codes.NotFound, status.Code(err))
	_, err = rs.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: "x", Cmd: []string{"ls"}, Stdout: true})
	assert.Equal(t, codes.NotFound, status.Code(err))
	stream, err := rs.StreamContainers(ctx, &runtimeapi.StreamContainersRequest{})
	require.NoError(t, err)
	_, err = stream.Recv()
	assert.Equal(t, codes.Unimplemented, status.Code(err), "the kubelet falls back to ListContainers on Unimplemented")
}

func TestListenUnix(t *testing.T) {
	dir, err := os.MkdirTemp("", "crt")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "sub", "rt.sock")

	lis, err := fakeruntime.ListenUnix(sock)
	require.NoError(t, err)
	fi, err := os.Stat(filepath.Dir(sock))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	_, err = fakeruntime.ListenUnix(sock)
	assert.EqualError(t, err, "runtime socket "+sock+": another runtime is already listening there")

	// A socket file left behind by a dead runtime is replaced.
	lis.(*net.UnixListener).SetUnlinkOnClose(false)
	lis.Close()
	lis, err = fakeruntime.ListenUnix(sock)
	require.NoError(t, err)
	lis.Close()

	long := "/tmp/" + strings.Repeat("d", 100) + "/rt.sock"
	_, err = fakeruntime.ListenUnix(long)
	assert.ErrorContains(t, err, "unix socket paths are limited to 107: use a shorter --state-dir")

	notSock := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(notSock, nil, 0o600))
	_, err = fakeruntime.ListenUnix(notSock)
	assert.EqualError(t, err, "runtime socket "+notSock+": the path exists and is not a socket")
}

// TestConcurrentUse hammers the runtime over the socket and through the
// control API at once; run with -race.
func TestConcurrentUse(t *testing.T) {
	ctx := context.Background()
	rt, rs, is, _ := serve(t)
	_, err := is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}})
	require.NoError(t, err)

	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				uid := "uid-" + string(rune('a'+w)) + "-" + string(rune('a'+i))
				sb, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
					Metadata: &runtimeapi.PodSandboxMetadata{Name: uid, Namespace: "load", Uid: uid}}})
				if !assert.NoError(t, err) {
					return
				}
				c, err := rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: &runtimeapi.ContainerConfig{
					Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox"}}})
				if !assert.NoError(t, err) {
					return
				}
				_, err = rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId})
				assert.NoError(t, err)
				_, err = rt.ContainerAction(c.ContainerId, fakeruntime.ActionKill)
				assert.NoError(t, err)
				_, err = rt.PodAction("load", uid, fakeruntime.ActionKill)
				assert.NoError(t, err)
				_, err = rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId})
				assert.NoError(t, err)
			}
		}(w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				_, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
				assert.NoError(t, err)
				_, err = rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
				assert.NoError(t, err)
				_ = rt.Snapshot()
			}
		}()
	}
	wg.Wait()
	assert.Len(t, rt.Snapshot().Sandboxes, 2, "only the seeded pods are left")
}
