package events

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestNewRecorderWritesAsKubeletOnTheNode(t *testing.T) {
	client := fake.NewClientset()
	recorder, stop := NewRecorder(context.Background(), client, "node-a")
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1"}}
	recorder.Eventf(pod, v1.EventTypeNormal, PulledImage, "Successfully pulled image %q", "busybox")

	// The broadcaster writes asynchronously: wait for the event to land.
	var list *v1.EventList
	require.Eventually(t, func() bool {
		var err error
		list, err = client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
		return err == nil && len(list.Items) == 1
	}, 10*time.Second, 10*time.Millisecond)
	stop()
	e := list.Items[0]
	assert.Equal(t, "kubelet", e.Source.Component)
	assert.Equal(t, "node-a", e.Source.Host)
	assert.Equal(t, "Pulled", e.Reason)
	assert.Equal(t, `Successfully pulled image "busybox"`, e.Message)
	assert.Equal(t, "p", e.InvolvedObject.Name)
	assert.EqualValues(t, "u1", e.InvolvedObject.UID)
}
