package stats

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
)

// containerd16 answers as containerd 1.6 does for a sandbox made without
// a CgroupParent: ListPodSandboxStats fails whole, PodSandboxStats fails
// for that sandbox alone.
type containerd16 struct {
	runtimeapi.RuntimeServiceClient
	noCgroup map[string]bool
}

func (c *containerd16) ListPodSandboxStats(ctx context.Context, req *runtimeapi.ListPodSandboxStatsRequest, opts ...grpc.CallOption) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	for id := range c.noCgroup {
		return nil, errors.New("failed to obtain metrics for sandbox " + id + ": failed to get cgroup metrics for sandbox " + id + " because cgroupPath is empty")
	}
	return c.RuntimeServiceClient.ListPodSandboxStats(ctx, req, opts...)
}

func (c *containerd16) PodSandboxStats(ctx context.Context, req *runtimeapi.PodSandboxStatsRequest, opts ...grpc.CallOption) (*runtimeapi.PodSandboxStatsResponse, error) {
	if c.noCgroup[req.GetPodSandboxId()] {
		return nil, errors.New("failed to get cgroup metrics for sandbox " + req.GetPodSandboxId() + " because cgroupPath is empty")
	}
	return c.RuntimeServiceClient.PodSandboxStats(ctx, req, opts...)
}

// A runtime that fails the list for one sandbox: the summary still has
// the other pods with their figures, the one without stats is left out,
// and it is logged once, not at every read.
func TestSummaryToleratesASandboxWithoutStats(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	rt := fakeruntime.New(clk)
	require.NoError(t, rt.Seed(ctx))
	conn, err := grpc.NewClient("unix://"+fakeruntimetest.Serve(t, rt), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	list, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(list.Items), 2)
	broken := list.Items[0]
	cri := &containerd16{RuntimeServiceClient: rs, noCgroup: map[string]bool{broken.Id: true}}

	var pods []*v1.Pod
	for _, sp := range fakeruntime.SeedPods {
		pods = append(pods, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: sp.Name, Namespace: sp.Namespace, UID: types.UID(sp.UID)}})
	}
	p, err := NewProvider(Config{NodeName: "node-a", Runtime: cri, Images: runtimeapi.NewImageServiceClient(conn), Pods: func() []*v1.Pod { return pods },
		RootDirectory: t.TempDir(), PodLogsDirectory: t.TempDir(), MemoryCapacity: func() int64 { return gib }, Clock: clk})
	require.NoError(t, err)
	var logged []string
	defer func(f func(string, error)) { logNoSandboxStats = f }(logNoSandboxStats)
	logNoSandboxStats = func(id string, err error) { logged = append(logged, id) }

	for range 3 { // the eviction manager reads it every 10 s
		s, err := p.Get(ctx, true)
		require.NoError(t, err)
		assert.Len(t, s.Pods, len(pods)-1, "the pod without sandbox stats is left out")
		for _, ps := range s.Pods {
			assert.NotEqual(t, broken.Metadata.Uid, ps.PodRef.UID)
			assert.NotNil(t, ps.Memory, ps.PodRef.Name)
			assert.NotNil(t, ps.CPU, ps.PodRef.Name)
		}
		cpuMem, err := p.listPodCPUAndMemoryStats(ctx)
		require.NoError(t, err)
		assert.Len(t, cpuMem, len(pods)-1)
	}
	assert.Equal(t, []string{broken.Id}, logged, "one line for the sandbox, not one per read")

	// With its CgroupParent (a new sandbox), the list works again.
	delete(cri.noCgroup, broken.Id)
	s, err := p.Get(ctx, true)
	require.NoError(t, err)
	assert.Len(t, s.Pods, len(pods))
}
