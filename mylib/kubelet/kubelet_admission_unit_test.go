package kubelet

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/status"
)

// newAdmissionFixture is a pod fixture with admission on, against a Node
// with room for maxPods pods.
func newAdmissionFixture(t *testing.T, maxPods int64, allowedUnsafeSysctls ...string) (*podFixture, *record.FakeRecorder) {
	t.Helper()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourcePods: *resource.NewQuantity(maxPods, resource.DecimalSI)}}}
	f := newPodFixture(t, node)
	sm, err := status.NewManager(status.Config{Client: f.cs, PodManager: f.kl.podManager, PodDeletionSafety: f.kl, Clock: f.clock})
	require.NoError(t, err)
	rec := record.NewFakeRecorder(10)
	f.kl.statusManager, f.kl.recorder = sm, rec
	require.NoError(t, f.kl.newAdmission(allowedUnsafeSysctls))
	return f, rec
}

func created(p *v1.Pod, at time.Time) *v1.Pod {
	p.CreationTimestamp = metav1.NewTime(at)
	return p
}

func TestAdmissionRejectsThePodBeyondMaxPodsOldestFirst(t *testing.T) {
	f, rec := newAdmissionFixture(t, 1)
	ctx := context.Background()
	older, newer := created(apiPod("older", "u1"), t0), created(apiPod("newer", "u2"), t0.Add(time.Second))
	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{newer, older}}, nil, false, false)

	assert.Equal(t, []string{"create older"}, f.workers.dispatched(), "the older pod is admitted first; the newer gets no worker")
	assert.Equal(t, "Warning OutOfpods Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1", <-rec.Events)
	st, ok := f.kl.statusManager.GetPodStatus("u2")
	require.True(t, ok)
	assert.Equal(t, v1.PodFailed, st.Phase)
	assert.Equal(t, "OutOfpods", st.Reason)
	assert.Equal(t, "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1", st.Message)
	assert.Equal(t, v1.PodQOSBestEffort, st.QOSClass)
	assert.False(t, f.kl.PodCouldHaveRunningContainers(newer), "a rejected pod never ran: its Failed phase may be written")
	assert.Contains(t, f.out.String(), "pod default/newer rejected: OutOfpods: Node didn't have enough resource")

	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.UPDATE, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{newer}}, nil, false, false)
	assert.Equal(t, []string{"create older"}, f.workers.dispatched(), "a rejected pod stays rejected")
	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.REMOVE, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{newer}}, nil, false, false)
	assert.Equal(t, []string{"create older"}, f.workers.dispatched(), "nothing to kill")
	assert.False(t, f.kl.wasRejected("u2"), "forgotten once removed")
}

func TestAdmissionDoesNotCountRejectedOrFinishedPods(t *testing.T) {
	f, _ := newAdmissionFixture(t, 2)
	ctx := context.Background()
	elsewhere := created(apiPod("elsewhere", "u1"), t0)
	elsewhere.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	done := created(apiPod("done", "u2"), t0)
	done.Status.Phase = v1.PodSucceeded
	a, b, c := created(apiPod("a", "u3"), t0), created(apiPod("b", "u4"), t0), created(apiPod("c", "u5"), t0)
	for _, p := range []*v1.Pod{elsewhere, done, a, b, c} {
		f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{p}}, nil, false, false)
	}
	assert.Equal(t, []string{"create done", "create a", "create b"}, f.workers.dispatched(),
		"a finished pod goes to its worker unchecked and takes no room; the rejected one takes none either")
	st, _ := f.kl.statusManager.GetPodStatus("u1")
	assert.Equal(t, "NodeAffinity", st.Reason)
	st, _ = f.kl.statusManager.GetPodStatus("u5")
	assert.Equal(t, "OutOfpods", st.Reason)
}

// TestAdmissionAfterARestartDoesNotCountTerminalPodsThatRunNothing: a
// kubelet started again gives every pod a worker, the Failed and Succeeded
// ones too (to finish them); while their workers terminate them, they
// count against maxPods only if the runtime still runs something of theirs
// (upstream: isPodStatusCacheTerminal, kubernetes issue 105523).
func TestAdmissionAfterARestartDoesNotCountTerminalPodsThatRunNothing(t *testing.T) {
	for _, tt := range []struct {
		name       string
		running    bool
		dispatched []string
	}{
		{"nothing of it runs: it takes no room", false, []string{"create rejected-before", "create b"}},
		{"its container still runs: it takes its room", true, []string{"create rejected-before"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := newAdmissionFixture(t, 1)
			ctx := context.Background()
			failed := created(apiPod("rejected-before", "u1"), t0)
			failed.Status.Phase, failed.Status.Reason = v1.PodFailed, "OutOfpods"
			f.workers.terminating = map[types.UID]bool{"u1": true}
			if tt.running {
				f.kl.podCache.Set("u1", &kubecontainer.PodStatus{ID: "u1", ContainerStatuses: []*kubecontainer.Status{{Name: "c", State: kubecontainer.ContainerStateRunning}}}, nil, t0)
			}
			b := created(apiPod("b", "u2"), t0.Add(time.Second))
			f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{b, failed}}, nil, false, false)
			assert.Equal(t, tt.dispatched, f.workers.dispatched())
		})
	}
}

func TestAdmissionNeedsRunContainers(t *testing.T) {
	f := newPodFixture(t)
	want := "kubelet: Config.Pods.Admit needs RunContainers (a rejected pod is failed through the status manager)"
	assert.EqualError(t, f.kl.newAdmission(nil), want)
	_, err := New(Config{Client: f.cs, NodeName: "n1", Pods: &PodsConfig{Updates: make(chan kubetypes.PodUpdate), Runtime: emptyRuntime{}, Admit: true}})
	assert.EqualError(t, err, want)
}

// A pod with a sysctl that is neither safe nor in allowedUnsafeSysctls is
// rejected (SysctlForbidden), as the e2e spec's kernel.msgmax; one with a
// safe sysctl written with slashes, or an allowed unsafe one, runs.
func TestAdmissionRejectsForbiddenSysctls(t *testing.T) {
	withSysctls := func(p *v1.Pod, names ...string) *v1.Pod {
		p.Spec.SecurityContext = &v1.PodSecurityContext{}
		for _, n := range names {
			p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, v1.Sysctl{Name: n, Value: "1"})
		}
		return p
	}
	f, rec := newAdmissionFixture(t, 10)
	ctx := context.Background()
	unsafe := withSysctls(created(apiPod("unsafe", "u1"), t0), "kernel.shm_rmid_forced", "kernel.msgmax")
	slashes := withSysctls(created(apiPod("slashes", "u2"), t0.Add(time.Second)), "kernel/shm_rmid_forced")
	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{unsafe, slashes}}, nil, false, false)
	assert.Equal(t, []string{"create slashes"}, f.workers.dispatched())
	assert.Equal(t, `Warning SysctlForbidden forbidden sysctl: "kernel.msgmax" not allowlisted`, <-rec.Events)
	st, ok := f.kl.statusManager.GetPodStatus("u1")
	require.True(t, ok)
	assert.Equal(t, v1.PodFailed, st.Phase)
	assert.Equal(t, "SysctlForbidden", st.Reason)
	assert.Equal(t, `Pod was rejected: forbidden sysctl: "kernel.msgmax" not allowlisted`, st.Message)

	f, _ = newAdmissionFixture(t, 10, "kernel.msg*")
	f.iterate(ctx, &kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{unsafe}}, nil, false, false)
	assert.Equal(t, []string{"create unsafe"}, f.workers.dispatched(), "allowed by allowedUnsafeSysctls")

	assert.EqualError(t, f.kl.newAdmission([]string{"vm.swappiness"}), `kubelet: allowedUnsafeSysctls: the sysctl "vm.swappiness" are not known to be namespaced`)
}
