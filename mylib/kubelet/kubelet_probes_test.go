package kubelet

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/kubetypes"
)

// syncedBuffer is an io.Writer tests can read while the kubelet writes.
type syncedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncedBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncedBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func execProbe(cmd ...string) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}},
		PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}
}

// livenessWithGrace is an exec probe whose failure kills the container
// with a grace period of 1 s (the probe's terminationGracePeriodSeconds),
// not the pod's 30 s: sleep ignores SIGTERM.
func livenessWithGrace(cmd ...string) *v1.Probe {
	p := execProbe(cmd...)
	one := int64(1)
	p.TerminationGracePeriodSeconds = &one
	return p
}

// TestProbesDriveReadyAndRestarts runs the whole pod half with probes, on
// the real clock and the mock runtime: readiness sets the container's ready
// and the pod's Ready condition both ways, with an Unhealthy event; a
// failed liveness probe kills the container with upstream's message and
// the restart policy starts it again; a startup probe keeps the container
// not started (and not ready) until it passes.
func TestProbesDriveReadyAndRestarts(t *testing.T) {
	rt := fakeruntime.New(clock.RealClock{})
	m, err := kuberuntime.Connect(context.Background(), "unix://"+fakeruntimetest.Serve(t, rt), clock.RealClock{})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	pods := []*v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "ready", Namespace: "default", UID: "uid-ready"}, Spec: v1.PodSpec{
			NodeName: "n1", RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "c", Image: "busybox",
				Command:        []string{"sh", "-c", "touch /tmp/healthy; sleep 600"},
				ReadinessProbe: execProbe("cat", "/tmp/healthy")}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "live", Namespace: "default", UID: "uid-live"}, Spec: v1.PodSpec{
			NodeName: "n1", RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "c", Image: "busybox",
				Command:       []string{"sh", "-c", "sleep 600"},
				LivenessProbe: livenessWithGrace("cat", "/tmp/alive")}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "slow", Namespace: "default", UID: "uid-slow"}, Spec: v1.PodSpec{
			NodeName: "n1", RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "c", Image: "busybox",
				Command:      []string{"sh", "-c", "sleep 600"},
				StartupProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/started"}}}, PeriodSeconds: 1, FailureThreshold: 1000}}}}},
	}
	client := fake.NewClientset(pods[0].DeepCopy(), pods[1].DeepCopy(), pods[2].DeepCopy())
	rec := record.NewFakeRecorder(1000)
	updates := make(chan kubetypes.PodUpdate, 1)
	out := &syncedBuffer{}
	kl, err := New(Config{Client: client, NodeName: "n1", Pods: &PodsConfig{
		Updates: updates, RemoteRuntimeService: m.RuntimeService(), RemoteImageService: m.ImageService(), RelistPeriod: 100 * time.Millisecond, RunContainers: true, Probes: true,
		Recorder: rec, PodLogsDirectory: t.TempDir(), Out: io.MultiWriter(out)}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = kl.RunPods(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: pods}

	get := func(name string) *v1.Pod {
		p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return p
	}
	cond := func(p *v1.Pod, t v1.PodConditionType) v1.ConditionStatus {
		for _, c := range p.Status.Conditions {
			if c.Type == t {
				return c.Status
			}
		}
		return ""
	}
	ready := func(name string) bool {
		p := get(name)
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready &&
			cond(p, v1.PodReady) == v1.ConditionTrue && cond(p, v1.ContainersReady) == v1.ConditionTrue
	}
	var events []string
	var evMu sync.Mutex
	readEvents := func() []string {
		evMu.Lock()
		defer evMu.Unlock()
		for {
			select {
			case e := <-rec.Events:
				events = append(events, e)
			default:
				return append([]string(nil), events...)
			}
		}
	}
	hasEvent := func(prefix string) func() bool {
		return func() bool {
			for _, e := range readEvents() {
				if strings.HasPrefix(e, prefix) {
					return true
				}
			}
			return false
		}
	}

	t.Run("readiness passes: the container, ContainersReady and Ready are true", func(t *testing.T) {
		require.Eventually(t, func() bool { return ready("ready") }, 30*time.Second, 20*time.Millisecond)
		assert.Contains(t, out.String(), `SyncLoop (probe) probe="readiness" status="ready" pod="default/ready"`)
	})
	t.Run("readiness fails: not ready, an Unhealthy event", func(t *testing.T) {
		id, err := rt.FindContainer("default", "ready", "c")
		require.NoError(t, err)
		_, err = rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"rm", "/tmp/healthy"}})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			p := get("ready")
			return !p.Status.ContainerStatuses[0].Ready && cond(p, v1.PodReady) == v1.ConditionFalse && cond(p, v1.ContainersReady) == v1.ConditionFalse
		}, 30*time.Second, 20*time.Millisecond)
		assert.Equal(t, v1.PodRunning, get("ready").Status.Phase, "still running: readiness never restarts")
		assert.Eventually(t, hasEvent("Warning Unhealthy Readiness probe failed: cat: "), 10*time.Second, 20*time.Millisecond, "%q", readEvents())
		assert.Contains(t, out.String(), `SyncLoop (probe) probe="readiness" status="" pod="default/ready"`)
	})
	t.Run("liveness fails: the container is killed and restarted", func(t *testing.T) {
		require.Eventually(t, func() bool {
			p := get("live")
			return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
		}, 30*time.Second, 20*time.Millisecond)
		assert.Eventually(t, hasEvent("Normal Killing Container c failed liveness probe, will be restarted"), 10*time.Second, 20*time.Millisecond, "%q", readEvents())
		assert.True(t, hasEvent("Warning Unhealthy Liveness probe failed: cat: ")())
		assert.Contains(t, out.String(), `SyncLoop (probe) probe="liveness" status="unhealthy" pod="default/live"`)
	})
	t.Run("a startup probe holds the container not started until it passes", func(t *testing.T) {
		require.Eventually(t, func() bool {
			p := get("slow")
			return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
		}, 30*time.Second, 20*time.Millisecond)
		time.Sleep(1500 * time.Millisecond) // a probe or two fail
		p := get("slow")
		cs := p.Status.ContainerStatuses[0]
		require.NotNil(t, cs.Started)
		assert.False(t, *cs.Started, "running, but its startup probe has not passed")
		assert.False(t, cs.Ready)
		assert.Equal(t, v1.ConditionFalse, cond(p, v1.PodReady))
		id, err := rt.FindContainer("default", "slow", "c")
		require.NoError(t, err)
		_, err = rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"touch", "/tmp/started"}})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			cs := get("slow").Status.ContainerStatuses[0]
			return cs.Started != nil && *cs.Started && cs.Ready
		}, 30*time.Second, 20*time.Millisecond, "started, and ready (no readiness probe)")
		assert.Equal(t, int32(0), get("slow").Status.ContainerStatuses[0].RestartCount, "failureThreshold 1000: never killed")
	})
}

// TestProbesNeedRunContainers: a clear error at New.
func TestProbesNeedRunContainers(t *testing.T) {
	_, err := New(Config{Client: fake.NewClientset(), NodeName: "n1", Pods: &PodsConfig{
		Updates: make(chan kubetypes.PodUpdate), Runtime: emptyRuntime{}, Probes: true}})
	assert.EqualError(t, err, "kubelet: Config.Pods.Probes needs RunContainers (probes need running containers)")
}
