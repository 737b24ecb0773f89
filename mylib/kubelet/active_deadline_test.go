package kubelet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	kubecontainer "mykubelet/mylib/container"
)

// statusCache is a PodStatusProvider.
type statusCache map[types.UID]v1.PodStatus

func (c statusCache) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	s, ok := c[uid]
	return s, ok
}

var deadlineT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func deadlinePod(deadline *int64) *v1.Pod {
	pod := phasePod(v1.RestartPolicyNever, nil, "a")
	pod.Spec.ActiveDeadlineSeconds = deadline
	return pod
}

func TestActiveDeadlineFailsThePodWithDeadlineExceeded(t *testing.T) {
	clk := clocktesting.NewFakeClock(deadlineT0)
	recorder := record.NewFakeRecorder(10)
	started := metav1.NewTime(deadlineT0)
	cache := statusCache{"uid-1": {StartTime: &started}}
	h, err := newActiveDeadlineHandler(cache, recorder, clk)
	require.NoError(t, err)
	pod := deadlinePod(ptr.To[int64](30))

	clk.Step(29 * time.Second)
	assert.False(t, h.ShouldSync(pod), "29 s of 30")
	assert.Equal(t, ShouldEvictResponse{}, h.ShouldEvict(pod))
	assert.Empty(t, recorder.Events)

	clk.Step(time.Second)
	assert.True(t, h.ShouldSync(pod), "30 s of 30")
	assert.Equal(t, ShouldEvictResponse{Evict: true, Reason: "DeadlineExceeded",
		Message: "Pod was active on the node longer than the specified deadline"}, h.ShouldEvict(pod))
	select {
	case e := <-recorder.Events:
		assert.Equal(t, "Normal DeadlineExceeded Pod was active on the node longer than the specified deadline", e)
	default:
		t.Error("no DeadlineExceeded event")
	}

	// The status the kubelet then generates for the running pod is Failed.
	podStatus := &kubecontainer.PodStatus{ID: pod.UID, SandboxStatuses: sandbox(), ContainerStatuses: []*kubecontainer.Status{
		rtStatus("a", "c1", kubecontainer.ContainerStateRunning, 0, 0, deadlineT0)}}
	s := generateAPIPodStatus(pod, podStatus, v1.PodStatus{}, false, nil, nil)
	require.Equal(t, v1.PodRunning, s.Phase)
	applyPodSyncHandlers([]PodSyncHandler{h}, pod, &s)
	assert.Equal(t, v1.PodFailed, s.Phase)
	assert.Equal(t, "DeadlineExceeded", s.Reason)
	assert.Equal(t, "Pod was active on the node longer than the specified deadline", s.Message)
}

func TestActiveDeadlineNeedsADeadlineAndAStartTime(t *testing.T) {
	clk := clocktesting.NewFakeClock(deadlineT0)
	h, err := newActiveDeadlineHandler(statusCache{}, record.NewFakeRecorder(10), clk)
	require.NoError(t, err)
	clk.Step(time.Hour)

	assert.False(t, h.ShouldSync(deadlinePod(nil)), "no deadline")
	notStarted := deadlinePod(ptr.To[int64](1))
	assert.False(t, h.ShouldSync(notStarted), "no start time yet")

	// Without a status from the kubelet, the pod's own start time counts.
	started := metav1.NewTime(deadlineT0)
	notStarted.Status.StartTime = &started
	assert.True(t, h.ShouldSync(notStarted))

	_, err = newActiveDeadlineHandler(nil, record.NewFakeRecorder(1), clk)
	assert.Error(t, err)
}

func TestApplyPodSyncHandlersLeavesAPodNoHandlerFails(t *testing.T) {
	clk := clocktesting.NewFakeClock(deadlineT0)
	h, err := newActiveDeadlineHandler(statusCache{}, record.NewFakeRecorder(10), clk)
	require.NoError(t, err)
	s := v1.PodStatus{Phase: v1.PodRunning}
	applyPodSyncHandlers([]PodSyncHandler{h}, deadlinePod(nil), &s)
	assert.Equal(t, v1.PodStatus{Phase: v1.PodRunning}, s)
}
