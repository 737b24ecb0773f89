package prober

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/prober/results"
)

// sidecarFixture is a pod whose only probed container is a sidecar
// (restartable init container) "s", beside a regular init container "i"
// and a regular container "c" without probes; the pod's policy is Never.
func sidecarFixture(t *testing.T) *fixture {
	f := newFixture(t, v1.Probe{PeriodSeconds: 1})
	p := v1.Probe{PeriodSeconds: 1}
	f.pod.Spec.RestartPolicy = v1.RestartPolicyNever
	f.pod.Spec.InitContainers = []v1.Container{
		{Name: "i"},
		{Name: "s", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways), ReadinessProbe: &p, LivenessProbe: &p, StartupProbe: &p},
	}
	f.pod.Spec.Containers = []v1.Container{{Name: "c"}}
	return f
}

func runningSidecar(started bool) v1.PodStatus {
	return v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.88.0.2",
		InitContainerStatuses: []v1.ContainerStatus{
			{Name: "i", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}},
			{Name: "s", ContainerID: testContainerID, Started: &started,
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}},
		},
		ContainerStatuses: []v1.ContainerStatus{{Name: "c", ContainerID: "mykubelet-fake://c2",
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}}},
	}
}

// TestSidecarsAreProbed: AddPod starts the three workers of the sidecar
// (and none for the regular init container); a worker reads the sidecar's
// status among the init containers' and records its result.
func TestSidecarsAreProbed(t *testing.T) {
	f := sidecarFixture(t)
	f.m.AddPod(f.pod)
	t.Cleanup(f.m.Close)
	for _, pt := range []probeType{startup, readiness, liveness} {
		_, ok := f.m.getWorker(f.pod.UID, "s", pt)
		assert.True(t, ok, "a %s worker for the sidecar", pt)
		_, ok = f.m.getWorker(f.pod.UID, "i", pt)
		assert.False(t, ok, "no %s worker for a regular init container", pt)
	}

	f.status.set(f.pod.UID, runningSidecar(false))
	w := newWorker(f.m, startup, f.pod, f.pod.Spec.InitContainers[1])
	f.prober.answer(results.Failure)
	for range 3 { // failureThreshold's default
		require.True(t, w.doProbe(context.Background()))
	}
	assert.Equal(t, results.Failure, get(t, w), "the sidecar's startup probe ran")

	// A sidecar that exited is restarted under Never too: keep the worker.
	st := runningSidecar(true)
	st.InitContainerStatuses[1].ContainerID = "mykubelet-fake://c3"
	st.InitContainerStatuses[1].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}
	f.status.set(f.pod.UID, st)
	assert.True(t, w.doProbe(context.Background()), "the worker goes on for a sidecar that will restart")
}

// TestUpdatePodStatusSidecarStartedAndReady: a sidecar is started once its
// startup probe passed and ready once its readiness probe did, as a
// regular container; a regular init container is ready once completed.
func TestUpdatePodStatusSidecarStartedAndReady(t *testing.T) {
	f := sidecarFixture(t)
	f.m.AddPod(f.pod)
	t.Cleanup(f.m.Close)
	id := kubecontainer.ContainerID{Type: "mykubelet-fake", ID: "c1"}

	st := runningSidecar(false)
	f.m.UpdatePodStatus(f.pod, &st)
	s := st.InitContainerStatuses[1]
	assert.False(t, *s.Started, "no startup result yet")
	assert.False(t, s.Ready)
	assert.True(t, st.InitContainerStatuses[0].Ready, "a completed init container is ready")
	assert.True(t, st.ContainerStatuses[0].Ready, "the regular container has no probe")

	f.m.startupManager.Set(id, results.Success, f.pod)
	st = runningSidecar(false)
	f.m.UpdatePodStatus(f.pod, &st)
	assert.True(t, *st.InitContainerStatuses[1].Started)
	assert.False(t, st.InitContainerStatuses[1].Ready, "readiness has not passed yet")

	f.m.readinessManager.Set(id, results.Success, f.pod)
	st = runningSidecar(false)
	f.m.UpdatePodStatus(f.pod, &st)
	assert.True(t, *st.InitContainerStatuses[1].Started)
	assert.True(t, st.InitContainerStatuses[1].Ready)

	f.m.readinessManager.Set(id, results.Failure, f.pod)
	st = runningSidecar(false)
	f.m.UpdatePodStatus(f.pod, &st)
	assert.False(t, st.InitContainerStatuses[1].Ready, "a failing readiness probe makes it unready")
}
