package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"mykubelet/mylib/kubetypes"
	kubepod "mykubelet/mylib/pod"
	"mykubelet/mylib/volume"
	"mykubelet/mylib/volumemanager"
)

// dirPlugin serves emptyDir volumes as directories under the host's
// GetPodVolumeDir, as the real plugin does.
type dirPlugin struct{ host volume.VolumeHost }

func (p *dirPlugin) Init(h volume.VolumeHost) error      { p.host = h; return nil }
func (p *dirPlugin) GetPluginName() string               { return "kubernetes.io/empty-dir" }
func (p *dirPlugin) CanSupport(s *volume.Spec) bool      { return s.Volume.EmptyDir != nil }
func (p *dirPlugin) RequiresRemount(s *volume.Spec) bool { return false }
func (p *dirPlugin) dir(uid types.UID, name string) string {
	return p.host.GetPodVolumeDir(uid, p.GetPluginName(), name)
}
func (p *dirPlugin) NewMounter(s *volume.Spec, pod *v1.Pod) (volume.Mounter, error) {
	return dirMounter(p.dir(pod.UID, s.Name())), nil
}
func (p *dirPlugin) NewUnmounter(name string, uid types.UID) (volume.Unmounter, error) {
	return dirMounter(p.dir(uid, name)), nil
}

type dirMounter string

func (m dirMounter) GetPath() string                  { return string(m) }
func (m dirMounter) SetUp(volume.MounterArgs) error   { return os.MkdirAll(string(m), 0o777) }
func (m dirMounter) GetAttributes() volume.Attributes { return volume.Attributes{} }
func (m dirMounter) TearDown() error                  { return os.RemoveAll(string(m)) }

// terminations answers the volume manager: pods in done have terminated.
type terminations struct {
	mu   sync.Mutex
	done map[types.UID]bool
}

func (s *terminations) IsPodTerminationRequested(uid types.UID) bool {
	return s.ShouldPodRuntimeBeRemoved(uid)
}
func (s *terminations) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done[uid]
}

// newVolumeKubelet is a Kubelet with only its volume part, on a fake clock.
func newVolumeKubelet(t *testing.T) (*Kubelet, kubepod.Manager, *terminations, *testingclock.FakeClock) {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}}}
	kl := &Kubelet{client: fake.NewClientset(node), nodeName: "n1", clock: clk, out: &lineWriter{w: &testWriter{t}}, podManager: kubepod.NewBasicPodManager(), recorder: record.NewFakeRecorder(10)}
	root := t.TempDir()
	kl.volumes = &volumes{rootDirectory: root, hostPathRoot: filepath.Join(root, hostPathRootDir), pluginMgr: &volume.VolumePluginMgr{}}
	require.NoError(t, kl.volumes.pluginMgr.InitPlugins([]volume.VolumePlugin{&dirPlugin{}}, kubeletVolumeHost{kl}))
	states := &terminations{done: map[types.UID]bool{}}
	m, err := volumemanager.NewVolumeManager(volumemanager.Config{KubeClient: kl.client, PodManager: kl.podManager,
		PodStateProvider: volumePodStates{states, states, nil}, PluginMgr: kl.volumes.pluginMgr, Clock: clk})
	require.NoError(t, err)
	kl.volumes.manager = m
	return kl, kl.podManager, states, clk
}

type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// stepUntil steps the fake clock by 100 ms while f is false.
func stepUntil(t *testing.T, clk *testingclock.FakeClock, f func() bool) {
	t.Helper()
	for i := 0; !f(); i++ {
		require.Less(t, i, 100000, "never happened")
		if clk.HasWaiters() {
			clk.Step(100 * time.Millisecond)
		} else {
			time.Sleep(time.Millisecond)
		}
	}
}

func TestVolumeHostPathsAreUnderTheRootDirectory(t *testing.T) {
	kl, _, _, _ := newVolumeKubelet(t)
	r := kl.volumes.rootDirectory
	h := kubeletVolumeHost{kl}
	assert.Equal(t, filepath.Join(r, "pods", "u1"), h.GetPodDir("u1"))
	assert.Equal(t, filepath.Join(r, "pods", "u1", "volumes", "kubernetes.io~configmap", "cfg"), h.GetPodVolumeDir("u1", "kubernetes.io/configmap", "cfg"))
	assert.Equal(t, filepath.Join(r, "host"), h.GetHostPathRoot())
	assert.Equal(t, types.NodeName("n1"), h.GetNodeName())
	alloc, err := h.GetNodeAllocatable()
	require.NoError(t, err)
	assert.Equal(t, "2", alloc.Cpu().String(), "the Node's allocatable")
	_, err = h.GetConfigMapFunc()("default", "cfg")
	assert.EqualError(t, err, "configmap default/cfg: this kubelet has no ConfigMap manager")
}

func TestMakePodDataDirs(t *testing.T) {
	kl, _, _, _ := newVolumeKubelet(t)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1"}}
	require.NoError(t, kl.makePodDataDirs(pod))
	for _, d := range []string{"", "volumes", "plugins"} {
		fi, err := os.Stat(filepath.Join(kl.volumes.rootDirectory, "pods", "u1", d))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "traversable by the sandbox's user: %q", d)
	}
	for _, uid := range []types.UID{"", ".", "..", "../x", "a/b"} {
		pod.UID = uid
		assert.Error(t, kl.makePodDataDirs(pod), "UID %q", uid)
	}
	_, err := os.Stat(filepath.Join(kl.volumes.rootDirectory, "x"))
	assert.True(t, os.IsNotExist(err), "nothing made outside R/pods")
}

// TestOrphanedPodDirsGoOnceTheirVolumesAreDown: a pod the kubelet no
// longer knows keeps its directory while its volumes are mounted, and
// loses it once they are down; known and running pods keep theirs.
func TestOrphanedPodDirsGoOnceTheirVolumesAreDown(t *testing.T) {
	kl, pods, states, clk := newVolumeKubelet(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); kl.volumes.manager.Run(ctx, nil) }()
	defer func() { cancel(); <-done }()

	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "mounted"}, Spec: v1.PodSpec{
		Volumes:    []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
		Containers: []v1.Container{{Name: "c", VolumeMounts: []v1.VolumeMount{{Name: "scratch", MountPath: "/s"}}}}}}
	pods.AddPod(pod)
	require.NoError(t, kl.makePodDataDirs(pod))
	errc := make(chan error, 1)
	go func() { errc <- kl.volumes.manager.WaitForAttachAndMount(ctx, pod) }()
	var err error
	stepUntil(t, clk, func() bool {
		select {
		case err = <-errc:
			return true
		default:
			return false
		}
	})
	require.NoError(t, err)
	scratch := filepath.Join(kl.getPodVolumesDir("mounted"), "kubernetes.io~empty-dir", "scratch")
	require.DirExists(t, scratch)

	for _, uid := range []types.UID{"known", "running", "orphan"} {
		require.NoError(t, os.MkdirAll(filepath.Join(kl.getPodDir(uid), "volumes"), 0o755))
	}
	known := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "k", Namespace: "default", UID: "known"}}
	pods.AddPod(known)
	pods.RemovePod(pod) // gone from the pod manager, its containers still stopping

	require.NoError(t, kl.cleanupOrphanedPodDirs(pods.GetPods(), []types.UID{"running"}))
	assert.DirExists(t, kl.getPodDir("known"))
	assert.DirExists(t, kl.getPodDir("running"))
	assert.NoDirExists(t, kl.getPodDir("orphan"), "no volume mounted: removed")
	assert.DirExists(t, scratch, "its volume is mounted: kept")

	states.mu.Lock()
	states.done["mounted"] = true // terminated: the volume manager tears its volume down
	states.mu.Unlock()
	stepUntil(t, clk, func() bool { return !kl.volumes.manager.HasPossiblyMountedVolumesForPod("mounted") })
	assert.NoDirExists(t, scratch, "torn down")
	require.NoError(t, kl.cleanupOrphanedPodDirs(pods.GetPods(), nil))
	assert.NoDirExists(t, kl.getPodDir("mounted"))
	assert.DirExists(t, kl.getPodDir("known"))
}

func TestVolumesNeedRunContainersAndARootDirectory(t *testing.T) {
	_, err := New(Config{Client: fake.NewClientset(), NodeName: "n1", Pods: &PodsConfig{Updates: make(chan kubetypes.PodUpdate), Runtime: emptyRuntime{}, Volumes: true}})
	assert.EqualError(t, err, "kubelet: Config.Pods.Volumes needs RunContainers (volumes are for containers)")
}

// podRegistry records what the managers are told.
type podRegistry struct {
	mu  sync.Mutex
	log []string
}

func (r *podRegistry) add(s string) { r.mu.Lock(); defer r.mu.Unlock(); r.log = append(r.log, s) }
func (r *podRegistry) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.log...)
}

type fakeConfigMaps struct{ *podRegistry }

func (f fakeConfigMaps) GetConfigMap(string, string) (*v1.ConfigMap, error) { return nil, nil }
func (f fakeConfigMaps) RegisterPod(p *v1.Pod)                              { f.add("configmaps register " + p.Name) }
func (f fakeConfigMaps) UnregisterPod(p *v1.Pod)                            { f.add("configmaps unregister " + p.Name) }

type fakeSecrets struct{ *podRegistry }

func (f fakeSecrets) GetSecret(string, string) (*v1.Secret, error) { return nil, nil }
func (f fakeSecrets) RegisterPod(p *v1.Pod)                        { f.add("secrets register " + p.Name) }
func (f fakeSecrets) UnregisterPod(p *v1.Pod)                      { f.add("secrets unregister " + p.Name) }

type fakeTokens struct{ *podRegistry }

func (f fakeTokens) GetServiceAccountToken(string, string, *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return nil, nil
}
func (f fakeTokens) DeleteServiceAccountToken(uid types.UID) { f.add("tokens delete " + string(uid)) }

func volumePod(name string, source v1.VolumeSource) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)}, Spec: v1.PodSpec{
		Volumes:    []v1.Volume{{Name: "data", VolumeSource: source}},
		Containers: []v1.Container{{Name: "c", VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/d"}}}}}}
}

// TestSyncPodVolumesAsUpstream: SyncPod's part registers the pod, makes its
// directories and records upstream's FailedMount when a volume cannot be
// processed; a wait cut short records nothing; SyncTerminatedPod's part
// waits for the unmount, then the managers forget the pod.
func TestSyncPodVolumesAsUpstream(t *testing.T) {
	kl, pods, states, clk := newVolumeKubelet(t)
	reg := &podRegistry{}
	kl.volumes.configMapManager, kl.volumes.secretManager, kl.volumes.tokenManager = fakeConfigMaps{reg}, fakeSecrets{reg}, fakeTokens{reg}
	kl.podWorkers = &fakePodWorkers{}
	recorder := kl.recorder.(*record.FakeRecorder)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); kl.volumes.manager.Run(ctx, nil) }()
	defer func() { cancel(); <-done }()

	// No plugin: upstream's event, at once.
	nfs := volumePod("nfs", v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}})
	pods.AddPod(nfs)
	errc := make(chan error, 1)
	var err error
	go func() { errc <- kl.waitForVolumes(ctx, nfs) }()
	stepUntil(t, clk, func() bool {
		select {
		case err = <-errc:
			return true
		default:
			return false
		}
	})
	want := `unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: failed to get Plugin from volumeSpec for volume "data" err=no volume plugin matched: volume "data" is of a kind this node cannot mount (nfs)`
	assert.EqualError(t, err, want)
	assert.Equal(t, "Warning FailedMount Unable to attach or mount volumes: "+want, <-recorder.Events)
	assert.DirExists(t, kl.getPodPluginsDir("nfs"))
	assert.Equal(t, []string{"secrets register nfs", "configmaps register nfs"}, reg.lines()[:2])

	// Cut short (the pod worker's context ends): no event.
	pending := volumePod("pending", v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}})
	cancelled, stop := context.WithCancel(ctx)
	stop()
	assert.ErrorIs(t, kl.waitForVolumes(cancelled, pending), context.Canceled)
	assert.Empty(t, recorder.Events)

	// Mounted, then terminated: released.
	ok := volumePod("ok", v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}})
	pods.AddPod(ok)
	go func() { errc <- kl.waitForVolumes(ctx, ok) }()
	stepUntil(t, clk, func() bool {
		select {
		case err = <-errc:
			return true
		default:
			return false
		}
	})
	require.NoError(t, err)
	assert.Contains(t, kl.volumes.manager.GetMountedVolumesForPod("ok"), "data")
	states.mu.Lock()
	states.done["ok"] = true
	states.mu.Unlock()
	go func() { errc <- kl.releaseVolumes(ctx, ok) }()
	stepUntil(t, clk, func() bool {
		select {
		case err = <-errc:
			return true
		default:
			return false
		}
	})
	require.NoError(t, err)
	assert.Empty(t, kl.volumes.manager.GetPossiblyMountedVolumesForPod("ok"))
	lines := reg.lines()
	assert.Equal(t, []string{"secrets unregister ok", "configmaps unregister ok", "tokens delete ok"}, lines[len(lines)-3:])
}

func TestRejectedPodsGetNoVolumes(t *testing.T) {
	s := volumePodStates{&fakePodWorkers{terminating: map[types.UID]bool{"stopping": true}}, &terminations{done: map[types.UID]bool{}},
		func(uid types.UID) bool { return uid == "rejected" }}
	assert.True(t, s.ShouldPodContainersBeTerminating("rejected"), "admission rejected it: it never runs")
	assert.True(t, s.ShouldPodContainersBeTerminating("stopping"))
	assert.False(t, s.ShouldPodContainersBeTerminating("running"))
}
