package kubelet

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/kubetypes"
)

// lifecycleKubelet is a Kubelet with RunContainers over the mock runtime on
// a fake clock, with the lifecycle fields of pods set by the caller.
func lifecycleKubelet(t *testing.T, pods PodsConfig) (*Kubelet, *kuberuntime.Manager, *clocktesting.FakeClock, *bytes.Buffer) {
	t.Helper()
	clk := clocktesting.NewFakeClock(podT0)
	m, err := kuberuntime.Connect(context.Background(), "unix://"+fakeruntimetest.Serve(t, fakeruntime.New(clk)), clk)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	out := &bytes.Buffer{}
	pods.Updates, pods.RunContainers, pods.Out = make(chan kubetypes.PodUpdate), true, out
	pods.RemoteRuntimeService, pods.RemoteImageService = m.RuntimeService(), m.ImageService()
	pods.PodLogsDirectory = t.TempDir()
	kl, err := New(Config{Client: fake.NewClientset(), NodeName: "n1", Clock: clk, Pods: &pods})
	require.NoError(t, err)
	return kl, m, clk, out
}

// runPod makes the runtime run pod (a sandbox and its containers) without
// telling the Kubelet: as a pod left behind by an earlier kubelet.
func runPod(t *testing.T, m *kuberuntime.Manager, pod *v1.Pod) {
	t.Helper()
	result := m.SyncPod(context.Background(), pod, nil, nil, nil)
	require.NoError(t, result.Error())
}

// whileStepping runs f and, each time a new timer waits on clk (beyond
// those waiting when it began: the containers' own sleeps), steps clk by d,
// until f returns.
func whileStepping(t *testing.T, clk *clocktesting.FakeClock, d time.Duration, f func()) {
	t.Helper()
	baseline := clk.Waiters()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	for {
		select {
		case <-done:
			return
		case <-time.After(time.Millisecond):
			if clk.Waiters() > baseline {
				clk.Step(d)
			}
		}
	}
}

func sleeper(name, uid string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid)},
		Spec: v1.PodSpec{NodeName: "n1", RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{
			Name: "app", Image: "busybox:1.37", Command: []string{"sh", "-c", "sleep 3600"}}}},
	}
}

// sandboxStates lists the runtime's sandboxes' states by pod name.
func sandboxStates(t *testing.T, m *kuberuntime.Manager) map[string]string {
	t.Helper()
	resp, err := m.RuntimeService().ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	states := map[string]string{}
	for _, s := range resp.Items {
		states[s.Metadata.Name] = s.State.String()
	}
	return states
}

func TestWithoutTheLifecycleFieldsNothingIsCollectedOrKilled(t *testing.T) {
	kl, m, _, out := lifecycleKubelet(t, PodsConfig{})
	assert.Nil(t, kl.lifecycle.containerGC, "no container GC")
	assert.Empty(t, kl.lifecycle.podSyncHandlers, "no active deadline")
	runPod(t, m, sleeper("left", "uid-left"))
	for range 3 {
		kl.HandlePodCleanups(context.Background())
	}
	assert.Equal(t, map[string]string{"left": "SANDBOX_READY"}, sandboxStates(t, m), "an orphan is left alone, as before")
	assert.NotContains(t, out.String(), "orphaned")
}

func TestHousekeepingKillsAnOrphanedRuntimePodAtTheSecondLook(t *testing.T) {
	kl, m, clk, out := lifecycleKubelet(t, PodsConfig{ContainerGC: ptr.To(kuberuntime.DefaultGCPolicy())})
	wanted := sleeper("wanted", "uid-wanted")
	kl.podManager.AddPod(wanted)
	runPod(t, m, wanted)
	runPod(t, m, sleeper("left", "uid-left"))

	kl.HandlePodCleanups(context.Background())
	assert.Equal(t, map[string]string{"wanted": "SANDBOX_READY", "left": "SANDBOX_READY"}, sandboxStates(t, m),
		"the first look only suspects it: its pod may still be on its way from the sources")
	// sleep, PID 1 without a trap, ignores SIGTERM: the kill waits out the
	// grace period (1 s, raised to the 2 s minimum) on the runtime's clock.
	whileStepping(t, clk, 2*time.Second, func() { kl.HandlePodCleanups(context.Background()) })
	assert.Equal(t, map[string]string{"wanted": "SANDBOX_READY", "left": "SANDBOX_NOTREADY"}, sandboxStates(t, m),
		"the second look kills it; the pod the pod manager has stays")
	assert.Contains(t, out.String(), "housekeeping: killing orphaned runtime pod default/left (uid uid-left): no pod wants it")
	pods, err := m.GetPods(context.Background(), false)
	require.NoError(t, err)
	require.Len(t, pods, 1)
	assert.Equal(t, types.UID("uid-wanted"), pods[0].ID, "nothing of the orphan runs")
}

func TestAnOrphanThatIsAdoptedInTimeIsNotKilled(t *testing.T) {
	kl, m, _, _ := lifecycleKubelet(t, PodsConfig{ContainerGC: ptr.To(kuberuntime.DefaultGCPolicy())})
	late := sleeper("late", "uid-late")
	runPod(t, m, late)
	kl.HandlePodCleanups(context.Background()) // suspected
	kl.podManager.AddPod(late)                 // its update arrives
	kl.HandlePodCleanups(context.Background())
	kl.HandlePodCleanups(context.Background())
	assert.Equal(t, map[string]string{"late": "SANDBOX_READY"}, sandboxStates(t, m))
}

func TestHousekeepingForgetsExpiredCrashLoopBackOffs(t *testing.T) {
	kl, _, clk, _ := lifecycleKubelet(t, PodsConfig{ContainerGC: ptr.To(kuberuntime.DefaultGCPolicy())})
	kl.backOff.Next("old", clk.Now())
	clk.Step(kuberuntime.CrashLoopBackOffResetAfter / 2)
	kl.backOff.Next("recent", clk.Now())
	clk.Step(kuberuntime.CrashLoopBackOffResetAfter/2 + time.Second)
	kl.HandlePodCleanups(context.Background())
	assert.Equal(t, time.Duration(0), kl.backOff.Get("old"), "600 s after its last failure: forgotten")
	assert.Equal(t, kuberuntime.InitialCrashLoopBackOff, kl.backOff.Get("recent"), "301 s after: kept")
}

func TestContainerGCChecksItsPolicy(t *testing.T) {
	clk := clocktesting.NewFakeClock(podT0)
	m, err := kuberuntime.Connect(context.Background(), "unix://"+fakeruntimetest.Serve(t, fakeruntime.New(clk)), clk)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	_, err = New(Config{Client: fake.NewClientset(), NodeName: "n1", Clock: clk, Pods: &PodsConfig{
		Updates: make(chan kubetypes.PodUpdate), RemoteRuntimeService: m.RuntimeService(), RemoteImageService: m.ImageService(),
		RunContainers: true, ContainerGC: &kuberuntime.GCPolicy{MinAge: -time.Second}}})
	assert.ErrorContains(t, err, "invalid minimum garbage collection age")
}

func TestAPodPastItsActiveDeadlineIsSyncedAndFailed(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	kl, _, clk, _ := lifecycleKubelet(t, PodsConfig{ActiveDeadline: true, Recorder: rec})
	pod := sleeper("job", "uid-job")
	pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](30)
	pod.Status = v1.PodStatus{Phase: v1.PodRunning, StartTime: ptr.To(metav1.NewTime(clk.Now()))}
	kl.podManager.AddPod(pod)
	other := sleeper("web", "uid-web")
	kl.podManager.AddPod(other)

	assert.Empty(t, kl.getPodsToSync(), "nothing due, no deadline passed")
	assert.Equal(t, v1.PodPending, kl.apiPodStatus(pod, nil, false).Phase, "before the deadline: as usual")

	clk.Step(30 * time.Second)
	toSync := kl.getPodsToSync()
	require.Len(t, toSync, 1, "the sync tick takes the pod past its deadline, and only it")
	assert.Equal(t, pod.UID, toSync[0].UID)
	s := kl.apiPodStatus(pod, nil, false)
	assert.Equal(t, v1.PodFailed, s.Phase)
	assert.Equal(t, "DeadlineExceeded", s.Reason)
	assert.Equal(t, "Pod was active on the node longer than the specified deadline", s.Message)
	assert.Equal(t, "Normal DeadlineExceeded Pod was active on the node longer than the specified deadline", <-rec.Events)
	assert.Equal(t, v1.PodPending, kl.apiPodStatus(other, nil, false).Phase, "a pod without a deadline is left alone")
}
