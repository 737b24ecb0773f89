package kubelet

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"mykubelet/mylib/events"
	kubepod "mykubelet/mylib/pod"
	"mykubelet/mylib/status"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

// TestPodStatusEnvAndEventsWithNodeCredentials proves, against a real API
// server with the Node authorizer and NodeRestriction, that with the node's
// own credentials: the status manager writes the status of a pod bound to
// the node; the API server refuses a status patch whose UID is not the
// pod's (422, the UID is immutable); another node may not write it; the final delete comes once the
// terminal phase is written; the environment reads what the node's pods
// reference and nothing else; events are recorded as "kubelet" on the node.
func TestPodStatusEnvAndEventsWithNodeCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx := context.Background()
	c := testcluster.Start(t)
	admin := c.Clientset(t)
	n1 := kubernetes.NewForConfigOrDie(chaptertest.RegisterNode(t, c, "n1"))
	n2 := kubernetes.NewForConfigOrDie(chaptertest.RegisterNode(t, c, "n2"))

	_, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"},
		Data: map[string]string{"level": "debug"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, name := range []string{"referenced", "unreferenced"} {
		_, err := admin.CoreV1().Secrets("default").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
			Data: map[string][]byte{"password": []byte(name)}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	container := v1.Container{Name: "app", Image: "busybox:1.37", Env: []v1.EnvVar{
		{Name: "LEVEL", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "level"}}},
		{Name: "PASSWORD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "referenced"}, Key: "password"}}},
	}}
	pod, err := admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       v1.PodSpec{NodeName: "n1", TerminationGracePeriodSeconds: ptr.To[int64](30), Containers: []v1.Container{container}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Run("the environment reads what the node's pod references", func(t *testing.T) {
		var envs map[string]string
		// The Node authorizer learns of the pod's references from a watch.
		require.Eventually(t, func() bool {
			got, err := makeEnvironmentVariables(pod, &pod.Spec.Containers[0], "10.88.0.2", nil, []string{"127.0.0.1"}, clientEnvSources(ctx, n1, "n1"), nil)
			envs = envMap(got)
			return err == nil
		}, 30*time.Second, 100*time.Millisecond)
		assert.Equal(t, map[string]string{"LEVEL": "debug", "PASSWORD": "referenced"}, envs)
	})

	t.Run("a secret no pod on the node references is forbidden", func(t *testing.T) {
		c := container.DeepCopy()
		c.Env = []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "unreferenced"}, Key: "password"}}}}
		_, err := makeEnvironmentVariables(pod, c, "", nil, nil, clientEnvSources(ctx, n1, "n1"), nil)
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "got %v", err)
		assert.ErrorContains(t, err, `secrets "unreferenced" is forbidden: User "system:node:n1" cannot get resource "secrets" in API group "" in the namespace "default": node: no relationship found between node 'n1' and this object`)
	})

	pm := kubepod.NewBasicPodManager()
	pm.AddPod(pod)
	clk := clocktesting.NewFakeClock(time.Now())
	sm, err := status.NewManager(status.Config{Client: n1, PodManager: pm, Clock: clk})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { sm.Run(runCtx); close(done) }()
	defer func() { cancel(); <-done }()

	t.Run("the status manager writes the status with the node's credentials", func(t *testing.T) {
		st := pod.Status
		st.Phase = v1.PodRunning
		st.PodIP, st.PodIPs = "10.88.0.2", []v1.PodIP{{IP: "10.88.0.2"}}
		st.HostIP, st.HostIPs = "127.0.0.1", []v1.HostIP{{IP: "127.0.0.1"}}
		st.ContainerStatuses = []v1.ContainerStatus{{Name: "app", Image: "busybox:1.37", Ready: true,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
		sm.SetPodStatus(pod, st)
		require.Eventually(t, func() bool {
			got, err := admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
			return err == nil && got.Status.Phase == v1.PodRunning && got.Status.PodIP == "10.88.0.2"
		}, 30*time.Second, 50*time.Millisecond)
	})

	t.Run("the API server refuses a status patch for another UID", func(t *testing.T) {
		_, _, err := status.PatchPodStatus(ctx, n1, "default", "web", "not-the-uid", v1.PodStatus{}, v1.PodStatus{Phase: v1.PodFailed})
		require.Error(t, err)
		// The patch carries metadata.uid; the API server will not change a
		// UID, so a patch meant for another pod of the same name fails.
		assert.True(t, apierrors.IsInvalid(err), "got %v", err)
		assert.ErrorContains(t, err, `Pod "web" is invalid: metadata.uid: Invalid value: "not-the-uid": field is immutable`)
		got, err := admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, v1.PodRunning, got.Status.Phase, "not written")
	})

	t.Run("another node may not write the status", func(t *testing.T) {
		_, _, err := status.PatchPodStatus(ctx, n2, "default", "web", pod.UID, v1.PodStatus{}, v1.PodStatus{Phase: v1.PodFailed})
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "got %v", err)
	})

	t.Run("events are recorded as the kubelet on the node", func(t *testing.T) {
		recorder, stop := events.NewRecorder(ctx, n1, "n1")
		defer stop()
		recorder.Event(pod, v1.EventTypeNormal, events.StartedContainer, "Started container app")
		require.Eventually(t, func() bool {
			list, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web,reason=Started"})
			return err == nil && len(list.Items) == 1 && list.Items[0].Source.Host == "n1" && list.Items[0].Source.Component == "kubelet"
		}, 30*time.Second, 50*time.Millisecond)
	})

	t.Run("the pod is deleted for good once its terminal phase is written", func(t *testing.T) {
		require.NoError(t, admin.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{}))
		deleting, err := admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, deleting.DeletionTimestamp, "graceful: the pod waits for the kubelet")
		pm.UpdatePod(deleting)
		sm.TerminatePod(deleting)
		require.Eventually(t, func() bool {
			_, err := admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, 30*time.Second, 50*time.Millisecond)
	})
}
