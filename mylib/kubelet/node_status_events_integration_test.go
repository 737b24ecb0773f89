package kubelet

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"mykubelet/mylib/events"
	"mykubelet/scripts/testkit/testcluster"
)

// TestNodeEventsReachTheAPIServer proves, against a real API server with
// the Node authorizer and NodeRestriction, that the node's own credentials
// may record its events, on the Node by its name, where kubectl describe
// node finds them (involvedObject kind Node, name and uid the node's name,
// namespace default), and that its status carries a system UUID.
func TestNodeEventsReachTheAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := testcluster.Start(t)
	admin := c.Clientset(t)
	node := kubernetes.NewForConfigOrDie(c.UserConfig(t, "system:node:n1", "system:nodes"))
	recorder, stop := events.NewRecorder(ctx, node, "n1")
	defer stop()
	kl, err := New(Config{Client: node, NodeName: "n1", Node: &NodeConfig{
		Status:   &NodeStatusOptions{RootDir: t.TempDir(), NodeIP: []byte{127, 0, 0, 1}},
		Recorder: recorder,
	}})
	require.NoError(t, err)
	kl.BirthCry()
	require.NoError(t, kl.RegisterWithAPIServer(ctx))

	want := []string{"NodeHasNoDiskPressure", "NodeHasSufficientMemory", "NodeHasSufficientPID", "Starting"}
	var got []string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node,involvedObject.name=n1,involvedObject.uid=n1"})
		if err != nil {
			return false, err
		}
		got = nil
		for _, e := range list.Items {
			got = append(got, e.Reason)
			assert.Equal(t, "kubelet", e.Source.Component)
			assert.Equal(t, v1.EventTypeNormal, e.Type)
		}
		sort.Strings(got)
		return len(got) >= len(want), nil
	})
	require.NoError(t, err, "events seen: %v", got)
	assert.Equal(t, want, got)

	n, err := admin.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, n.Status.NodeInfo.SystemUUID)
	assert.NotEmpty(t, n.Status.NodeInfo.BootID)
}
