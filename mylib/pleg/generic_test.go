package pleg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	clocktesting "k8s.io/utils/clock/testing"

	kubecontainer "mykubelet/mylib/container"
)

// listOnly gives a test runtime the methods the PLEG never calls.
type listOnly struct{}

func (listOnly) SyncPod(context.Context, *v1.Pod, *kubecontainer.PodStatus, []v1.Secret, *flowcontrol.Backoff) kubecontainer.PodSyncResult {
	panic("the PLEG does not call SyncPod")
}
func (listOnly) KillPod(context.Context, *v1.Pod, kubecontainer.Pod, *int64) error {
	return errors.New("the PLEG does not call KillPod")
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeRuntime is a container.Runtime whose pods the test sets.
type fakeRuntime struct {
	listOnly
	clock *clocktesting.FakeClock

	mu        sync.Mutex
	pods      []*kubecontainer.Pod
	err       error
	statusErr map[types.UID]error
	statuses  int // GetPodStatus calls
}

func (f *fakeRuntime) Type() string { return "fake" }

func (f *fakeRuntime) set(pods ...*kubecontainer.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods = pods
}

func (f *fakeRuntime) GetPods(context.Context, bool) ([]*kubecontainer.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	var out []*kubecontainer.Pod
	for _, p := range f.pods { // fresh copies, as a real runtime returns
		cp := *p
		cp.Containers = copyContainers(p.Containers)
		cp.Sandboxes = copyContainers(p.Sandboxes)
		cp.Timestamp = f.clock.Now()
		out = append(out, &cp)
	}
	return out, nil
}

// GetPod is GetPods of one pod; a pod it does not have comes back empty,
// as the real runtime manager's.
func (f *fakeRuntime) GetPod(ctx context.Context, uid types.UID) (*kubecontainer.Pod, error) {
	pods, err := f.GetPods(ctx, true)
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		if p.ID == uid {
			return p, nil
		}
	}
	return &kubecontainer.Pod{ID: uid, Timestamp: f.clock.Now()}, nil
}

func copyContainers(cs []*kubecontainer.Container) []*kubecontainer.Container {
	var out []*kubecontainer.Container
	for _, c := range cs {
		cp := *c
		out = append(out, &cp)
	}
	return out
}

func (f *fakeRuntime) GetPodStatus(_ context.Context, pod *kubecontainer.Pod) (*kubecontainer.PodStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses++
	if err := f.statusErr[pod.ID]; err != nil {
		return nil, err
	}
	st := &kubecontainer.PodStatus{ID: pod.ID, Name: pod.Name, Namespace: pod.Namespace, TimeStamp: pod.Timestamp}
	for _, c := range pod.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, &kubecontainer.Status{ID: c.ID, Name: c.Name, State: c.State})
	}
	return st, nil
}

func ctr(id string, s kubecontainer.State) *kubecontainer.Container {
	return &kubecontainer.Container{ID: kubecontainer.ContainerID{Type: "fake", ID: id}, Name: "name-" + id, State: s}
}

func pod(uid string, containers ...*kubecontainer.Container) *kubecontainer.Pod {
	return &kubecontainer.Pod{ID: types.UID(uid), Name: "pod-" + uid, Namespace: "ns", Containers: containers}
}

func withSandbox(p *kubecontainer.Pod, sandboxes ...*kubecontainer.Container) *kubecontainer.Pod {
	p.Sandboxes = sandboxes
	return p
}

const (
	running = kubecontainer.ContainerStateRunning
	exited  = kubecontainer.ContainerStateExited
	created = kubecontainer.ContainerStateCreated
	unknown = kubecontainer.ContainerStateUnknown
)

func newTestPLEG(capacity int) (*GenericPLEG, *fakeRuntime, kubecontainer.Cache, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(t0)
	rt := &fakeRuntime{clock: clk, statusErr: map[types.UID]error{}}
	cache := kubecontainer.NewCache()
	g := NewGenericPLEG(rt, make(chan *PodLifecycleEvent, capacity),
		&RelistDuration{RelistPeriod: RelistPeriod, RelistThreshold: RelistThreshold}, cache, clk)
	return g, rt, cache, clk
}

// drain returns the events waiting on the channel, as "Type data" strings.
func drain(g *GenericPLEG) []string {
	var out []string
	for {
		select {
		case e := <-g.Watch():
			if e.Data == nil {
				out = append(out, fmt.Sprintf("%s %s", e.Type, e.ID))
			} else {
				out = append(out, fmt.Sprintf("%s %s/%v", e.Type, e.ID, e.Data))
			}
		default:
			return out
		}
	}
}

func TestDefaultsMatchTheKubelet(t *testing.T) {
	assert.Equal(t, time.Second, RelistPeriod)
	assert.Equal(t, 3*time.Minute, RelistThreshold)
	assert.Equal(t, 1000, ChannelCapacity)
}

// TestGenerateEvents covers every pair of old and new states.
func TestGenerateEvents(t *testing.T) {
	const (
		R = plegContainerRunning
		E = plegContainerExited
		U = plegContainerUnknown
		N = plegContainerNonExistent
	)
	for _, tc := range []struct {
		old, new plegContainerState
		want     []PodLifeCycleEventType
	}{
		{R, R, nil}, {E, E, nil}, {U, U, nil}, {N, N, nil},
		{N, R, []PodLifeCycleEventType{ContainerStarted}},
		{E, R, []PodLifeCycleEventType{ContainerStarted}},
		{U, R, []PodLifeCycleEventType{ContainerStarted}},
		{N, E, []PodLifeCycleEventType{ContainerDied}}, // first seen already exited
		{R, E, []PodLifeCycleEventType{ContainerDied}},
		{U, E, []PodLifeCycleEventType{ContainerDied}},
		{N, U, []PodLifeCycleEventType{ContainerChanged}},
		{R, U, []PodLifeCycleEventType{ContainerChanged}},
		{E, U, []PodLifeCycleEventType{ContainerChanged}},
		{E, N, []PodLifeCycleEventType{ContainerRemoved}}, // its death was reported already
		{R, N, []PodLifeCycleEventType{ContainerDied, ContainerRemoved}},
		{U, N, []PodLifeCycleEventType{ContainerDied, ContainerRemoved}},
	} {
		t.Run(fmt.Sprintf("%s->%s", tc.old, tc.new), func(t *testing.T) {
			events := generateEvents("uid", "cid", tc.old, tc.new)
			var got []PodLifeCycleEventType
			for _, e := range events {
				assert.Equal(t, types.UID("uid"), e.ID)
				assert.Equal(t, "cid", e.Data)
				got = append(got, e.Type)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestConvertState(t *testing.T) {
	assert.Equal(t, plegContainerRunning, convertState(running))
	assert.Equal(t, plegContainerExited, convertState(exited))
	assert.Equal(t, plegContainerUnknown, convertState(created), "created counts as unknown")
	assert.Equal(t, plegContainerUnknown, convertState(unknown))
	assert.Equal(t, plegContainerUnknown, convertState("paused"), "no panic on a state a runtime invents")
}

// TestRelistEvents walks pods through transitions, one relist per step, and
// checks the events sent.
func TestRelistEvents(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps [][]*kubecontainer.Pod
		want  [][]string
	}{{
		name:  "first seen running",
		steps: [][]*kubecontainer.Pod{{pod("p1", ctr("c1", running))}},
		want:  [][]string{{"ContainerStarted p1/c1"}},
	}, {
		name:  "first seen already exited",
		steps: [][]*kubecontainer.Pod{{pod("p1", ctr("c1", exited))}},
		want:  [][]string{{"ContainerDied p1/c1"}},
	}, {
		name:  "first seen created: ContainerChanged is generated but not sent",
		steps: [][]*kubecontainer.Pod{{pod("p1", ctr("c1", created))}, {pod("p1", ctr("c1", running))}},
		want:  [][]string{nil, {"ContainerStarted p1/c1"}},
	}, {
		name: "runs, dies, is removed",
		steps: [][]*kubecontainer.Pod{
			{pod("p1", ctr("c1", running))},
			{pod("p1", ctr("c1", running))},
			{pod("p1", ctr("c1", exited))},
			{pod("p1")},
		},
		want: [][]string{{"ContainerStarted p1/c1"}, nil, {"ContainerDied p1/c1"}, {"ContainerRemoved p1/c1"}},
	}, {
		name: "removed while running: died and removed",
		steps: [][]*kubecontainer.Pod{
			{pod("p1", ctr("c1", running), ctr("c2", running))},
			{pod("p1", ctr("c2", running))},
		},
		want: [][]string{{"ContainerStarted p1/c1", "ContainerStarted p1/c2"}, {"ContainerDied p1/c1", "ContainerRemoved p1/c1"}},
	}, {
		name: "crash and restart in place",
		steps: [][]*kubecontainer.Pod{
			{pod("p1", ctr("c1", running))},
			{pod("p1", ctr("c1", exited))},
			{pod("p1", ctr("c1", running))},
		},
		want: [][]string{{"ContainerStarted p1/c1"}, {"ContainerDied p1/c1"}, {"ContainerStarted p1/c1"}},
	}, {
		name: "restart by a new container, as the kubelet does",
		steps: [][]*kubecontainer.Pod{
			{pod("p1", ctr("c1", running))},
			{pod("p1", ctr("c1", exited), ctr("c2", running))},
		},
		want: [][]string{{"ContainerStarted p1/c1"}, {"ContainerDied p1/c1", "ContainerStarted p1/c2"}},
	}, {
		name: "sandboxes are watched like containers",
		steps: [][]*kubecontainer.Pod{
			{withSandbox(pod("p1", ctr("c1", running)), ctr("s1", running))},
			{withSandbox(pod("p1", ctr("c1", exited)), ctr("s1", exited))},
		},
		want: [][]string{{"ContainerStarted p1/c1", "ContainerStarted p1/s1"}, {"ContainerDied p1/c1", "ContainerDied p1/s1"}},
	}, {
		name: "a whole pod disappears",
		steps: [][]*kubecontainer.Pod{
			{pod("p1", ctr("c1", exited)), pod("p2", ctr("c2", running))},
			{pod("p2", ctr("c2", running))},
		},
		want: [][]string{{"ContainerDied p1/c1", "ContainerStarted p2/c2"}, {"ContainerRemoved p1/c1"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g, rt, _, clk := newTestPLEG(ChannelCapacity)
			for i, pods := range tc.steps {
				rt.set(pods...)
				g.Relist(context.Background())
				assert.Equal(t, tc.want[i], drain(g), "relist %d", i+1)
				clk.Step(time.Second)
			}
		})
	}
}

func TestRelistUpdatesTheCache(t *testing.T) {
	g, rt, cache, clk := newTestPLEG(ChannelCapacity)
	rt.set(pod("p1", ctr("c1", running)))
	g.Relist(context.Background())
	st, err := cache.Get("p1")
	require.NoError(t, err)
	assert.Equal(t, "pod-p1", st.Name)
	assert.Equal(t, running, st.ContainerStatuses[0].State)

	clk.Step(time.Second)
	rt.set(pod("p1", ctr("c1", exited)))
	g.Relist(context.Background())
	st, _ = cache.Get("p1")
	assert.Equal(t, exited, st.ContainerStatuses[0].State)
	assert.Equal(t, t0.Add(time.Second), st.TimeStamp)

	clk.Step(time.Second)
	rt.set()
	g.Relist(context.Background())
	st, _ = cache.Get("p1")
	assert.Equal(t, &kubecontainer.PodStatus{ID: "p1"}, st, "a pod gone from the runtime is gone from the cache")
}

func TestUnchangedPodsAreNotInspected(t *testing.T) {
	g, rt, _, clk := newTestPLEG(ChannelCapacity)
	rt.set(pod("p1", ctr("c1", running)), pod("p2", ctr("c2", running)))
	g.Relist(context.Background())
	assert.Equal(t, 2, rt.statuses)
	clk.Step(time.Second)
	rt.set(pod("p1", ctr("c1", running)), pod("p2", ctr("c2", exited)))
	g.Relist(context.Background())
	assert.Equal(t, 3, rt.statuses, "only p2 changed")
}

// TestGetNewerThanWakesOnRelist: a pod worker waiting for a status newer
// than its last sync is woken by the next relist, whether or not the pod
// changed.
func TestGetNewerThanWakesOnRelist(t *testing.T) {
	g, rt, cache, clk := newTestPLEG(ChannelCapacity)
	rt.set(pod("p1", ctr("c1", running)))
	g.Relist(context.Background())
	lastSync := clk.Now()

	got := make(chan *kubecontainer.PodStatus, 1)
	go func() {
		st, _ := cache.GetNewerThan("p1", lastSync)
		got <- st
	}()
	select {
	case <-got:
		t.Fatal("GetNewerThan returned before a newer relist")
	case <-time.After(50 * time.Millisecond):
	}
	clk.Step(time.Second)
	g.Relist(context.Background()) // p1 unchanged: woken by the cache's global time
	select {
	case st := <-got:
		assert.Equal(t, types.UID("p1"), st.ID)
		assert.Equal(t, running, st.ContainerStatuses[0].State)
	case <-time.After(5 * time.Second):
		t.Fatal("GetNewerThan was not woken by the relist")
	}
}

// relistExitedWithStatusError relists p1 with c1 running, then, a second
// later, with c1 exited but the pod's status unreadable: no event yet.
func relistExitedWithStatusError(t *testing.T) (*GenericPLEG, *fakeRuntime, kubecontainer.Cache, *clocktesting.FakeClock) {
	t.Helper()
	g, rt, cache, clk := newTestPLEG(ChannelCapacity)
	rt.set(pod("p1", ctr("c1", running)))
	g.Relist(context.Background())
	drain(g)

	clk.Step(time.Second)
	rt.statusErr["p1"] = errors.New("runtime busy")
	rt.set(pod("p1", ctr("c1", exited)))
	g.Relist(context.Background())
	assert.Empty(t, drain(g))
	return g, rt, cache, clk
}

func TestStatusErrorIsRetriedNextRelist(t *testing.T) {
	// The container dies, but its status cannot be read: no event yet, and
	// the cache keeps the error.
	g, rt, cache, clk := relistExitedWithStatusError(t)
	_, err := cache.Get("p1")
	assert.EqualError(t, err, "runtime busy")

	// Next relist it works: the same change is found again.
	clk.Step(time.Second)
	delete(rt.statusErr, "p1")
	g.Relist(context.Background())
	assert.Equal(t, []string{"ContainerDied p1/c1"}, drain(g))
}

func TestReinspectionWithoutChangeSendsPodSync(t *testing.T) {
	g, rt, _, clk := relistExitedWithStatusError(t)

	// By the next relist the container runs again: no state change against
	// the last good record, but the pod is due for reinspection.
	clk.Step(time.Second)
	delete(rt.statusErr, "p1")
	rt.set(pod("p1", ctr("c1", running)))
	g.Relist(context.Background())
	assert.Equal(t, []string{"PodSync p1"}, drain(g))
}

func TestFullChannelDropsEvents(t *testing.T) {
	g, rt, _, _ := newTestPLEG(2)
	rt.set(pod("p1", ctr("c1", running), ctr("c2", running), ctr("c3", running)))
	done := make(chan struct{})
	go func() { g.Relist(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Relist blocked on a full channel")
	}
	assert.Len(t, drain(g), 2)
	assert.Equal(t, int64(1), g.DiscardedEvents())
}

func TestGetPodsErrorKeepsState(t *testing.T) {
	g, rt, _, clk := newTestPLEG(ChannelCapacity)
	rt.set(pod("p1", ctr("c1", running)))
	g.Relist(context.Background())
	drain(g)
	clk.Step(time.Second)
	rt.err = errors.New("connection refused")
	g.Relist(context.Background())
	assert.Empty(t, drain(g))
	assert.Equal(t, t0, g.getRelistTime(), "a failed relist does not count")
	rt.err = nil
	rt.set(pod("p1", ctr("c1", exited)))
	g.Relist(context.Background())
	assert.Equal(t, []string{"ContainerDied p1/c1"}, drain(g))
}

func TestHealthy(t *testing.T) {
	g, rt, _, clk := newTestPLEG(ChannelCapacity)
	ok, err := g.Healthy()
	assert.False(t, ok)
	assert.EqualError(t, err, "pleg has yet to be successful")

	rt.set(pod("p1", ctr("c1", running)))
	g.Relist(context.Background())
	ok, err = g.Healthy()
	assert.True(t, ok)
	assert.NoError(t, err)

	clk.Step(3 * time.Minute)
	ok, _ = g.Healthy()
	assert.True(t, ok, "exactly the threshold is still healthy")

	rt.err = errors.New("runtime hangs")
	g.Relist(context.Background()) // fails: the relist time stays
	clk.Step(time.Second)
	ok, err = g.Healthy()
	assert.False(t, ok)
	assert.EqualError(t, err, "pleg was last seen active 3m1s ago; threshold is 3m0s")

	rt.err = nil
	g.Relist(context.Background())
	ok, _ = g.Healthy()
	assert.True(t, ok, "healthy again after a successful relist")
}

func TestRunRelistsEveryPeriod(t *testing.T) {
	g, rt, _, clk := newTestPLEG(ChannelCapacity)
	rt.set(pod("p1", ctr("c1", running)))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { g.Run(ctx); close(stopped) }()

	next := func() *PodLifecycleEvent {
		select {
		case e := <-g.Watch():
			return e
		case <-time.After(5 * time.Second):
			t.Fatal("no event")
			return nil
		}
	}
	assert.Equal(t, ContainerStarted, next().Type, "the first relist is immediate")

	rt.set(pod("p1", ctr("c1", exited)))
	require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond)
	clk.Step(999 * time.Millisecond)
	select {
	case e := <-g.Watch():
		t.Fatalf("relisted before the period: %v", e)
	case <-time.After(50 * time.Millisecond):
	}
	clk.Step(time.Millisecond)
	assert.Equal(t, ContainerDied, next().Type)

	cancel()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestNewGenericPLEGRefusesPeriodsThatAreNotPositive(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	for _, d := range []RelistDuration{{RelistPeriod: 0, RelistThreshold: RelistThreshold}, {RelistPeriod: RelistPeriod, RelistThreshold: -time.Second}} {
		assert.Panics(t, func() {
			NewGenericPLEG(&fakeRuntime{clock: clk}, make(chan *PodLifecycleEvent, 1), &d, kubecontainer.NewCache(), clk)
		}, "%+v", d)
	}
}
