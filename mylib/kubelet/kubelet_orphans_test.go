package kubelet

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/podworkers"
)

type killRecorder struct {
	killed []types.UID
	graces []int64
	fail   types.UID
}

func (k *killRecorder) KillPod(_ context.Context, pod *v1.Pod, rp kubecontainer.Pod, grace *int64) error {
	if pod != nil {
		return errors.New("an orphan has no pod object")
	}
	k.killed = append(k.killed, rp.ID)
	k.graces = append(k.graces, *grace)
	if rp.ID == k.fail {
		return errors.New("runtime down")
	}
	return nil
}

func TestOrphanedRuntimePodsAreKilledWithAOneSecondGracePeriod(t *testing.T) {
	running := []*kubecontainer.Pod{
		{ID: "wanted", Name: "web"}, {ID: "syncing", Name: "new"}, {ID: "terminating", Name: "old"},
		{ID: "terminated", Name: "done"}, {ID: "orphan", Name: "left", Namespace: "default"},
	}
	desired := []*v1.Pod{{ObjectMeta: metav1.ObjectMeta{UID: "wanted"}}}
	workers := map[types.UID]podworkers.PodWorkerSync{
		"wanted":      {State: podworkers.SyncPod},
		"syncing":     {State: podworkers.SyncPod, Orphan: true},
		"terminating": {State: podworkers.TerminatingPod, Orphan: true},
		"terminated":  {State: podworkers.TerminatedPod, Orphan: true},
	}
	orphans := orphanedRuntimePods(running, desired, workers)
	var ids []types.UID
	for _, o := range orphans {
		ids = append(ids, o.ID)
	}
	assert.Equal(t, []types.UID{"terminated", "orphan"}, ids,
		"a pod no worker syncs or terminates and nobody wants; a terminated worker's pod that still runs is one too")

	k := &killRecorder{fail: "terminated"}
	err := killOrphanedRuntimePods(context.Background(), k, orphans)
	assert.Equal(t, []types.UID{"terminated", "orphan"}, k.killed, "one failure does not stop the others")
	assert.Equal(t, []int64{1, 1}, k.graces)
	assert.EqualError(t, err, "kill orphaned pod /done (uid terminated): runtime down")
}
