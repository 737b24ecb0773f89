package kuberuntime

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/kubetypes"
)

var syncT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// pullRecorder remembers the auth of every PullImage.
type pullRecorder struct {
	runtimeapi.ImageServiceClient
	mu    sync.Mutex
	auths []*runtimeapi.AuthConfig
}

func (p *pullRecorder) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest, opts ...grpc.CallOption) (*runtimeapi.PullImageResponse, error) {
	p.mu.Lock()
	p.auths = append(p.auths, req.Auth)
	p.mu.Unlock()
	return p.ImageServiceClient.PullImage(ctx, req, opts...)
}

type syncFixture struct {
	m        *Manager
	rt       *fakeruntime.Runtime
	clk      *clocktesting.FakeClock
	recorder *record.FakeRecorder
	pulls    *pullRecorder
	logDir   string
}

func newSyncFixture(t *testing.T) *syncFixture {
	t.Helper()
	clk := clocktesting.NewFakeClock(syncT0)
	rt := fakeruntime.New(clk)
	sock := fakeruntimetest.Serve(t, rt)
	conn, err := Connect(context.Background(), "unix://"+sock, clk)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	f := &syncFixture{rt: rt, clk: clk, recorder: record.NewFakeRecorder(100), logDir: t.TempDir()}
	f.pulls = &pullRecorder{ImageServiceClient: conn.ImageService()}
	f.m, err = NewKubeGenericRuntimeManager(context.Background(), f.recorder, nil, nil, f.logDir, nil, "", clk,
		conn.RuntimeService(), f.pulls)
	require.NoError(t, err)
	return f
}

// status reads the pod's status as the PLEG would: GetPods, then
// GetPodStatus. A second passes first, so that what the next sync creates
// is newer than what is there (the runtime orders by creation time).
func (f *syncFixture) status(t *testing.T, pod *v1.Pod) *kubecontainer.PodStatus {
	t.Helper()
	f.clk.Step(time.Second)
	pods, err := f.m.GetPods(context.Background(), true)
	require.NoError(t, err)
	p := kubecontainer.Pods(pods).FindPodByID(pod.UID)
	p.ID, p.Name, p.Namespace = pod.UID, pod.Name, pod.Namespace
	st, err := f.m.GetPodStatus(context.Background(), &p)
	require.NoError(t, err)
	return st
}

// drain returns the events recorded so far.
func (f *syncFixture) drain() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// serveUntilTERM keeps a container of the mock runtime running until it is
// stopped, and ends it with 0 on SIGTERM (the runtime runs the commands,
// and its clock is a fake one in these tests).
const serveUntilTERM = "trap 'exit 0' TERM; sleep 3600"

func webPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"note": "hi"}},
		Spec: v1.PodSpec{
			RestartPolicy:                 v1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			InitContainers:                []v1.Container{{Name: "setup", Image: "busybox:1.37", ImagePullPolicy: v1.PullIfNotPresent}},
			Containers: []v1.Container{
				{Name: "app", Image: "registry.example.com/app:v1", ImagePullPolicy: v1.PullIfNotPresent,
					Command: []string{"sh", "-c"}, Args: []string{"echo $(GREETING) $$HOME; " + serveUntilTERM},
					Env:        []v1.EnvVar{{Name: "GREETING", Value: "hello"}},
					WorkingDir: "/srv", Ports: []v1.ContainerPort{{ContainerPort: 8080, HostPort: 18080, Protocol: v1.ProtocolTCP}}},
				{Name: "sidecar", Image: "busybox:1.37", ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sh", "-c", serveUntilTERM}},
			},
			ImagePullSecrets: []v1.LocalObjectReference{{Name: "regcred"}},
		},
	}
}

func regcred() v1.Secret {
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{
		"https://registry.example.com": map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))},
		"other.example.com":            map[string]string{"username": "bob", "password": "x"},
	}})
	return v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "regcred"}, Type: v1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{v1.DockerConfigJsonKey: cfg}}
}

func TestSyncPodRunsInitContainersThenContainers(t *testing.T) {
	ctx := context.Background()
	f := newSyncFixture(t)
	pod := webPod()
	secrets := []v1.Secret{regcred()}

	// 1st sync: a sandbox and the init container only.
	res := f.m.SyncPod(ctx, pod, f.status(t, pod), secrets, nil)
	require.NoError(t, res.Error())
	st := f.status(t, pod)
	require.Len(t, st.SandboxStatuses, 1)
	sb := st.SandboxStatuses[0]
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_READY, sb.State)
	assert.Equal(t, map[string]string{"app": "web", kubetypes.KubernetesPodNameLabel: "web", kubetypes.KubernetesPodNamespaceLabel: "default",
		kubetypes.KubernetesPodUIDLabel: "uid-web"}, sb.Labels)
	assert.Equal(t, "hi", sb.Annotations["note"])
	require.Len(t, st.ContainerStatuses, 1)
	assert.Equal(t, "setup", st.ContainerStatuses[0].Name)
	assert.Equal(t, kubecontainer.ContainerStateRunning, st.ContainerStatuses[0].State)
	assert.Equal(t, []string{
		"Normal Pulling Pulling image \"busybox:1.37\"",
		"Normal Pulled Successfully pulled image \"busybox:1.37\" in 0s",
		"Normal Created Created container: setup",
		"Normal Started Started container setup",
	}, f.drain())

	// While it runs, a sync does nothing.
	res = f.m.SyncPod(ctx, pod, f.status(t, pod), secrets, nil)
	require.NoError(t, res.Error())
	assert.Empty(t, res.SyncResults)

	// It completes (SIGTERM, exit 0): the next sync starts the containers.
	_, err := f.m.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: st.ContainerStatuses[0].ID.ID, Timeout: 10})
	require.NoError(t, err)
	res = f.m.SyncPod(ctx, pod, f.status(t, pod), secrets, nil)
	require.NoError(t, res.Error())
	st = f.status(t, pod)
	for _, name := range []string{"app", "sidecar"} {
		cs := st.FindContainerStatusByName(name)
		require.NotNil(t, cs, name)
		assert.Equal(t, kubecontainer.ContainerStateRunning, cs.State, name)
		assert.Equal(t, 0, cs.RestartCount, name)
		assert.Equal(t, hashOf(pod, name), cs.Hash, "the hash round-trips through the annotations")
	}
	assert.Equal(t, []string{
		"Normal Pulling Pulling image \"registry.example.com/app:v1\"",
		"Normal Pulled Successfully pulled image \"registry.example.com/app:v1\" in 0s",
		"Normal Created Created container: app",
		"Normal Started Started container app",
		"Normal Pulled Container image \"busybox:1.37\" already present on machine",
		"Normal Created Created container: sidecar",
		"Normal Started Started container sidecar",
	}, f.drain())

	// The pull of the private image carried the secret's credentials for
	// its registry, and only those.
	var appAuth *runtimeapi.AuthConfig
	for _, a := range f.pulls.auths {
		if a != nil {
			appAuth = a
		}
	}
	require.NotNil(t, appAuth)
	assert.Equal(t, "alice", appAuth.Username)
	assert.Equal(t, "s3cret", appAuth.Password)
	assert.Equal(t, "https://registry.example.com", appAuth.ServerAddress)

	// The container's config as the runtime got it.
	cs := st.FindContainerStatusByName("app")
	resp, err := f.m.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cs.ID.ID, Verbose: true})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{kubetypes.KubernetesPodNameLabel: "web", kubetypes.KubernetesPodNamespaceLabel: "default",
		kubetypes.KubernetesPodUIDLabel: "uid-web", kubetypes.KubernetesContainerNameLabel: "app"}, resp.Status.Labels)
	assert.Equal(t, "0", resp.Status.Annotations[kubetypes.ContainerRestartCountAnnotation])
	assert.Equal(t, "30", resp.Status.Annotations[kubetypes.PodTerminationGracePeriodAnnotation])
	assert.Equal(t, filepath.Join(f.logDir, "default_web_uid-web", "app", "0.log"), resp.Status.LogPath)
	assert.DirExists(t, filepath.Join(f.logDir, "default_web_uid-web", "app"))
}

func TestSyncPodContainerConfig(t *testing.T) {
	f := newSyncFixture(t)
	pod := webPod()
	pod.Spec.InitContainers = nil
	cfg, err := f.m.generateContainerConfig(context.Background(), &pod.Spec.Containers[0], pod, 2, "10.88.0.2", "sha256:abc", []string{"10.88.0.2"}, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"sh", "-c"}, cfg.Command)
	assert.Equal(t, []string{"echo hello $HOME; " + serveUntilTERM}, cfg.Args, "$(VAR) expanded, $$ escaped")
	assert.Equal(t, "/srv", cfg.WorkingDir)
	assert.Equal(t, "app/2.log", cfg.LogPath)
	assert.EqualValues(t, 2, cfg.Metadata.Attempt)
	require.Len(t, cfg.Envs, 1)
	assert.Equal(t, "GREETING", cfg.Envs[0].Key)
	assert.Equal(t, "hello", string(cfg.Envs[0].Value))

	sb, err := f.m.generatePodSandboxConfig(pod, 3)
	require.NoError(t, err)
	assert.Equal(t, "web", sb.Hostname)
	assert.EqualValues(t, 3, sb.Metadata.Attempt)
	assert.Equal(t, filepath.Join(f.logDir, "default_web_uid-web"), sb.LogDirectory)
	require.Len(t, sb.PortMappings, 1)
	assert.EqualValues(t, 8080, sb.PortMappings[0].ContainerPort)
	assert.EqualValues(t, 18080, sb.PortMappings[0].HostPort)
	assert.Equal(t, runtimeapi.NamespaceMode_POD, sb.Linux.SecurityContext.NamespaceOptions.Network)
}

func TestSyncPodRestartsAnExitedContainerAsANewAttempt(t *testing.T) {
	ctx := context.Background()
	f := newSyncFixture(t)
	pod := webPod()
	pod.Spec.InitContainers = nil
	backOff := flowcontrol.NewFakeBackOff(10*time.Second, 300*time.Second, f.clk)

	require.NoError(t, f.m.SyncPod(ctx, pod, f.status(t, pod), nil, backOff).Error())
	first := f.status(t, pod).FindContainerStatusByName("sidecar")
	_, err := f.rt.ContainerAction(first.ID.ID, fakeruntime.ActionKill)
	require.NoError(t, err)
	f.drain()

	// Restarted: a new container, attempt 1, restart count 1.
	require.NoError(t, f.m.SyncPod(ctx, pod, f.status(t, pod), nil, backOff).Error())
	st := f.status(t, pod)
	second := st.FindContainerStatusByName("sidecar")
	assert.NotEqual(t, first.ID, second.ID)
	assert.Equal(t, kubecontainer.ContainerStateRunning, second.State)
	assert.Equal(t, 1, second.RestartCount)
	assert.Equal(t, 0, st.FindContainerStatusByName("app").RestartCount, "the other container is untouched")

	// It exits again at once: now it is in back-off (10 s).
	_, err = f.rt.ContainerAction(second.ID.ID, fakeruntime.ActionKill)
	require.NoError(t, err)
	f.drain()
	res := f.m.SyncPod(ctx, pod, f.status(t, pod), nil, backOff)
	require.Error(t, res.Error())
	require.Len(t, res.SyncResults, 2) // ConfigPodSandbox, StartContainer
	assert.ErrorIs(t, res.SyncResults[1].Error, kubecontainer.ErrCrashLoopBackOff)
	_, inBackOff := kubecontainer.MinBackoffExpiration(res.Error())
	assert.True(t, inBackOff, "the sync's error carries the back-off's end")
	assert.Equal(t, "sidecar", res.SyncResults[1].Target)
	events := f.drain()
	require.Len(t, events, 1)
	assert.True(t, strings.HasPrefix(events[0], "Warning BackOff Back-off restarting failed container sidecar in pod web_default(uid-web)"), events[0])
	assert.Equal(t, "back-off 10s restarting failed container=sidecar pod=web_default(uid-web)", res.SyncResults[1].Message)

	// After the back-off it starts again, attempt 2.
	f.clk.Step(11 * time.Second)
	require.NoError(t, f.m.SyncPod(ctx, pod, f.status(t, pod), nil, backOff).Error())
	assert.Equal(t, 2, f.status(t, pod).FindContainerStatusByName("sidecar").RestartCount)
}

func TestSyncPodNeverPullsWithPolicyNever(t *testing.T) {
	f := newSyncFixture(t)
	pod := webPod()
	pod.Spec.InitContainers = nil
	pod.Spec.Containers = pod.Spec.Containers[:1]
	pod.Spec.Containers[0].ImagePullPolicy = v1.PullNever
	res := f.m.SyncPod(context.Background(), pod, f.status(t, pod), nil, nil)
	require.Error(t, res.Error())
	var start *kubecontainer.SyncResult
	for _, r := range res.SyncResults {
		if r.Action == kubecontainer.StartContainer {
			start = r
		}
	}
	require.NotNil(t, start)
	assert.True(t, errors.Is(start.Error, ErrImageNeverPull))
	assert.Contains(t, f.drain(), `Warning ErrImageNeverPull Container image "registry.example.com/app:v1" is not present with pull policy of Never`)
	assert.Empty(t, f.pulls.auths, "nothing pulled")
}

func TestSyncPodReplacesADeadSandbox(t *testing.T) {
	ctx := context.Background()
	f := newSyncFixture(t)
	pod := webPod()
	pod.Spec.InitContainers = nil
	require.NoError(t, f.m.SyncPod(ctx, pod, f.status(t, pod), nil, nil).Error())
	_, err := f.rt.PodAction("default", "web", fakeruntime.ActionKill)
	require.NoError(t, err)
	f.drain()

	require.NoError(t, f.m.SyncPod(ctx, pod, f.status(t, pod), nil, nil).Error())
	st := f.status(t, pod)
	require.Len(t, st.SandboxStatuses, 2)
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_READY, st.SandboxStatuses[0].State)
	assert.EqualValues(t, 1, st.SandboxStatuses[0].Metadata.Attempt)
	assert.Len(t, st.GetRunningContainerStatuses(), 2)
	assert.Contains(t, f.drain(), "Normal SandboxChanged Pod sandbox changed, it will be killed and re-created.")
}

func TestKillPodStopsContainersThenTheSandbox(t *testing.T) {
	ctx := context.Background()
	f := newSyncFixture(t)
	pod := webPod()
	pod.Spec.InitContainers = nil
	require.NoError(t, f.m.SyncPod(ctx, pod, f.status(t, pod), nil, nil).Error())
	f.drain()

	running := kubecontainer.ConvertPodStatusToRunningPod(f.m.Type(), f.status(t, pod))
	require.Len(t, running.Containers, 2)
	require.NoError(t, f.m.KillPod(ctx, pod, running, nil))
	st := f.status(t, pod)
	assert.Empty(t, st.GetRunningContainerStatuses())
	for _, cs := range st.ContainerStatuses {
		assert.Equal(t, 0, cs.ExitCode, "SIGTERM within the grace period: exit 0")
	}
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, st.SandboxStatuses[0].State)
	assert.ElementsMatch(t, []string{"Normal Killing Stopping container app", "Normal Killing Stopping container sidecar"}, f.drain())

	// Nothing should run any more (Never, all exited): SyncPod does not
	// make a new sandbox.
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	require.NoError(t, f.m.SyncPod(ctx, pod, f.status(t, pod), nil, nil).Error())
	assert.Len(t, f.status(t, pod).SandboxStatuses, 1)
}

func TestSyncPodWithNoStatusYetStartsThePod(t *testing.T) {
	f := newSyncFixture(t)
	pod := webPod()
	pod.Spec.InitContainers = nil
	require.NoError(t, f.m.SyncPod(context.Background(), pod, nil, nil, nil).Error())
	assert.Len(t, f.status(t, pod).GetRunningContainerStatuses(), 2)
}

// ipHelper records the pod IPs each container's options were made with.
type ipHelper struct {
	literalHelper
	mu  sync.Mutex
	ips map[string][]string
}

func (h *ipHelper) GenerateRunContainerOptions(ctx context.Context, pod *v1.Pod, c *v1.Container, podIP string, podIPs []string, _ kubecontainer.ImageVolumes) (*kubecontainer.RunContainerOptions, error) {
	h.mu.Lock()
	h.ips[c.Name] = append([]string{podIP}, podIPs...)
	h.mu.Unlock()
	return h.literalHelper.GenerateRunContainerOptions(ctx, pod, c, podIP, podIPs, nil)
}

// The runtime reports no IP for a hostNetwork pod's sandbox; its
// containers get the IPs the kubelet put in the pod's status (the node's),
// as upstream's SyncPod keeps them (the e2e spec "Downward API should
// provide host IP and pod IP as an env var if pod uses host network").
func TestAHostNetworkPodsContainersGetTheIPsOfItsStatus(t *testing.T) {
	f := newSyncFixture(t)
	h := &ipHelper{ips: map[string][]string{}}
	f.m.helper = h
	pod := webPod()
	pod.Spec.InitContainers = nil
	pod.Spec.HostNetwork = true
	st := f.status(t, pod)
	st.IPs = []string{"192.0.2.10"} // what the kubelet's SyncPod hands over
	require.NoError(t, f.m.SyncPod(context.Background(), pod, st, nil, nil).Error())
	assert.Equal(t, []string{"192.0.2.10", "192.0.2.10"}, h.ips["app"])

	// A pod of its own network takes its sandbox's, whatever the status said.
	pod2 := webPod()
	pod2.UID, pod2.Name = "uid-web2", "web2"
	pod2.Spec.InitContainers = nil
	st2 := f.status(t, pod2)
	st2.IPs = []string{"192.0.2.10"}
	require.NoError(t, f.m.SyncPod(context.Background(), pod2, st2, nil, nil).Error())
	require.NotEmpty(t, h.ips["sidecar"])
	assert.NotEmpty(t, h.ips["sidecar"][0])
	assert.NotEqual(t, "192.0.2.10", h.ips["sidecar"][0])
}

// An image volume is pulled with its pullPolicy before the containers
// start; a container that mounts one whose pull failed waits with the
// pull's reason, and one that does not mount it starts. A pulled one
// reaches the runtime in the container's mount, which the mock refuses
// with its reason.
func TestSyncPodPullsImageVolumes(t *testing.T) {
	f := newSyncFixture(t)
	f.m.helper = imageMountsHelper{}
	pod := webPod()
	pod.Spec.InitContainers = nil
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
		Image: &v1.ImageVolumeSource{Reference: "registry.example.com/data:v1", PullPolicy: v1.PullNever}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	res := f.m.SyncPod(context.Background(), pod, f.status(t, pod), nil, nil)
	started := map[string]error{}
	for _, r := range res.SyncResults {
		if r.Action == kubecontainer.StartContainer {
			started[r.Target.(string)] = r.Error
		}
	}
	require.Len(t, started, 2)
	assert.ErrorIs(t, started["app"], ErrImageNeverPull)
	assert.NoError(t, started["sidecar"], "it does not mount the volume")
	events := f.drain()
	assert.Contains(t, events, `Warning ErrImageNeverPull Container image "registry.example.com/data:v1" is not present with pull policy of Never`)
	assert.Contains(t, events, `Warning Failed Error: ErrImageNeverPull`)

	pod.Spec.Volumes[0].Image = &v1.ImageVolumeSource{Reference: "busybox:1.37", PullPolicy: v1.PullIfNotPresent}
	res = f.m.SyncPod(context.Background(), pod, f.status(t, pod), nil, nil)
	var app *kubecontainer.SyncResult
	for _, r := range res.SyncResults {
		if r.Action == kubecontainer.StartContainer && r.Target == "app" {
			app = r
		}
	}
	require.NotNil(t, app, "app is started again")
	assert.ErrorIs(t, app.Error, kubecontainer.ErrCreateContainer)
	assert.Contains(t, app.Message, "mount /data: image volume busybox:1.37: this runtime cannot mount an image's files")
}

// imageMountsHelper mounts the image volumes it is given, as the
// kubelet's makeMounts does.
type imageMountsHelper struct{ literalHelper }

func (imageMountsHelper) GenerateRunContainerOptions(_ context.Context, _ *v1.Pod, c *v1.Container, _ string, _ []string, images kubecontainer.ImageVolumes) (*kubecontainer.RunContainerOptions, error) {
	opts := &kubecontainer.RunContainerOptions{}
	for _, vm := range c.VolumeMounts {
		if img := images[vm.Name]; img != nil {
			opts.Mounts = append(opts.Mounts, kubecontainer.Mount{Name: vm.Name, ContainerPath: vm.MountPath, Image: img, ReadOnly: true})
		}
	}
	return opts, nil
}
