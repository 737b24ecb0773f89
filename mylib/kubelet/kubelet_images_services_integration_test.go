package kubelet

import (
	"context"
	"fmt"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"mykubelet/mylib/clustertrustbundle"
	"mykubelet/mylib/events"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/podcertificate"
	"mykubelet/mylib/secret"
	"mykubelet/mylib/volume/image"
	"mykubelet/mylib/volume/projected"
	secretvolume "mykubelet/mylib/volume/secret"
	"mykubelet/scripts/testkit/testcluster"
)

// runKubeletOnMock runs node name's kubelet (both halves, containers, events)
// over an in-process mock runtime against c, with the node's credentials,
// until the test ends; it returns the runtime.
func runKubeletOnMock(t *testing.T, c *testcluster.Cluster, name string) *fakeruntime.Runtime {
	return runKubeletOnMockWith(t, c, name, false)
}

// runKubeletOnMockWith is runKubeletOnMock, with volumes: the volume
// manager, the secret and projected plugins, a Secret manager and a
// ClusterTrustBundle manager (no token manager: a pod must not automount
// its service account's token), the mock mapping mounts from the pods'
// directory.
func runKubeletOnMockWith(t *testing.T, c *testcluster.Cluster, name string, volumes bool) *fakeruntime.Runtime {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	client, eventClient, err := NewClients(c.UserConfig(t, "system:node:"+name, "system:nodes"))
	require.NoError(t, err)
	clk := clock.RealClock{}
	root := t.TempDir()
	rtConfig := fakeruntime.Config{Clock: clk}
	if volumes {
		rtConfig.MountRoots = []string{filepath.Join(root, "pods")}
	}
	rt, err := fakeruntime.NewRuntime(rtConfig)
	require.NoError(t, err)
	runtime, err := kuberuntime.Connect(ctx, "unix://"+fakeruntimetest.Serve(t, rt), clk)
	require.NoError(t, err)
	t.Cleanup(func() { runtime.Close() })
	podConfig, err := MakePodSourceConfig(ctx, &wg, PodSources{Client: client, NodeName: name, Clock: clk})
	require.NoError(t, err)
	recorder, stopEvents := events.NewRecorder(ctx, eventClient, name)
	t.Cleanup(stopEvents)
	pods := &PodsConfig{Updates: podConfig.Updates(), SourcesReady: podConfig.SeenAllSources, RemoteRuntimeService: runtime.RuntimeService(),
		RemoteImageService: runtime.ImageService(), RunContainers: true, Recorder: recorder, PodLogsDirectory: t.TempDir()}
	if volumes {
		pods.Volumes, pods.RootDirectory = true, root
		pods.VolumePlugins = slices.Concat(secretvolume.ProbeVolumePlugins(), projected.ProbeVolumePlugins(), image.ProbeVolumePlugins())
		pods.SecretManager = secret.NewWatchingSecretManager(client, time.Minute)
		pods.ClusterTrustBundleManager = clustertrustbundle.NewInformerManager(ctx, client)
		certs := podcertificate.NewIssuingManager(ctx, client, k8stypes.NodeName(name), podCertificateClock)
		certs.Jitter = func() time.Duration { return 0 } // refresh at beginRefreshAt itself
		pods.PodCertificateManager = certs
	}
	kl, err := New(Config{Client: client, NodeName: name, Clock: clk,
		Node: &NodeConfig{Status: &NodeStatusOptions{RootDir: root}, NodeStatusUpdateFrequency: time.Second}, Pods: pods})
	require.NoError(t, err)
	wg.Go(func() { _ = kl.Run(ctx) })
	return rt
}

// podCertificateClock is the pod certificate managers' clock: the real
// one, ahead by what a test adds. The API server wants a certificate's
// beginRefreshAt at least 10 minutes after its notBefore, and notBefore
// within 5 minutes of its own time: a test that waits for a refresh
// moves this clock on rather than wait 5 minutes.
var podCertificateClock = &aheadClock{}

type aheadClock struct{ ahead atomic.Int64 }

func (c *aheadClock) Now() time.Time                  { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *aheadClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// containerEnv runs env in the pod's running container c and returns its
// variables.
func containerEnv(t *testing.T, admin kubernetes.Interface, rt *fakeruntime.Runtime, ns, pod string) map[string]string {
	t.Helper()
	ctx := context.Background()
	var id string
	require.Eventually(t, func() bool {
		p, err := admin.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		require.NoError(t, err)
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "c" && cs.State.Running != nil {
				_, id, _ = strings.Cut(cs.ContainerID, "://")
				return true
			}
		}
		return false
	}, 2*time.Minute, 100*time.Millisecond, "%s/%s runs", ns, pod)
	resp, err := rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"env"}, Timeout: 10})
	require.NoError(t, err)
	env := map[string]string{}
	for line := range strings.Lines(string(resp.Stdout)) {
		if k, v, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "="); ok {
			env[k] = v
		}
	}
	return env
}

// TestServiceVariablesOnARealControlPlane: a container learns of the API
// server's Service ("kubernetes" in default, whatever enableServiceLinks
// says) and, with service links, of its namespace's Services with a
// cluster IP: the kubelet lists and watches Services with the node's
// credentials (the Node authorizer allows it). An explicit env entry wins,
// and $(VAR) sees the service variables.
func TestServiceVariablesOnARealControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx := context.Background()
	c := testcluster.Start(t)
	admin := c.Clientset(t)
	_, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	redis, err := admin.CoreV1().Services("shop").Create(ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "redis-primary"},
		Spec: v1.ServiceSpec{Selector: map[string]string{"app": "redis"}, Ports: []v1.ServicePort{{Name: "redis", Port: 6379}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.CoreV1().Services("shop").Create(ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "headless"},
		Spec: v1.ServiceSpec{ClusterIP: v1.ClusterIPNone, Selector: map[string]string{"app": "x"}, Ports: []v1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	kubernetesSvc, err := admin.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	require.NoError(t, err)
	api, ip := kubernetesSvc.Spec.ClusterIP, redis.Spec.ClusterIP
	require.NotEmpty(t, ip)

	rt := runKubeletOnMock(t, c, "svc-node")
	pod := func(name string, links bool, env ...v1.EnvVar) {
		_, err := admin.CoreV1().Pods("shop").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1.PodSpec{NodeName: "svc-node", EnableServiceLinks: ptr.To(links), TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []v1.Container{{Name: "c", Image: "busybox:1.37", Command: []string{"sleep", "3600"}, Env: env}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	pod("links", true,
		v1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: "explicit"},
		v1.EnvVar{Name: "REDIS_URL", Value: "redis://$(REDIS_PRIMARY_SERVICE_HOST):$(REDIS_PRIMARY_SERVICE_PORT_REDIS)"})
	pod("nolinks", false)

	env := containerEnv(t, admin, rt, "shop", "links")
	for k, v := range map[string]string{
		"KUBERNETES_SERVICE_HOST":           api,
		"KUBERNETES_SERVICE_PORT":           "explicit", // env wins
		"KUBERNETES_SERVICE_PORT_HTTPS":     "443",
		"KUBERNETES_PORT":                   "tcp://" + api + ":443",
		"KUBERNETES_PORT_443_TCP_ADDR":      api,
		"REDIS_PRIMARY_SERVICE_HOST":        ip,
		"REDIS_PRIMARY_SERVICE_PORT":        "6379",
		"REDIS_PRIMARY_SERVICE_PORT_REDIS":  "6379",
		"REDIS_PRIMARY_PORT":                "tcp://" + ip + ":6379",
		"REDIS_PRIMARY_PORT_6379_TCP":       "tcp://" + ip + ":6379",
		"REDIS_PRIMARY_PORT_6379_TCP_PROTO": "tcp",
		"REDIS_URL":                         "redis://" + ip + ":6379",
	} {
		assert.Equal(t, v, env[k], k)
	}
	assert.NotContains(t, env, "HEADLESS_SERVICE_HOST", "a headless Service has no variables")

	env = containerEnv(t, admin, rt, "shop", "nolinks")
	assert.Equal(t, api, env["KUBERNETES_SERVICE_HOST"], "always")
	assert.Equal(t, "443", env["KUBERNETES_SERVICE_PORT"])
	assert.NotContains(t, env, "REDIS_PRIMARY_SERVICE_HOST", "enableServiceLinks: false")
}

// waitingReasons polls the pod's container c until stop says so, and
// returns the waiting reasons it saw, in order, each once in a row.
func waitingReasons(t *testing.T, admin kubernetes.Interface, ns, name string, timeout time.Duration, stop func([]string, *v1.ContainerStatus) bool) ([]string, *v1.ContainerStatus) {
	t.Helper()
	var seen []string
	var last *v1.ContainerStatus
	require.Eventually(t, func() bool {
		p, err := admin.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		for i := range p.Status.ContainerStatuses {
			cs := &p.Status.ContainerStatuses[i]
			if cs.State.Waiting != nil && (len(seen) == 0 || seen[len(seen)-1] != cs.State.Waiting.Reason) {
				seen = append(seen, cs.State.Waiting.Reason)
			}
			last = cs
		}
		return last != nil && stop(seen, last)
	}, timeout, 100*time.Millisecond, "%s/%s: waiting reasons so far %v", ns, name, seen)
	return seen, last
}

// eventsOf are the pod's events as "Type Reason Message", and each's count
// and first and last time.
func eventsOf(t *testing.T, admin kubernetes.Interface, ns, name string) map[string]v1.Event {
	t.Helper()
	list, err := admin.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	require.NoError(t, err)
	out := map[string]v1.Event{}
	for _, e := range list.Items {
		out[e.Type+" "+e.Reason+" "+e.Message] = e
	}
	return out
}

// TestImagePullFailuresOnARealControlPlane: the documentation's bad tag
// nginx:1.161 does not pull from the mock's registry; the container waits
// in ErrImagePull, then ImagePullBackOff, with upstream's events, and the
// second pull comes no sooner than the back-off's 10 s. imagePullPolicy
// Never on an image the node lacks waits in ErrImageNeverPull. A
// Deployment rolled to the bad tag stalls: its new ReplicaSet's pod is
// never Ready and the old pods keep running.
func TestImagePullFailuresOnARealControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx := context.Background()
	c := testcluster.Start(t)
	admin := c.Clientset(t)
	const node = "pull-node"
	runKubeletOnMock(t, c, node)

	bare := func(name, image string, policy v1.PullPolicy) {
		_, err := admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []v1.Container{{Name: "c", Image: image, ImagePullPolicy: policy}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	bare("typo", "nginx:1.161", "")
	bare("never", "busybox:1.35", v1.PullNever)

	notFound := `rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/library/nginx:1.161": ` +
		`failed to resolve reference "docker.io/library/nginx:1.161": docker.io/library/nginx:1.161: not found`
	t.Run("a bad tag: ErrImagePull, then ImagePullBackOff, with the events", func(t *testing.T) {
		// ErrImagePull may be overwritten within a second by the next sync
		// (the sandbox's start wakes it) before the status manager writes
		// it; after the second pull it shows for the next back-off.
		seen, last := waitingReasons(t, admin, "default", "typo", 3*time.Minute, func(seen []string, cs *v1.ContainerStatus) bool {
			i := slices.Index(seen, "ErrImagePull")
			return i >= 0 && slices.Contains(seen[i:], "ImagePullBackOff") && cs.State.Waiting != nil && cs.State.Waiting.Reason == "ImagePullBackOff"
		})
		assert.Subset(t, []string{"ContainerCreating", "ErrImagePull", "ImagePullBackOff"}, seen, "nothing else: %v", seen)
		assert.Equal(t, "ImagePullBackOff", last.State.Waiting.Reason)
		assert.Equal(t, `Back-off pulling image "nginx:1.161": ErrImagePull: `+notFound, last.State.Waiting.Message)
		assert.False(t, last.Ready)

		var evs map[string]v1.Event
		want := []string{
			`Normal Pulling Pulling image "nginx:1.161"`,
			`Warning Failed Failed to pull image "nginx:1.161": ` + notFound,
			`Warning Failed Error: ErrImagePull`,
			`Normal BackOff Back-off pulling image "nginx:1.161"`,
			`Warning Failed Error: ImagePullBackOff`,
		}
		require.Eventually(t, func() bool {
			evs = eventsOf(t, admin, "default", "typo")
			for _, w := range want {
				if _, ok := evs[w]; !ok {
					return false
				}
			}
			return true
		}, time.Minute, 200*time.Millisecond, "the events: want %q", want)

		// The pull was tried again, but not within the first back-off's
		// 10 s (the event's times are whole seconds).
		var pulling v1.Event
		require.Eventually(t, func() bool {
			pulling = eventsOf(t, admin, "default", "typo")[want[0]]
			return pulling.Count >= 2
		}, 2*time.Minute, 200*time.Millisecond, "the pull is tried again once the back-off is over")
		assert.GreaterOrEqual(t, pulling.LastTimestamp.Sub(pulling.FirstTimestamp.Time), 10*time.Second,
			"the second pull waited for the back-off: first %v, last %v", pulling.FirstTimestamp, pulling.LastTimestamp)
	})

	t.Run("imagePullPolicy Never on a missing image: ErrImageNeverPull", func(t *testing.T) {
		_, last := waitingReasons(t, admin, "default", "never", time.Minute, func(seen []string, cs *v1.ContainerStatus) bool {
			return slices.Contains(seen, "ErrImageNeverPull")
		})
		assert.Equal(t, `Container image "busybox:1.35" is not present with pull policy of Never`, last.State.Waiting.Message)
		require.Eventually(t, func() bool {
			_, ok := eventsOf(t, admin, "default", "never")[`Warning ErrImageNeverPull Container image "busybox:1.35" is not present with pull policy of Never`]
			return ok
		}, time.Minute, 200*time.Millisecond)
		_, pulled := eventsOf(t, admin, "default", "never")[`Normal Pulling Pulling image "busybox:1.35"`]
		assert.False(t, pulled, "Never never pulls")
	})

	t.Run("a Deployment rolled to the bad tag stalls", func(t *testing.T) {
		labels := map[string]string{"app": "web"}
		_, err := admin.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: v1.PodSpec{NodeName: node,
					TerminationGracePeriodSeconds: ptr.To[int64](1), Containers: []v1.Container{{Name: "nginx", Image: "nginx:1.16.1"}}}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			d, err := admin.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
			require.NoError(t, err)
			return d.Status.AvailableReplicas == 3 && d.Status.UpdatedReplicas == 3
		}, 3*time.Minute, 200*time.Millisecond, "nginx:1.16.1 rolls out 3/3")

		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d, err := admin.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			d.Spec.Template.Spec.Containers[0].Image = "nginx:1.161"
			_, err = admin.AppsV1().Deployments("default").Update(ctx, d, metav1.UpdateOptions{})
			return err
		}))

		// The new ReplicaSet's pod (maxSurge 25% of 3: one) fails to pull.
		var newPod string
		require.Eventually(t, func() bool {
			pods, err := admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			require.NoError(t, err)
			for _, p := range pods.Items {
				if p.Spec.Containers[0].Image == "nginx:1.161" {
					newPod = p.Name
					return true
				}
			}
			return false
		}, time.Minute, 200*time.Millisecond, "the new ReplicaSet makes a pod")
		waitingReasons(t, admin, "default", newPod, 3*time.Minute, func(seen []string, cs *v1.ContainerStatus) bool {
			return slices.Contains(seen, "ImagePullBackOff")
		})

		rsets, err := admin.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		require.NoError(t, err)
		require.Len(t, rsets.Items, 2)
		for _, rs := range rsets.Items {
			switch image := rs.Spec.Template.Spec.Containers[0].Image; image {
			case "nginx:1.16.1":
				assert.EqualValues(t, 3, rs.Status.ReadyReplicas, "the old pods keep running")
			case "nginx:1.161":
				assert.EqualValues(t, 0, rs.Status.ReadyReplicas, "the new pod is never Ready")
			default:
				t.Errorf("a ReplicaSet of %s", image)
			}
		}
		d, err := admin.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		assert.EqualValues(t, 3, d.Status.AvailableReplicas, "the rollout stalls with the old pods available")
		assert.EqualValues(t, 1, d.Status.UpdatedReplicas, fmt.Sprintf("one new pod, stuck: %+v", d.Status))
		assert.EqualValues(t, 1, d.Status.UnavailableReplicas)
	})
}
