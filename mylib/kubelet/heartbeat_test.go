package kubelet

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"mykubelet/mylib/nodestatus"
)

// TestNodeStatusGoesThroughTheHeartbeatClient: the status is read and
// written with NodeConfig.HeartbeatClient, and from the second failed try
// of a sync on, OnHeartbeatFailure is called (upstream closes the heartbeat
// connections there).
func TestNodeStatusGoesThroughTheHeartbeatClient(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	main := fake.NewClientset(node.DeepCopy())
	hb := fake.NewClientset(node.DeepCopy())
	mainGets := 0
	main.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		mainGets++
		return false, nil, nil
	})
	broken := true
	hb.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if broken {
			return true, nil, errors.New("heartbeat: timeout")
		}
		return false, nil, nil
	})
	failures := 0
	clk := testingclock.NewFakeClock(t0)
	kl, err := New(Config{Client: main, NodeName: "n1", Clock: clk, Node: &NodeConfig{
		Setters:            []nodestatus.Setter{nodestatus.ReadyCondition(clk.Now, nil, nil)},
		HeartbeatClient:    hb,
		OnHeartbeatFailure: func() { failures++ },
	}})
	require.NoError(t, err)

	err = kl.updateNodeStatus(context.Background())
	require.ErrorContains(t, err, "heartbeat: timeout")
	assert.Equal(t, NodeStatusUpdateRetry-1, failures, "called after every failed try but the first")
	assert.Zero(t, mainGets, "the status is not read with the main client")

	// With a heartbeat client that works, the status is written with it.
	broken, failures = false, 0
	require.NoError(t, kl.updateNodeStatus(context.Background()))
	assert.Zero(t, failures)
	assert.Zero(t, mainGets)
	patched := false
	for _, a := range hb.Actions() {
		patched = patched || (a.GetVerb() == "patch" && a.GetSubresource() == "status")
	}
	assert.True(t, patched, "the status patch went through the heartbeat client")
}
