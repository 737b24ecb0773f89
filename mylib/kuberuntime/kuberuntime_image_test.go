package kuberuntime

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	kubecontainer "mykubelet/mylib/container"
)

func TestApplyDefaultImageTag(t *testing.T) {
	for in, want := range map[string]string{
		"busybox":                           "busybox:latest",
		"busybox:1.37":                      "busybox:1.37",
		"localhost:5000/app":                "localhost:5000/app:latest",
		"localhost:5000/app:v1":             "localhost:5000/app:v1",
		"registry.k8s.io/pause@sha256:0123": "registry.k8s.io/pause@sha256:0123",
	} {
		got, err := applyDefaultImageTag(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "bad image", "registry/"} {
		_, err := applyDefaultImageTag(bad)
		assert.Error(t, err, bad)
	}
}

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
