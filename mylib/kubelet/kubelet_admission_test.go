package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/events"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

// TestAdmissionRejectsPodsBoundByHand runs a Kubelet with admission on
// (maxPods 2) against a real control plane, and binds pods to it by hand,
// past the scheduler: the first runs; one whose node selector the node
// does not match ends Failed with reason NodeAffinity and is not counted;
// the next runs; the one after ends Failed with reason OutOfpods, as
// kubectl get pods shows in its STATUS column, with a Warning event.
func TestAdmissionRejectsPodsBoundByHand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := testcluster.Start(t)
	admin := c.Clientset(t)
	nodeCfg := c.UserConfig(t, "system:node:n1", "system:nodes")
	client, eventClient, err := NewClients(nodeCfg)
	require.NoError(t, err)

	clk := clock.RealClock{}
	rt := fakeruntime.New(clk)
	sock := fakeruntimetest.Serve(t, rt)
	runtime, err := kuberuntime.Connect(ctx, "unix://"+sock, clk)
	require.NoError(t, err)
	defer runtime.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	podConfig, err := MakePodSourceConfig(ctx, &wg, PodSources{Client: client, NodeName: "n1", Clock: clk})
	require.NoError(t, err)
	recorder, stopEvents := events.NewRecorder(ctx, eventClient, "n1")
	defer stopEvents()
	kl, err := New(Config{Client: client, NodeName: "n1", Clock: clk,
		Node: &NodeConfig{Status: &NodeStatusOptions{RootDir: t.TempDir(), MaxPods: 2}},
		Pods: &PodsConfig{Updates: podConfig.Updates(), SourcesReady: podConfig.SeenAllSources, RemoteRuntimeService: runtime.RuntimeService(), RemoteImageService: runtime.ImageService(),
			RunContainers: true, Recorder: recorder, PodLogsDirectory: t.TempDir(), Admit: true},
	})
	require.NoError(t, err)
	wg.Go(func() { _ = kl.Run(ctx) })

	require.Eventually(t, func() bool {
		n, err := admin.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		return err == nil && n.Status.Allocatable.Pods().Value() == 2
	}, time.Minute, 100*time.Millisecond, "the node registers with allocatable pods=2")

	bind := func(name string, selector map[string]string) {
		_, err := admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1.PodSpec{NodeName: "n1", NodeSelector: selector, Containers: []v1.Container{{Name: "app", Image: "busybox:1.36",
				Command: []string{"sh", "-c", "sleep 3600"}}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	phase := func(name string) v1.PodPhase {
		p, err := admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return p.Status.Phase
	}
	waitPhase := func(name string, want v1.PodPhase) *v1.Pod {
		t.Helper()
		require.Eventually(t, func() bool { return phase(name) == want }, time.Minute, 100*time.Millisecond, "pod %s %s", name, want)
		p, err := admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return p
	}

	bind("first", nil)
	waitPhase("first", v1.PodRunning)
	bind("elsewhere", map[string]string{"disk": "ssd"})
	p := waitPhase("elsewhere", v1.PodFailed)
	assert.Equal(t, "NodeAffinity", p.Status.Reason)
	assert.Equal(t, "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector", p.Status.Message)
	bind("second", nil)
	waitPhase("second", v1.PodRunning) // the rejected pod takes no room
	bind("third", nil)
	p = waitPhase("third", v1.PodFailed)
	assert.Equal(t, "OutOfpods", p.Status.Reason)
	assert.Equal(t, "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2", p.Status.Message)
	assert.Empty(t, p.Status.ContainerStatuses, "no container was started")

	kubeconfig := filepath.Join(t.TempDir(), "admin.kubeconfig")
	kc, err := os.ReadFile(c.AdminKubeconfig)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(kubeconfig, kc, 0o600))
	out := chaptertest.Kubectl(t, kubeconfig, "get", "pod", "third", "--no-headers", "-o", "custom-columns=NAME:.metadata.name")
	assert.Equal(t, "third\n", out)
	table := chaptertest.Kubectl(t, kubeconfig, "get", "pods", "third", "elsewhere")
	assert.Regexp(t, `(?m)^third\s+0/1\s+OutOfpods\s+0\s+`, table)
	assert.Regexp(t, `(?m)^elsewhere\s+0/1\s+NodeAffinity\s+0\s+`, table)

	require.Eventually(t, func() bool {
		list, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=third,reason=OutOfpods"})
		return err == nil && len(list.Items) == 1 && list.Items[0].Type == v1.EventTypeWarning &&
			list.Items[0].Message == "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"
	}, 30*time.Second, 100*time.Millisecond, "a Warning event OutOfpods on the pod")
	assert.Equal(t, []string{"default/first", "default/second"}, runningPods(t, runtime))
}

func runningPods(t *testing.T, rt *kuberuntime.Manager) []string {
	t.Helper()
	pods, err := rt.GetPods(context.Background(), false)
	require.NoError(t, err)
	var names []string
	for _, p := range pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	slices.Sort(names)
	return names
}
