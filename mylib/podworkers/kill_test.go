package podworkers

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"mykubelet/mylib/kubetypes"
)

// evictStatus is what the eviction manager's status function does.
func evictStatus(reason string) PodStatusFunc {
	return func(s *v1.PodStatus) { s.Phase, s.Reason = v1.PodFailed, reason }
}

func TestAKillWithAStatusFuncAppliesItAndClosesCompletedOnceTerminated(t *testing.T) {
	e := newEnv(alwaysFresh{})
	release, terminating := make(chan struct{}), make(chan struct{})
	e.syncer.hook = func(_ context.Context, c call) (bool, error) {
		if c.Kind == "terminating" {
			close(terminating)
			<-release
		}
		return false, nil
	}
	e.update(newPod("a", "1"), kubetypes.SyncPodCreate)
	eventually(t, func() bool { return len(e.syncer.callsOf("a")) == 1 }, "synced")

	done := make(chan struct{})
	zero := int64(0)
	e.pw.UpdatePod(context.Background(), UpdatePodOptions{UpdateType: kubetypes.SyncPodKill, Pod: newPod("a", "2"),
		KillPodOptions: &KillPodOptions{CompletedCh: done, Evict: true, PodStatusFunc: evictStatus("Evicted"),
			PodTerminationGracePeriodSecondsOverride: &zero}})
	<-terminating
	select {
	case <-done:
		t.Fatal("CompletedCh closed before SyncTerminatingPod returned")
	default:
	}
	assert.True(t, e.pw.ShouldPodContentBeRemoved("a"), "an evicted pod's content may go though it is not deleted")
	assert.False(t, e.pw.ShouldPodBeFinished("a"))
	close(release)
	<-done // closed by completeTerminating

	eventually(t, func() bool { return e.pw.ShouldPodBeFinished("a") }, "finished")
	c := e.syncer.last("a")
	require.Equal(t, "terminated", c.Kind)
	var term call
	for _, c := range e.syncer.calls {
		if c.Kind == "terminating" {
			term = c
		}
	}
	assert.Equal(t, v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted"}, term.Applied, "the status function reached SyncTerminatingPod")
	assert.Equal(t, int64(1), term.GracePeriod, "a zero override is a grace period of 1 s, as upstream")

	// A later kill of the finished pod is answered at once, and runs nothing.
	again := make(chan struct{})
	e.pw.UpdatePod(context.Background(), UpdatePodOptions{UpdateType: kubetypes.SyncPodKill, Pod: newPod("a", "3"),
		KillPodOptions: &KillPodOptions{CompletedCh: again}})
	<-again
	assert.Equal(t, []string{"sync:1", "terminating:2", "terminated:2"}, e.syncer.callsOf("a"), "an evicted pod is not restarted")
}

func TestTheLastStatusFuncOfTheKillsWins(t *testing.T) {
	e := newEnv(alwaysFresh{})
	release, terminating := make(chan struct{}), make(chan struct{}, 2)
	e.syncer.hook = func(ctx context.Context, c call) (bool, error) {
		if c.Kind == "terminating" {
			terminating <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done(): // a shorter grace period restarts the termination
				return false, ctx.Err()
			}
		}
		return false, nil
	}
	e.update(newPod("a", "1"), kubetypes.SyncPodKill) // terminating, grace 30
	<-terminating
	gp := int64(5)
	e.pw.UpdatePod(context.Background(), UpdatePodOptions{UpdateType: kubetypes.SyncPodKill, Pod: newPod("a", "2"),
		KillPodOptions: &KillPodOptions{PodStatusFunc: evictStatus("First")}})
	e.pw.UpdatePod(context.Background(), UpdatePodOptions{UpdateType: kubetypes.SyncPodKill, Pod: newPod("a", "3"),
		KillPodOptions: &KillPodOptions{PodStatusFunc: evictStatus("Second"), PodTerminationGracePeriodSecondsOverride: &gp}})
	<-terminating
	close(release)
	eventually(t, func() bool { return e.pw.ShouldPodBeFinished("a") }, "finished")
	c := e.syncer.calls
	var last call
	for _, x := range c {
		if x.Kind == "terminating" {
			last = x
		}
	}
	assert.Equal(t, "Second", last.Applied.Reason)
	assert.Equal(t, int64(5), last.GracePeriod)
}

func TestAKillOfAPodThatIsNotTerminatingClosesCompleted(t *testing.T) {
	e := newEnv(alwaysFresh{})
	done := make(chan struct{})
	// A sync update carrying kill options: they mean nothing, and the waiter is told at once.
	e.pw.UpdatePod(context.Background(), UpdatePodOptions{UpdateType: kubetypes.SyncPodSync, Pod: newPod("a", "1"),
		KillPodOptions: &KillPodOptions{CompletedCh: done}})
	<-done
	eventually(t, func() bool { return len(e.syncer.callsOf("a")) == 1 }, "synced")
	assert.False(t, e.pw.ShouldPodContentBeRemoved("a"))
}
