package kubelet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/kuberuntime"
	kubepod "mykubelet/mylib/pod"
	"mykubelet/mylib/status"
)

// podPipeline wires the pieces as a pod worker will: runtime status →
// SyncPod → runtime status → generateAPIPodStatus → status manager → API.
type podPipeline struct {
	rt      *fakeruntime.Runtime
	m       *kuberuntime.Manager
	sm      status.Manager
	clk     *clocktesting.FakeClock
	reasons *ReasonCache
}

func newPodPipeline(t testing.TB, client kubernetes.Interface, pm kubepod.Manager) *podPipeline {
	t.Helper()
	clk := clocktesting.NewFakeClock(podT0)
	rt := fakeruntime.New(clk)
	sock := fakeruntimetest.Serve(t, rt)
	conn, err := kuberuntime.Connect(context.Background(), "unix://"+sock, clk)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	m, err := kuberuntime.NewKubeGenericRuntimeManager(context.Background(),
		&record.FakeRecorder{}, // no Events channel: events are dropped
		nil, nil, t.TempDir(), &PodRuntimeHelper{Client: client, HostIPs: []string{"127.0.0.1"}}, "", clk,
		conn.RuntimeService(), conn.ImageService())
	require.NoError(t, err)
	sm, err := status.NewManager(status.Config{Client: client, PodManager: pm, Clock: clk})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sm.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &podPipeline{rt: rt, m: m, sm: sm, clk: clk, reasons: NewReasonCache()}
}

func (p *podPipeline) runtimeStatus(t testing.TB, pod *v1.Pod) *kubecontainer.PodStatus {
	t.Helper()
	p.clk.Step(time.Second)
	pods, err := p.m.GetPods(context.Background(), true)
	require.NoError(t, err)
	rp := kubecontainer.Pods(pods).FindPodByID(pod.UID)
	rp.ID, rp.Name, rp.Namespace = pod.UID, pod.Name, pod.Namespace
	st, err := p.m.GetPodStatus(context.Background(), &rp)
	require.NoError(t, err)
	return st
}

// sync is one pod worker pass: sync the runtime, then report the status.
func (p *podPipeline) sync(t testing.TB, pod *v1.Pod) {
	t.Helper()
	result := p.m.SyncPod(context.Background(), pod, p.runtimeStatus(t, pod), nil, nil)
	p.reasons.Update(pod.UID, result)
	old, ok := p.sm.GetPodStatus(pod.UID)
	if !ok {
		old = pod.Status
	}
	p.sm.SetPodStatus(pod, generateAPIPodStatus(pod, p.runtimeStatus(t, pod), old, false, []string{"127.0.0.1"}, p.reasons))
}

func TestAPodRunsAndTheAPIShowsItRunning(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: v1.PodSpec{NodeName: "node-a", RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{
			Name: "app", Image: "busybox:1.37", ImagePullPolicy: v1.PullIfNotPresent,
			Env: []v1.EnvVar{{Name: "LEVEL", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "level"}}}},
		}}},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
	client := fake.NewClientset(pod.DeepCopy(),
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "default"}, Data: map[string]string{"level": "debug"}})
	pm := kubepod.NewBasicPodManager()
	pm.AddPod(pod)
	p := newPodPipeline(t, client, pm)
	client.ClearActions()

	p.sync(t, pod)
	var got *v1.Pod
	require.Eventually(t, func() bool {
		var err error
		got, err = client.CoreV1().Pods("default").Get(context.Background(), "web", metav1.GetOptions{})
		return err == nil && got.Status.Phase == v1.PodRunning
	}, 10*time.Second, 5*time.Millisecond)
	assert.Regexp(t, `^10\.88\.`, got.Status.PodIP)
	assert.Equal(t, "127.0.0.1", got.Status.HostIP)
	require.Len(t, got.Status.ContainerStatuses, 1)
	cs := got.Status.ContainerStatuses[0]
	assert.True(t, cs.Ready)
	assert.NotNil(t, cs.State.Running)
	assert.Regexp(t, `^`+fakeruntime.RuntimeName+`://`, cs.ContainerID)
	for _, c := range got.Status.Conditions {
		assert.Equal(t, v1.ConditionTrue, c.Status, c.Type)
	}
	assert.NotNil(t, got.Status.StartTime)

	// One write took it from Pending to Running; a second pass with
	// nothing new writes nothing.
	p.sync(t, pod)
	time.Sleep(50 * time.Millisecond) // give a wrong write the chance to happen
	patches := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			patches++
		}
	}
	assert.Equal(t, 1, patches)
}

func TestAMissingConfigMapKeepsTheContainerWaitingWithItsReason(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: v1.PodSpec{NodeName: "node-a", RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{
			Name: "app", Image: "busybox:1.37", ImagePullPolicy: v1.PullIfNotPresent,
			EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}}}},
		}}},
	}
	client := fake.NewClientset(pod.DeepCopy())
	pm := kubepod.NewBasicPodManager()
	pm.AddPod(pod)
	p := newPodPipeline(t, client, pm)
	p.sync(t, pod)
	require.Eventually(t, func() bool {
		got, err := client.CoreV1().Pods("default").Get(context.Background(), "web", metav1.GetOptions{})
		return err == nil && len(got.Status.ContainerStatuses) == 1 && got.Status.ContainerStatuses[0].State.Waiting != nil &&
			got.Status.ContainerStatuses[0].State.Waiting.Reason == "CreateContainerConfigError"
	}, 10*time.Second, 5*time.Millisecond)
	got, _ := client.CoreV1().Pods("default").Get(context.Background(), "web", metav1.GetOptions{})
	assert.Equal(t, v1.PodPending, got.Status.Phase)
	assert.Equal(t, `configmaps "nope" not found`, got.Status.ContainerStatuses[0].State.Waiting.Message, "the error as it is, as upstream's")
}

// BenchmarkPodToRunning measures one pod worker pass from nothing to a pod
// Running in the API (fake runtime on a socket, fake clientset), and the
// API writes it takes per pod.
func BenchmarkPodToRunning(b *testing.B) {
	client := fake.NewClientset()
	pm := kubepod.NewBasicPodManager()
	p := newPodPipeline(b, client, pm)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%d", i))},
			Spec: v1.PodSpec{NodeName: "node-a", RestartPolicy: v1.RestartPolicyAlways,
				Containers: []v1.Container{{Name: "app", Image: "busybox:1.37", ImagePullPolicy: v1.PullIfNotPresent}}},
		}
		if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		pm.AddPod(pod)
		p.sync(b, pod)
		for {
			got, err := client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
			if err == nil && got.Status.Phase == v1.PodRunning {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	b.StopTimer()
	writes := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" || a.GetVerb() == "update" {
			writes++
		}
	}
	b.ReportMetric(float64(writes)/float64(b.N), "status-writes/pod")
}
