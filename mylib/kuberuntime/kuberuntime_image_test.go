package kuberuntime

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/images"
)

func TestImagePullPolicyDefaultsAsTheAPIServer(t *testing.T) {
	for image, want := range map[string]v1.PullPolicy{
		"busybox":               v1.PullAlways,
		"busybox:latest":        v1.PullAlways,
		"busybox:1.37":          v1.PullIfNotPresent,
		"localhost:5000/app":    v1.PullAlways,
		"busybox@sha256:0123ab": v1.PullIfNotPresent,
	} {
		assert.Equal(t, want, imagePullPolicy(&v1.Container{Image: image}), image)
	}
	assert.Equal(t, v1.PullNever, imagePullPolicy(&v1.Container{Image: "busybox", ImagePullPolicy: v1.PullNever}))
}

func TestCredentialsForMatchTheRegistryHost(t *testing.T) {
	secrets := []v1.Secret{regcred(), {
		Type: v1.SecretTypeDockercfg,
		Data: map[string][]byte{v1.DockerConfigKey: []byte(`{"https://index.docker.io/v1/":{"username":"hub","password":"p"}}`)},
	}, {
		Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`not json`)},
	}}
	got := credentialsFor("registry.example.com/app:v1", secrets)
	require.Len(t, got, 1)
	assert.Equal(t, "alice", got[0].Username)
	got = credentialsFor("busybox:latest", secrets)
	require.Len(t, got, 1, "docker.io images match the Docker Hub entry")
	assert.Equal(t, "hub", got[0].Username)
	assert.Empty(t, credentialsFor("quay.io/x:1", secrets))
}

func TestKillPodOfAPodTheKubeletForgotUsesTheContainersAnnotations(t *testing.T) {
	ctx := context.Background()
	f := newSyncFixture(t)
	pod := webPod()
	pod.Spec.InitContainers = nil
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](45)
	require.NoError(t, f.m.SyncPod(ctx, pod, f.status(t, pod), nil, nil).Error())
	st := f.status(t, pod)

	// Stopped without its pod object: the runtime gets the grace period
	// the pod had, read from the container's annotations.
	stops := &stopRecorder{RuntimeServiceClient: f.m.rs}
	f.m.rs = stops
	require.NoError(t, f.m.KillPod(ctx, nil, kubecontainer.ConvertPodStatusToRunningPod(f.m.Type(), st), nil))
	assert.Equal(t, []int64{45, 45}, stops.timeouts)
	assert.Equal(t, 1, stops.sandboxStops)
	assert.Empty(t, f.status(t, pod).GetRunningContainerStatuses())

	// An override wins, but never under two seconds.
	assert.NoError(t, f.m.KillPod(ctx, pod, kubecontainer.Pod{Containers: []*kubecontainer.Container{{ID: st.ContainerStatuses[0].ID, Name: "app"}}}, ptr.To[int64](0)))
	assert.Equal(t, int64(minimumGracePeriodInSeconds), stops.timeouts[2])
}

type stopRecorder struct {
	runtimeapi.RuntimeServiceClient
	mu           sync.Mutex // KillPod stops containers in parallel
	timeouts     []int64
	sandboxStops int
}

func (s *stopRecorder) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest, opts ...grpc.CallOption) (*runtimeapi.StopContainerResponse, error) {
	s.mu.Lock()
	s.timeouts = append(s.timeouts, req.Timeout)
	s.mu.Unlock()
	return s.RuntimeServiceClient.StopContainer(ctx, req, opts...)
}

func (s *stopRecorder) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest, opts ...grpc.CallOption) (*runtimeapi.StopPodSandboxResponse, error) {
	s.sandboxStops++
	return s.RuntimeServiceClient.StopPodSandbox(ctx, req, opts...)
}

// failingPulls fails every PullImage, as a registry without the image.
type failingPulls struct {
	runtimeapi.ImageServiceClient
	mu    sync.Mutex
	pulls int
}

func (p *failingPulls) PullImage(context.Context, *runtimeapi.PullImageRequest, ...grpc.CallOption) (*runtimeapi.PullImageResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pulls++
	return nil, errors.New("not found")
}

func TestSyncPodBacksOffAFailedPull(t *testing.T) {
	ctx := context.Background()
	f := newSyncFixture(t)
	failing := &failingPulls{ImageServiceClient: f.pulls}
	f.m.is = failing
	pod := webPod()
	pod.Spec.InitContainers = nil

	start := f.m.SyncPod(ctx, pod, f.status(t, pod), nil, nil)
	assert.ErrorIs(t, start.Error(), ErrImagePull)
	assert.Contains(t, f.drain(), `Warning Failed Failed to pull image "registry.example.com/app:v1": not found`)
	pulls := failing.pulls

	// The next sync, a second later, does not pull: the container waits with
	// ImagePullBackOff.
	start = f.m.SyncPod(ctx, pod, f.status(t, pod), nil, nil)
	assert.ErrorIs(t, start.Error(), ErrImagePullBackOff)
	assert.Equal(t, "ImagePullBackOff", ErrImagePullBackOff.Error())
	assert.Contains(t, f.drain(), `Normal BackOff Back-off pulling image "registry.example.com/app:v1"`)
	assert.Equal(t, pulls, failing.pulls)

	f.clk.Step(10 * time.Second)
	start = f.m.SyncPod(ctx, pod, f.status(t, pod), nil, nil)
	assert.ErrorIs(t, start.Error(), ErrImagePull, "10 s on, the kubelet tries again")
	assert.Greater(t, failing.pulls, pulls)
}

func TestSetImagePullConfig(t *testing.T) {
	f := newSyncFixture(t)
	assert.EqualError(t, f.m.SetImagePullConfig(images.PullConfig{SerializeImagePulls: true, MaxParallelImagePulls: ptr.To[int32](3)}),
		"invalid configuration: maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls (--serialize-image-pulls) is set to false")

	// One pull a second, no burst: the second image in the same second is refused.
	require.NoError(t, f.m.SetImagePullConfig(images.PullConfig{RegistryPullQPS: 1, RegistryBurst: 1}))
	pod := webPod()
	ref := containerRef(pod, &pod.Spec.Containers[0])
	_, _, err := f.m.EnsureImageExists(context.Background(), ref, &v1.Container{Image: "nginx:1.27"}, nil, nil)
	require.NoError(t, err)
	_, msg, err := f.m.EnsureImageExists(context.Background(), ref, &v1.Container{Image: "redis:7"}, nil, nil)
	require.ErrorIs(t, err, ErrImagePull)
	assert.Equal(t, "pull QPS exceeded", msg)
}

// imageFs is the image filesystem of a fixed capacity that the runtime's
// images fill (as the stats provider's ImageFsStats with a mock machine).
type imageFs struct {
	is       runtimeapi.ImageServiceClient
	capacity uint64
}

func (s *imageFs) used(ctx context.Context) (uint64, error) {
	resp, err := s.is.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		return 0, err
	}
	return resp.ImageFilesystems[0].UsedBytes.GetValue(), nil
}

func (s *imageFs) ImageFsStats(ctx context.Context) (*statsapi.FsStats, *statsapi.FsStats, error) {
	used, err := s.used(ctx)
	if err != nil {
		return nil, nil, err
	}
	available := s.capacity - min(used, s.capacity)
	fs := &statsapi.FsStats{CapacityBytes: &s.capacity, UsedBytes: &used, AvailableBytes: &available}
	return fs, fs, nil
}

func listImageTags(t *testing.T, is runtimeapi.ImageServiceClient) []string {
	t.Helper()
	resp, err := is.ListImages(context.Background(), &runtimeapi.ListImagesRequest{})
	require.NoError(t, err)
	var tags []string
	for _, img := range resp.Images {
		tags = append(tags, img.RepoTags...)
	}
	sort.Strings(tags)
	return tags
}

func TestImageGCRemovesUnusedImagesThroughTheCRI(t *testing.T) {
	ctx := context.Background()
	f := newSyncFixture(t)
	pod := webPod()
	pod.Spec.InitContainers = nil
	require.NoError(t, f.m.SyncPod(ctx, pod, f.status(t, pod), nil, nil).Error())
	for _, img := range []string{"nginx:1.27", "redis:7"} {
		_, err := f.m.PullImage(ctx, &runtimeapi.ImageSpec{Image: img}, nil, nil)
		require.NoError(t, err)
	}
	require.Len(t, listImageTags(t, f.pulls), 4)

	// 90 % full; to free down to 10 %, all that is unused goes, and more
	// would be needed.
	fs := &imageFs{is: f.pulls}
	used, err := fs.used(ctx)
	require.NoError(t, err)
	fs.capacity = used * 100 / 90
	recorder := record.NewFakeRecorder(10)
	nodeRef := &v1.ObjectReference{Kind: "Node", Name: "node-1", UID: "node-1"}
	gc, err := images.NewImageGCManager(f.pulls, f.m, fs, recorder, nodeRef,
		images.ImageGCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 10, MinAge: 2 * time.Minute}, f.clk)
	require.NoError(t, err)
	began := f.clk.Now()

	// Just seen: younger than MinAge, nothing goes.
	require.Error(t, gc.GarbageCollect(ctx, began))
	assert.Len(t, listImageTags(t, f.pulls), 4)

	f.clk.Step(2 * time.Minute)
	err = gc.GarbageCollect(ctx, began)
	require.ErrorContains(t, err, "Failed to garbage collect required amount of images")
	assert.Equal(t, []string{"docker.io/library/busybox:1.37", "registry.example.com/app:v1"}, listImageTags(t, f.pulls),
		"the images the pod's containers use stay")
	events := []string{<-recorder.Events, <-recorder.Events}
	assert.Contains(t, events[1], "Warning FreeDiskSpaceFailed Failed to garbage collect required amount of images. Attempted to free ")
}
