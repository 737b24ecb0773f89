package kubelet

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/clock"

	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/metrics"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

// TestPodStartSLIThroughARealWatch runs the pod half with Metrics against a
// real API server, its pods coming from the API server's watch
// (MakePodSourceConfig), as the capstone does: each pod created is counted
// once in kubelet_pod_start_sli_duration_seconds, once the watch brings
// back the Running status the kubelet wrote, though its service-account
// token volume (projected) is in its spec; a second burst adds its own.
func TestPodStartSLIThroughARealWatch(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	c := testcluster.Start(t)
	admin := c.Clientset(t)
	const node = "metrics-node"
	client, _, err := NewClients(chaptertest.RegisterNode(t, c, node))
	require.NoError(t, err)

	clk := clock.RealClock{}
	dir := chaptertest.ShortTempDir(t)
	lis, err := fakeruntime.ListenUnix(filepath.Join(dir, "rt.sock"))
	require.NoError(t, err)
	mock, err := fakeruntime.NewRuntime(fakeruntime.Config{Clock: clk, Isolation: fakeruntime.IsolationInProcess})
	require.NoError(t, err)
	wg.Go(func() { _ = mock.Serve(ctx, lis) })
	rt, err := kuberuntime.Connect(ctx, "unix://"+filepath.Join(dir, "rt.sock"), clk)
	require.NoError(t, err)
	defer rt.Close()
	podConfig, err := MakePodSourceConfig(ctx, &wg, PodSources{Client: client, NodeName: node, Clock: clk})
	require.NoError(t, err)
	m := metrics.New()
	kl, err := New(Config{Client: client, NodeName: node, Clock: clk,
		Pods: &PodsConfig{Updates: podConfig.Updates(), SourcesReady: podConfig.SeenAllSources, RemoteRuntimeService: rt.RuntimeService(),
			RemoteImageService: rt.ImageService(), RunContainers: true, PodLogsDirectory: filepath.Join(dir, "logs"), Metrics: m}})
	require.NoError(t, err)
	wg.Go(func() { _ = kl.RunPods(ctx) })

	sli := func() (uint64, float64) {
		h, err := testutil.GetHistogramVecFromGatherer(m.Gatherer(), "kubelet_pod_start_sli_duration_seconds", nil)
		require.NoError(t, err)
		return h.GetAggregatedSampleCount(), h.GetAggregatedSampleSum()
	}
	burst := func(label string, n int) {
		for i := range n {
			one := int64(1)
			_, err := admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", label, i), Labels: map[string]string{"burst": label}},
				Spec: v1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: &one, Containers: []v1.Container{{
					Name: "c", Image: "busybox:1.37", ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sh", "-c", "sleep 3600"}}}},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		require.Eventually(t, func() bool {
			list, err := admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "burst=" + label})
			require.NoError(t, err)
			running := 0
			for i := range list.Items {
				if allStarted(&list.Items[i]) {
					running++
				}
			}
			return running == n
		}, 2*time.Minute, 100*time.Millisecond, "the %s pods run", label)
	}

	burst("a", 5)
	require.Eventually(t, func() bool { n, _ := sli(); return n == 5 }, 30*time.Second, 50*time.Millisecond,
		"each pod observed once the watch shows it running")
	_, sum := sli()
	assert.Greater(t, sum, 0.0)
	assert.Less(t, sum, 5*60.0, "each under a minute on an idle node")

	burst("b", 3)
	require.Eventually(t, func() bool { n, _ := sli(); return n == 8 }, 30*time.Second, 50*time.Millisecond, "the second burst adds its own")
	time.Sleep(time.Second) // later watch events of the same pods (a resync, say) add nothing
	n, _ := sli()
	assert.EqualValues(t, 8, n)

	total, err := testutil.GetHistogramVecFromGatherer(m.Gatherer(), "kubelet_pod_start_total_duration_seconds", nil)
	require.NoError(t, err)
	assert.EqualValues(t, 8, total.GetAggregatedSampleCount())
	require.Eventually(t, func() bool {
		return strings.Contains(scrapeMetrics(t, m.Handler()), "kubelet_running_pods 8\n")
	}, 10*time.Second, 50*time.Millisecond, "the PLEG counts the running sandboxes")
}
