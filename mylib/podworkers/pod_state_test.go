package podworkers

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"

	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/kubetypes"
)

var _ kuberuntime.PodStateProvider = (*podWorkers)(nil)

func TestPodStateForTheGarbageCollector(t *testing.T) {
	e := newEnv(alwaysFresh{})
	assert.False(t, e.pw.ShouldPodContentBeRemoved("unknown"), "an unknown pod before SyncKnownPods may just not have arrived")
	assert.False(t, e.pw.ShouldPodRuntimeBeRemoved("unknown"))

	e.update(newPod("run", "1"), kubetypes.SyncPodCreate)
	e.update(deleted(newPod("del", "1"), 1), kubetypes.SyncPodCreate)
	done := newPod("done", "1")
	done.Status.Phase = v1.PodSucceeded
	e.update(done, kubetypes.SyncPodCreate)
	eventually(t, func() bool {
		return len(e.syncer.callsOf("run")) == 1 && len(e.syncer.callsOf("del")) == 2 && len(e.syncer.callsOf("done")) == 2
	}, "synced")

	assert.False(t, e.pw.ShouldPodContentBeRemoved("run"), "running")
	assert.False(t, e.pw.ShouldPodRuntimeBeRemoved("run"))
	assert.True(t, e.pw.ShouldPodContentBeRemoved("del"), "deleted and terminated")
	assert.True(t, e.pw.ShouldPodRuntimeBeRemoved("del"))
	assert.False(t, e.pw.ShouldPodContentBeRemoved("done"), "terminated but not deleted: its dead containers stay")
	assert.True(t, e.pw.ShouldPodRuntimeBeRemoved("done"))

	e.pw.SyncKnownPods([]*v1.Pod{newPod("run", "1")})
	assert.True(t, e.pw.ShouldPodContentBeRemoved("unknown"), "once pods are synced, an unknown pod is unwanted")
	assert.True(t, e.pw.ShouldPodRuntimeBeRemoved("unknown"))
}
