package kubelet

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"mykubelet/mylib/events"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

// crashLoopWrites counts the pod half's API writes by kind.
type crashLoopWrites struct {
	statusPatches, eventPosts, eventPatches, other atomic.Int64
}

func (c *crashLoopWrites) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		p := req.URL.Path
		switch {
		case req.Method == http.MethodGet:
		case strings.Contains(p, "/pods/") && strings.HasSuffix(p, "/status"):
			c.statusPatches.Add(1)
		case strings.Contains(p, "/events") && req.Method == http.MethodPost:
			c.eventPosts.Add(1)
		case strings.Contains(p, "/events"):
			c.eventPatches.Add(1)
		default:
			c.other.Add(1)
		}
		return rt.RoundTrip(req)
	})
}

// countingRecorder counts the events the kubelet asks its recorder for,
// before client-go's recorder aggregates them and filters spam.
type countingRecorder struct {
	record.EventRecorder
	calls atomic.Int64
}

func (r *countingRecorder) Event(o runtime.Object, t, reason, msg string) {
	r.calls.Add(1)
	r.EventRecorder.Event(o, t, reason, msg)
}

func (r *countingRecorder) Eventf(o runtime.Object, t, reason, f string, args ...any) {
	r.calls.Add(1)
	r.EventRecorder.Eventf(o, t, reason, f, args...)
}

func (r *countingRecorder) AnnotatedEventf(o runtime.Object, a map[string]string, t, reason, f string, args ...any) {
	r.calls.Add(1)
	r.EventRecorder.AnnotatedEventf(o, a, t, reason, f, args...)
}

// BenchmarkCrashLoopAPIWrites runs one crash-looping pod (`exit 1` under
// restartPolicy Always) for a window of real time (MYKUBELET_CRASHLOOP_WINDOW,
// default 10m) on the whole pod half of the Kubelet, in-process, with the
// node's credentials, the real status manager and client-go's event
// recorder, against a real API server. It reports the kubelet's API writes
// over the window: status patches (and how many of them changed the pod:
// the status manager writes only on change), events asked of the recorder
// and what it wrote (a POST for a new event, a PATCH of the count for a
// repeat; client-go's spam filter lets an object have 25 events, then one
// every 5 minutes), and the container's restarts. Run:
//
//	MYKUBELET_CRASHLOOP_WINDOW=10m go test -run '^$' -bench BenchmarkCrashLoopAPIWrites -benchtime 1x -timeout 30m ./mylib/kubelet/
func BenchmarkCrashLoopAPIWrites(b *testing.B) {
	window := 10 * time.Minute
	if v := os.Getenv("MYKUBELET_CRASHLOOP_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("MYKUBELET_CRASHLOOP_WINDOW=%q: %v", v, err)
		}
		window = d
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := testcluster.Start(b)
	admin := c.Clientset(b)
	const node = "crashloop-node"
	nodeCfg := chaptertest.RegisterNode(b, c, node)
	var writes crashLoopWrites
	nodeCfg.WrapTransport = writes.wrap
	client, eventClient, err := NewClients(nodeCfg)
	if err != nil {
		b.Fatal(err)
	}
	clk := clock.RealClock{}
	dir := chaptertest.ShortTempDir(b)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	lis, err := fakeruntime.ListenUnix(filepath.Join(dir, "rt.sock"))
	if err != nil {
		b.Fatal(err)
	}
	wg.Go(func() { _ = fakeruntime.New(clk).Serve(ctx, lis) })
	rt, err := kuberuntime.Connect(ctx, "unix://"+filepath.Join(dir, "rt.sock"), clk)
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	podConfig, err := MakePodSourceConfig(ctx, &wg, PodSources{Client: client, NodeName: node, Clock: clk})
	if err != nil {
		b.Fatal(err)
	}
	inner, stopEvents := events.NewRecorder(ctx, eventClient, node)
	defer stopEvents()
	recorder := &countingRecorder{EventRecorder: inner}
	kl, err := New(Config{Client: client, NodeName: node, Clock: clk,
		Pods: &PodsConfig{Updates: podConfig.Updates(), SourcesReady: podConfig.SeenAllSources, RemoteRuntimeService: rt.RuntimeService(), RemoteImageService: rt.ImageService(),
			RunContainers: true, Recorder: recorder, PodLogsDirectory: filepath.Join(dir, "logs"),
			ContainerGC: ptr.To(kuberuntime.DefaultGCPolicy()), ActiveDeadline: true},
	})
	if err != nil {
		b.Fatal(err)
	}
	wg.Go(func() { _ = kl.RunPods(ctx) })

	for range b.N {
		crashLoopWindow(ctx, b, admin, node, window, &writes, recorder)
	}
}

// crashLoopWindow creates the crash-looping pod, counts for window, and
// deletes it (with grace period 0: the count is of the crash loop only).
func crashLoopWindow(ctx context.Context, b *testing.B, admin kubernetes.Interface, node string, window time.Duration, writes *crashLoopWrites, rec *countingRecorder) {
	pods := admin.CoreV1().Pods("default")
	pod, err := pods.Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "crashloop-"},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "crashloop", Image: "busybox:1.36",
			Command: []string{"sh", "-c", "echo oops; exit 1"}}}}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod.Name, ResourceVersion: pod.ResourceVersion})
	if err != nil {
		b.Fatal(err)
	}
	s0, p0, q0, calls0 := writes.statusPatches.Load(), writes.eventPosts.Load(), writes.eventPatches.Load(), rec.calls.Load()
	changes := 0
	last := pod.Status
	var restarts int32
	deadline := time.After(window)
	b.ResetTimer()
loop:
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				b.Fatal("the watch ended")
			}
			if p, isPod := e.Object.(*v1.Pod); isPod && e.Type == watch.Modified {
				if !equality.Semantic.DeepEqual(p.Status, last) {
					changes++
					last = p.Status
				}
				if len(p.Status.ContainerStatuses) == 1 {
					restarts = p.Status.ContainerStatuses[0].RestartCount
				}
			}
		case <-deadline:
			break loop
		}
	}
	b.StopTimer()
	w.Stop()
	statusPatches := writes.statusPatches.Load() - s0
	posts, patches := writes.eventPosts.Load()-p0, writes.eventPatches.Load()-q0
	b.ReportMetric(window.Minutes(), "window-min")
	b.ReportMetric(float64(restarts), "restarts")
	b.ReportMetric(float64(statusPatches), "status-patches")
	b.ReportMetric(float64(changes), "status-changes")
	b.ReportMetric(float64(rec.calls.Load()-calls0), "events-asked")
	b.ReportMetric(float64(posts), "event-posts")
	b.ReportMetric(float64(patches), "event-patches")
	if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		b.Fatal(err)
	}
}
