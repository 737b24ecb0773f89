package kuberuntime

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	clocktesting "k8s.io/utils/clock/testing"

	kubecontainer "mykubelet/mylib/container"
)

func crashPod() (*v1.Pod, *v1.Container) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "crash", Namespace: "default", UID: "uid-crash"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "busybox"}}},
	}
	return pod, &pod.Spec.Containers[0]
}

func exitedAt(at time.Time) *kubecontainer.PodStatus {
	return &kubecontainer.PodStatus{ContainerStatuses: []*kubecontainer.Status{
		{Name: "app", State: kubecontainer.ContainerStateExited, ExitCode: 1, FinishedAt: at},
	}}
}

// waitBeforeRestart drives doBackOff as the pod worker would after the
// container exited at the clock's now: it steps the fake clock a second at
// a time until doBackOff lets the container start, and returns how long
// that took.
func waitBeforeRestart(t *testing.T, m *Manager, clk *clocktesting.FakeClock, backOff *flowcontrol.Backoff) time.Duration {
	t.Helper()
	pod, c := crashPod()
	exited := clk.Now()
	for waited := time.Duration(0); waited <= 2*MaxCrashLoopBackOff; waited += time.Second {
		inBackOff, msg, err := m.doBackOff(pod, c, exitedAt(exited), backOff)
		if !inBackOff {
			return waited
		}
		require.ErrorIs(t, err, kubecontainer.ErrCrashLoopBackOff)
		require.True(t, strings.HasPrefix(msg, "back-off "), msg)
		clk.Step(time.Second)
	}
	t.Fatal("never left back-off")
	return 0
}

func TestCrashLoopBackOffFrom10sDoublingTo300sAtV137Defaults(t *testing.T) {
	assert.Equal(t, 10*time.Second, InitialCrashLoopBackOff)
	assert.Equal(t, 300*time.Second, MaxCrashLoopBackOff)
	assert.Equal(t, 600*time.Second, CrashLoopBackOffResetAfter)

	clk := clocktesting.NewFakeClock(syncT0)
	m := &Manager{}
	backOff := NewCrashLoopBackOff(clk)
	var waits []time.Duration
	for range 8 {
		waits = append(waits, waitBeforeRestart(t, m, clk, backOff))
		clk.Step(time.Second) // it runs a second, then exits again
	}
	s := time.Second
	assert.Equal(t, []time.Duration{0, 10 * s, 20 * s, 40 * s, 80 * s, 160 * s, 300 * s, 300 * s}, waits,
		"the first exit restarts at once, then 10 s doubling to the 5 min cap")
}

func TestCrashLoopBackOffResetsAfterTheContainerRan10Minutes(t *testing.T) {
	for _, tc := range []struct {
		ran  time.Duration
		want time.Duration
	}{
		{ran: 9 * time.Minute, want: 300 * time.Second}, // not long enough: still capped
		{ran: 10*time.Minute + time.Second, want: 0},    // forgotten: restarts at once …
	} {
		clk := clocktesting.NewFakeClock(syncT0)
		m := &Manager{}
		backOff := NewCrashLoopBackOff(clk)
		for range 7 { // into the cap
			waitBeforeRestart(t, m, clk, backOff)
			clk.Step(time.Second)
		}
		clk.Step(tc.ran)
		assert.Equal(t, tc.want, waitBeforeRestart(t, m, clk, backOff), "after running %s", tc.ran)
		if tc.want == 0 {
			clk.Step(time.Second)
			assert.Equal(t, 10*time.Second, waitBeforeRestart(t, m, clk, backOff), "… and the next back-off is 10 s again")
		}
	}
}

func TestCrashLoopBackOffMessageEventAndKey(t *testing.T) {
	clk := clocktesting.NewFakeClock(syncT0)
	recorder := record.NewFakeRecorder(10)
	m := &Manager{recorder: recorder}
	backOff := NewCrashLoopBackOff(clk)
	pod, c := crashPod()

	inBackOff, _, _ := m.doBackOff(pod, c, exitedAt(clk.Now()), backOff)
	require.False(t, inBackOff)
	clk.Step(time.Second)
	inBackOff, msg, err := m.doBackOff(pod, c, exitedAt(clk.Now()), backOff)
	require.True(t, inBackOff)
	assert.ErrorIs(t, err, kubecontainer.ErrCrashLoopBackOff)
	assert.Equal(t, "CrashLoopBackOff", err.Error(), "the reason the container waits with")
	end, ok := kubecontainer.MinBackoffExpiration(err)
	require.True(t, ok, "the error says when the back-off ends")
	assert.Equal(t, clk.Now().Add(10*time.Second), end, "10 s after the container finished")
	assert.Equal(t, "back-off 10s restarting failed container=app pod=crash_default(uid-crash)", msg)
	assert.Equal(t, "Warning BackOff Back-off restarting failed container app in pod crash_default(uid-crash)", <-recorder.Events)

	// Keyed by pod and container: another pod's container of the same name,
	// or the same pod with an edited container, starts without waiting.
	other := pod.DeepCopy()
	other.UID = "uid-other"
	inBackOff, _, _ = m.doBackOff(other, &other.Spec.Containers[0], exitedAt(clk.Now()), backOff)
	assert.False(t, inBackOff, "another pod UID")
	edited := pod.DeepCopy()
	edited.Spec.Containers[0].Image = "busybox:2"
	inBackOff, _, _ = m.doBackOff(edited, &edited.Spec.Containers[0], exitedAt(clk.Now()), backOff)
	assert.False(t, inBackOff, "an edited container")
	assert.Equal(t, "crash_default_uid-crash_app_"+strconvHash(c), GetStableKey(pod, c))
}

func strconvHash(c *v1.Container) string {
	const hex = "0123456789abcdef"
	h := kubecontainer.HashContainer(c)
	if h == 0 {
		return "0"
	}
	var b []byte
	for ; h > 0; h /= 16 {
		b = append([]byte{hex[h%16]}, b...)
	}
	return string(b)
}
