package kuberuntime

import (
	"context"
	"flag"
	"io"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/fakeruntime"
)

// podStates is a PodStateProvider: gone pods may lose everything,
// terminated ones their runtime.
type podStates struct {
	gone, terminated map[types.UID]bool
}

func (p podStates) ShouldPodContentBeRemoved(uid types.UID) bool { return p.gone[uid] }
func (p podStates) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	return p.gone[uid] || p.terminated[uid]
}

var gcT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// deadContainers makes a unit of n dead containers named uid/name-0 (oldest) … name-(n-1).
func deadContainers(units containersByEvictUnit, uid types.UID, name string, n int, start time.Time) {
	key := evictUnit{uid: uid, name: name}
	for i := range n {
		units[key] = append(units[key], containerGCInfo{id: string(uid) + "/" + name + "-" + string(rune('0'+i)), name: name,
			createTime: start.Add(time.Duration(i) * time.Minute)})
	}
	newestFirstByCreated(units[key])
}

func ids(cs []containerGCInfo) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.id)
	}
	sort.Strings(out)
	return out
}

func TestSelectContainersToRemove(t *testing.T) {
	for _, tc := range []struct {
		name            string
		policy          GCPolicy
		sourcesReady    bool
		evictNonDeleted bool
		states          podStates
		want            []string
	}{
		{name: "default keeps the newest dead container of each (pod, name)", policy: DefaultGCPolicy(), sourcesReady: true,
			want: []string{"a/app-0", "a/app-1", "b/app-0"}},
		{name: "no limits keep everything", policy: GCPolicy{MaxPerPodContainer: -1, MaxContainers: -1}, sourcesReady: true},
		{name: "zero per container removes every dead one", policy: GCPolicy{MaxPerPodContainer: 0, MaxContainers: -1}, sourcesReady: true,
			want: []string{"a/app-0", "a/app-1", "a/app-2", "a/init-0", "b/app-0", "b/app-1"}},
		{name: "a pod that is gone loses all its dead containers", policy: DefaultGCPolicy(), sourcesReady: true,
			states: podStates{gone: map[types.UID]bool{"b": true}},
			want:   []string{"a/app-0", "a/app-1", "b/app-0", "b/app-1"}},
		{name: "before all sources are ready, a gone pod keeps its newest", policy: DefaultGCPolicy(), sourcesReady: false,
			states: podStates{gone: map[types.UID]bool{"b": true}},
			want:   []string{"a/app-0", "a/app-1", "b/app-0"}},
		{name: "a terminated pod keeps its newest …", policy: DefaultGCPolicy(), sourcesReady: true,
			states: podStates{terminated: map[types.UID]bool{"b": true}},
			want:   []string{"a/app-0", "a/app-1", "b/app-0"}},
		{name: "… unless non-deleted pods are evicted too", policy: DefaultGCPolicy(), sourcesReady: true, evictNonDeleted: true,
			states: podStates{terminated: map[types.UID]bool{"b": true}},
			want:   []string{"a/app-0", "a/app-1", "b/app-0", "b/app-1"}},
		{name: "MaxContainers: an even share per unit, then the oldest on the node",
			policy: GCPolicy{MaxPerPodContainer: -1, MaxContainers: 2}, sourcesReady: true,
			// 3 units, 2/3 → at least 1 each: a/app-2, a/init-0, b/app-1 stay; one more must go: the oldest of them.
			want: []string{"a/app-0", "a/app-1", "a/init-0", "b/app-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			units := containersByEvictUnit{}
			deadContainers(units, "a", "app", 3, gcT0)
			deadContainers(units, "a", "init", 1, gcT0.Add(-time.Hour))
			deadContainers(units, "b", "app", 2, gcT0)
			states := tc.states
			if states.gone == nil {
				states.gone = map[types.UID]bool{}
			}
			got := selectContainersToRemove(units, tc.policy, tc.sourcesReady, tc.evictNonDeleted, states)
			assert.Equal(t, tc.want, ids(got))
			assert.Len(t, units[evictUnit{uid: "a", name: "app"}], 3, "the caller's lists are left alone")
		})
	}
}

func TestSelectSandboxesToRemove(t *testing.T) {
	sandbox := func(uid, id string, created int64, ready bool) *runtimeapi.PodSandbox {
		state := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		if ready {
			state = runtimeapi.PodSandboxState_SANDBOX_READY
		}
		return &runtimeapi.PodSandbox{Id: id, CreatedAt: created, State: state, Metadata: &runtimeapi.PodSandboxMetadata{Uid: uid}}
	}
	sandboxes := []*runtimeapi.PodSandbox{
		sandbox("live", "live-3", 3, true), sandbox("live", "live-2", 2, false), sandbox("live", "live-1", 1, false),
		sandbox("dead", "dead-2", 2, false), sandbox("dead", "dead-1", 1, false),
		sandbox("gone", "gone-3", 3, false), sandbox("gone", "gone-2", 2, false), sandbox("gone", "gone-1", 1, true),
	}
	withContainers := map[string]bool{"gone-2": true}
	states := podStates{gone: map[types.UID]bool{"gone": true}}

	got := selectSandboxesToRemove(sandboxes, withContainers, false, states)
	sort.Strings(got)
	assert.Equal(t, []string{"dead-1", "gone-3", "live-1", "live-2"}, got,
		"a live pod keeps its newest sandbox; a pod whose newest is dead keeps that one; a gone pod keeps only what is ready or holds a container")
}

// crashLoop starts the pod and has its container exit and restart n times.
func crashLoop(t *testing.T, f *syncFixture, n int) {
	t.Helper()
	pod := webPod()
	pod.Spec.InitContainers = nil
	pod.Spec.Containers = pod.Spec.Containers[:1]
	for range n {
		require.NoError(t, f.m.SyncPod(context.Background(), pod, f.status(t, pod), nil, nil).Error())
		_, err := f.rt.ContainerAction(f.status(t, pod).FindContainerStatusByName("app").ID.ID, fakeruntime.ActionKill)
		require.NoError(t, err)
	}
	require.NoError(t, f.m.SyncPod(context.Background(), pod, f.status(t, pod), nil, nil).Error())
}

func listContainers(t *testing.T, f *syncFixture) (running, dead int) {
	t.Helper()
	resp, err := f.m.rs.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{})
	require.NoError(t, err)
	for _, c := range resp.Containers {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			running++
		} else {
			dead++
		}
	}
	return running, dead
}

func TestGarbageCollectUnderACrashLoopKeepsOneDeadContainer(t *testing.T) {
	f := newSyncFixture(t)
	crashLoop(t, f, 4)
	running, dead := listContainers(t, f)
	require.Equal(t, 1, running)
	require.Equal(t, 4, dead)

	states := podStates{gone: map[types.UID]bool{}}
	// MinAge: containers younger than an hour stay.
	young, err := NewContainerGC(f.m, states, GCPolicy{MinAge: time.Hour, MaxPerPodContainer: 1, MaxContainers: -1})
	require.NoError(t, err)
	require.NoError(t, young.GarbageCollect(context.Background(), true, false))
	_, dead = listContainers(t, f)
	assert.Equal(t, 4, dead, "none is older than MinAge")

	gc, err := NewContainerGC(f.m, states, DefaultGCPolicy())
	require.NoError(t, err)
	require.NoError(t, gc.GarbageCollect(context.Background(), true, false))
	running, dead = listContainers(t, f)
	assert.Equal(t, 1, running, "the running container stays")
	assert.Equal(t, 1, dead, "the last dead one stays, for kubectl logs --previous")
	st := f.status(t, webPod())
	require.Len(t, st.ContainerStatuses, 2)
	assert.Equal(t, 4, st.ContainerStatuses[0].RestartCount, "the running one is the newest attempt")
	assert.Equal(t, 3, st.ContainerStatuses[1].RestartCount, "the one kept is the previous attempt")

	// Its log was rotated (mylib/logs) twice.
	cs, err := f.m.rs.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: st.ContainerStatuses[1].ID.ID})
	require.NoError(t, err)
	logPath := cs.Status.LogPath
	rotated := []string{logPath + ".20260301-120000.gz", logPath + ".20260301-120001"}
	for _, r := range rotated {
		require.NoError(t, os.WriteFile(r, nil, 0o600))
	}

	// The pod is deleted and its containers stopped: everything goes.
	require.NoError(t, f.m.KillPod(context.Background(), webPod(), kubecontainer.ConvertPodStatusToRunningPod(f.m.Type(), st), nil))
	states.gone[webPod().UID] = true
	require.NoError(t, gc.GarbageCollect(context.Background(), true, false))
	running, dead = listContainers(t, f)
	assert.Equal(t, 0, running+dead)
	for _, p := range append(rotated, logPath) {
		assert.NoFileExists(t, p, "a removed container's log goes with it, rotated files too")
	}
	sandboxes, err := f.m.rs.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	assert.Empty(t, sandboxes.Items, "the dead sandbox of the deleted pod is removed")
}

func TestContainerGCRunsEveryMinute(t *testing.T) {
	f := newSyncFixture(t)
	crashLoop(t, f, 3)
	gc, err := NewContainerGC(f.m, podStates{}, DefaultGCPolicy())
	require.NoError(t, err)
	before := f.clk.Waiters() // the running container's script sleeps on this clock too
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { gc.Run(ctx, func() bool { return true }); close(done) }()
	defer func() { cancel(); <-done }()

	require.Eventually(t, func() bool { return f.clk.Waiters() > before }, 5*time.Second, time.Millisecond, "the collector's ticker")
	f.clk.Step(ContainerGCPeriod - time.Second)
	_, dead := listContainers(t, f)
	assert.Equal(t, 3, dead, "not yet")
	f.clk.Step(time.Second)
	require.Eventually(t, func() bool { _, dead := listContainers(t, f); return dead == 1 }, 5*time.Second, time.Millisecond, "collected after a minute")
}

func TestNewContainerGCRefusesANegativeMinAge(t *testing.T) {
	_, err := NewContainerGC(&Manager{}, podStates{}, GCPolicy{MinAge: -time.Second})
	assert.EqualError(t, err, "invalid minimum garbage collection age: -1s")
	_, err = NewContainerGC(nil, podStates{}, DefaultGCPolicy())
	assert.Error(t, err)
}

func TestGCPolicyFlagsAreTheKubeletsWithItsDefaults(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	p := DefaultGCPolicy()
	p.AddFlags(fs)
	require.NoError(t, fs.Parse(nil))
	assert.Equal(t, GCPolicy{MinAge: 0, MaxPerPodContainer: 1, MaxContainers: -1}, p, "upstream's defaults")
	require.NoError(t, fs.Parse([]string{"--minimum-container-ttl-duration=10s", "--maximum-dead-containers-per-container=3", "--maximum-dead-containers=100"}))
	assert.Equal(t, GCPolicy{MinAge: 10 * time.Second, MaxPerPodContainer: 3, MaxContainers: 100}, p)
	err := fs.Parse([]string{"--minimum-container-ttl-duration=-1s"})
	assert.EqualError(t, err, `invalid value "-1s" for flag -minimum-container-ttl-duration: must not be negative`)
}

// TestDeleteAllUnusedContainersRemovesWhatATerminatedPodLeft is the
// eviction manager's reclaim: a pod terminated but not deleted (an evicted
// one) loses every dead container and its sandbox, the one GarbageCollect
// keeps for kubectl logs --previous too; before the sources are ready,
// only what the policy allows goes.
func TestDeleteAllUnusedContainersRemovesWhatATerminatedPodLeft(t *testing.T) {
	f := newSyncFixture(t)
	crashLoop(t, f, 3)
	st := f.status(t, webPod())
	require.NoError(t, f.m.KillPod(context.Background(), webPod(), kubecontainer.ConvertPodStatusToRunningPod(f.m.Type(), st), nil))
	running, dead := listContainers(t, f)
	require.Equal(t, 0, running)
	require.Equal(t, 4, dead)

	states := podStates{terminated: map[types.UID]bool{webPod().UID: true}}
	gc, err := NewContainerGC(f.m, states, DefaultGCPolicy())
	require.NoError(t, err)
	require.NoError(t, gc.GarbageCollect(context.Background(), true, false))
	_, dead = listContainers(t, f)
	require.Equal(t, 1, dead, "the periodic collection keeps one of a pod not deleted")

	require.NoError(t, gc.DeleteAllUnusedContainers(context.Background()), "AllSourcesReady unset: not ready")
	_, dead = listContainers(t, f)
	assert.Equal(t, 1, dead, "before the sources are ready a terminated pod keeps its last container")

	gc.AllSourcesReady = func() bool { return true }
	require.NoError(t, gc.DeleteAllUnusedContainers(context.Background()))
	_, dead = listContainers(t, f)
	assert.Equal(t, 0, dead, "every dead container of the terminated pod goes, whatever MaxPerPodContainer says")
	sandboxes, err := f.m.rs.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	assert.Empty(t, sandboxes.Items, "and its sandbox")
}
