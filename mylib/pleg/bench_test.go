package pleg_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/pleg"
)

// BenchmarkRelist measures one steady-state relist (nothing changed since
// the previous one) with n containers, one per pod, each pod with its
// sandbox: n containers and n sandboxes listed per relist.
//
//   - socket: the whole relist, including ListPodSandbox and ListContainers
//     over the CRI gRPC unix socket to the fake runtime and the conversion
//     to mylib/container types (kuberuntime.GetPods);
//   - inmemory: the PLEG's own work only (comparing records), with GetPods
//     answering a prepared list.
//
// go test -run '^$' -bench Relist -benchmem ./mylib/pleg
func BenchmarkRelist(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("socket/containers=%d", n), func(b *testing.B) {
			ctx := context.Background()
			rt := fakeruntime.New(clock.RealClock{})
			for i := 0; i < n; i++ {
				require.NoError(b, rt.RunPod(ctx, fakeruntime.SeedPod{
					Namespace: "bench", Name: fmt.Sprintf("pod-%d", i), UID: fmt.Sprintf("uid-%06d", i),
					Container: "app", Image: "docker.io/library/busybox:1.36",
				}))
			}
			m := serveRuntime(b, rt, clock.RealClock{})
			benchRelist(b, m, n)
		})
		b.Run(fmt.Sprintf("inmemory/containers=%d", n), func(b *testing.B) {
			benchRelist(b, newStaticRuntime(n), n)
		})
	}
}

func benchRelist(b *testing.B, rt kubecontainer.Runtime, n int) {
	ctx := context.Background()
	ch := make(chan *pleg.PodLifecycleEvent, 2*n+10)
	g := pleg.NewGenericPLEG(rt, ch, &pleg.RelistDuration{RelistPeriod: pleg.RelistPeriod, RelistThreshold: pleg.RelistThreshold},
		kubecontainer.NewCache(), clock.RealClock{})
	g.Relist(ctx) // the first relist sees everything start
	if len(ch) != 2*n {
		b.Fatalf("first relist: %d events, want %d", len(ch), 2*n)
	}
	for len(ch) > 0 {
		<-ch
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g.Relist(ctx)
	}
	b.StopTimer()
	if len(ch) != 0 {
		b.Fatalf("a steady-state relist sent %d events", len(ch))
	}
}

// staticRuntime answers GetPods with a prepared list.
type staticRuntime struct{ pods []*kubecontainer.Pod }

// The methods the PLEG never calls.
func (*staticRuntime) GetPod(context.Context, types.UID) (*kubecontainer.Pod, error) {
	panic("the PLEG does not call GetPod")
}
func (*staticRuntime) SyncPod(context.Context, *v1.Pod, *kubecontainer.PodStatus, []v1.Secret, *flowcontrol.Backoff) kubecontainer.PodSyncResult {
	panic("the PLEG does not call SyncPod")
}
func (*staticRuntime) KillPod(context.Context, *v1.Pod, kubecontainer.Pod, *int64) error {
	panic("the PLEG does not call KillPod")
}

func newStaticRuntime(n int) *staticRuntime {
	r := &staticRuntime{}
	for i := 0; i < n; i++ {
		uid := fmt.Sprintf("uid-%06d", i)
		r.pods = append(r.pods, &kubecontainer.Pod{
			ID: types.UID(uid), Name: "pod", Namespace: "bench",
			Containers: []*kubecontainer.Container{{ID: kubecontainer.ContainerID{Type: "x", ID: "c" + uid}, State: kubecontainer.ContainerStateRunning}},
			Sandboxes:  []*kubecontainer.Container{{ID: kubecontainer.ContainerID{Type: "x", ID: "s" + uid}, State: kubecontainer.ContainerStateRunning}},
		})
	}
	return r
}

func (r *staticRuntime) Type() string { return "x" }
func (r *staticRuntime) GetPods(context.Context, bool) ([]*kubecontainer.Pod, error) {
	return r.pods, nil
}
func (r *staticRuntime) GetPodStatus(_ context.Context, p *kubecontainer.Pod) (*kubecontainer.PodStatus, error) {
	return &kubecontainer.PodStatus{ID: p.ID}, nil
}
