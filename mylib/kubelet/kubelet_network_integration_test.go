package kubelet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/localcluster"
	"mykubelet/scripts/testkit/testcluster"
)

// TestTwoNodesGetTheirOwnPodCIDRs runs two kubelets (each with its own
// in-process mock runtime: a pod network when root, else IPAM only)
// against a real control plane whose kube-controller-manager allocates
// node CIDRs: each node gets its own spec.podCIDR, its kubelet hands it
// to its runtime, and the pods' IPs are inside it, so the two nodes'
// pods' IPs are disjoint.
func TestTwoNodesGetTheirOwnPodCIDRs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	// A cluster CIDR of this test's own: with a pod network, each node's
	// podCIDR is routed on the host, and other clusters run beside it.
	clusterCIDR := netip.MustParsePrefix(fmt.Sprintf("10.%d.0.0/16", 144+os.Getpid()%16))
	c := testcluster.Start(t, func(cfg *localcluster.Config) { cfg.ClusterCIDR = clusterCIDR.String() })
	admin := c.Clientset(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	type node struct {
		name string
		kl   *Kubelet
		mock *fakeruntime.Runtime
	}
	var nodes []node
	for i, name := range []string{"cidr-a", "cidr-b"} {
		mock := podCIDRTestRuntime(t, i)
		dir := chaptertest.ShortTempDir(t)
		lis, err := fakeruntime.ListenUnix(filepath.Join(dir, "rt.sock"))
		require.NoError(t, err)
		wg.Go(func() { _ = mock.Serve(ctx, lis) })
		rt, err := kuberuntime.Connect(ctx, "unix://"+filepath.Join(dir, "rt.sock"), clock.RealClock{})
		require.NoError(t, err)
		t.Cleanup(func() { rt.Close() })
		client, _, err := NewClients(chaptertest.RegisterNode(t, c, name))
		require.NoError(t, err)
		podConfig, err := MakePodSourceConfig(ctx, &wg, PodSources{Client: client, NodeName: name, Clock: clock.RealClock{}})
		require.NoError(t, err)
		kl, err := New(Config{Client: client, NodeName: name, Clock: clock.RealClock{},
			Node: &NodeConfig{Status: &NodeStatusOptions{RootDir: dir, NodeIP: net.IPv4(127, 0, 0, 1)}, NodeStatusUpdateFrequency: time.Second},
			Pods: &PodsConfig{Updates: podConfig.Updates(), SourcesReady: podConfig.SeenAllSources, RemoteRuntimeService: rt.RuntimeService(),
				RemoteImageService: rt.ImageService(), RunContainers: true, PodLogsDirectory: filepath.Join(dir, "logs")}})
		require.NoError(t, err)
		wg.Go(func() { _ = kl.Run(ctx) })
		nodes = append(nodes, node{name, kl, mock})
	}

	// The node IPAM controller gives each node a /24 of the cluster CIDR;
	// at its next status update the kubelet hands it to its runtime.
	cidrs := map[string]netip.Prefix{}
	for _, n := range nodes {
		require.Eventually(t, func() bool {
			got, err := admin.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
			require.NoError(t, err)
			return got.Spec.PodCIDR != "" && n.kl.PodCIDR() == got.Spec.PodCIDR
		}, time.Minute, 100*time.Millisecond, "%s: the node's podCIDR reaches its runtime", n.name)
		cidr := netip.MustParsePrefix(n.kl.PodCIDR())
		assert.Equal(t, 24, cidr.Bits())
		assert.True(t, clusterCIDR.Contains(cidr.Addr()), "%s in the cluster CIDR %s", cidr, clusterCIDR)
		assert.Equal(t, cidr, n.mock.PodCIDR(), "the runtime took it")
		cidrs[n.name] = cidr
	}
	require.False(t, cidrs["cidr-a"].Overlaps(cidrs["cidr-b"]), "each node its own: %v", cidrs)

	one := int64(1)
	for _, n := range nodes {
		for i := range 2 {
			_, err := admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", n.name, i)},
				Spec: v1.PodSpec{NodeName: n.name, TerminationGracePeriodSeconds: &one, Containers: []v1.Container{{
					Name: "c", Image: "busybox:1.37", ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sh", "-c", "sleep 3600"}}}},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
	seen := map[string]string{}
	for _, n := range nodes {
		for i := range 2 {
			name := fmt.Sprintf("%s-%d", n.name, i)
			var pod *v1.Pod
			require.Eventually(t, func() bool {
				var err error
				pod, err = admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
				require.NoError(t, err)
				return pod.Status.PodIP != "" && allStarted(pod)
			}, 2*time.Minute, 100*time.Millisecond, "%s runs with an IP", name)
			ip := netip.MustParseAddr(pod.Status.PodIP)
			assert.True(t, cidrs[n.name].Contains(ip), "%s's IP %s is in its node's podCIDR %s", name, ip, cidrs[n.name])
			assert.Empty(t, seen[ip.String()], "%s's IP %s is %s's too", name, ip, seen[ip.String()])
			seen[ip.String()] = name
		}
	}
}

// podCIDRTestRuntime is a mock runtime with a pod network when the test
// is root (on a starting range of its own, which the node's podCIDR then
// replaces), else with IPAM only.
func podCIDRTestRuntime(t *testing.T, i int) *fakeruntime.Runtime {
	t.Helper()
	if os.Geteuid() != 0 {
		r, err := fakeruntime.NewRuntime(fakeruntime.Config{Clock: clock.RealClock{}, Isolation: fakeruntime.IsolationInProcess})
		require.NoError(t, err)
		t.Cleanup(func() { _ = r.Close() })
		return r
	}
	var last error
	for j := range 64 {
		cidr := fmt.Sprintf("10.232.%d.0/24", (os.Getpid()+2*j+i)%256)
		r, err := fakeruntime.NewRuntime(fakeruntime.Config{Clock: clock.RealClock{}, Isolation: fakeruntime.IsolationInProcess, PodCIDR: cidr, PodNetwork: true})
		require.NoError(t, err)
		if last = r.PodNetworkError(); last == nil {
			t.Cleanup(func() { _ = r.Close() })
			return r
		}
		_ = r.Close()
	}
	t.Fatalf("no free pod CIDR for a pod network: %v", last)
	return nil
}
