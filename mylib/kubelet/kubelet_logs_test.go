package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/logs"
)

func TestContainerLogsAreRotatedEveryMonitorInterval(t *testing.T) {
	kl, m, clk, _ := lifecycleKubelet(t, PodsConfig{ContainerLogs: &logs.Config{MaxSize: "1Ki", MaxFiles: 2}})
	require.NotNil(t, kl.containerLogManager)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = kl.RunPods(ctx) }()
	defer func() { cancel(); <-done }()

	chatty := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "chatty", Namespace: "default", UID: "uid-chatty"},
		Spec: v1.PodSpec{NodeName: "n1", RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "app", Image: "busybox:1.37",
			Command: []string{"sh", "-c", `i=0; while [ $i -lt 100 ]; do echo "line $i"; i=$((i+1)); done; sleep 3600`}}}},
	}
	runPod(t, m, chatty)
	list, err := m.RuntimeService().ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	require.NoError(t, err)
	require.Len(t, list.Containers, 1)
	st, err := m.RuntimeService().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: list.Containers[0].Id})
	require.NoError(t, err)
	path := st.Status.LogPath
	require.Eventually(t, func() bool {
		fi, err := os.Stat(path)
		return err == nil && fi.Size() > 1024
	}, 5*time.Second, time.Millisecond, "the container's log grows over 1Ki")
	pattern := path + "*"
	require.Eventually(t, func() bool {
		clk.Step(logs.DefaultContainerLogMonitorInterval) // the default interval: the Kubelet's clock drives the manager
		files, _ := filepath.Glob(pattern)
		return len(files) == 2
	}, 5*time.Second, 10*time.Millisecond, "0.log and 0.log.<time stamp>")
}

func TestContainerLogsNeedRunContainers(t *testing.T) {
	_, err := New(Config{Client: fake.NewClientset(), NodeName: "n1", Pods: &PodsConfig{Updates: make(chan kubetypes.PodUpdate),
		WithoutWorkers: true, ContainerLogs: &logs.Config{}}})
	assert.ErrorContains(t, err, "ContainerLogs needs RunContainers")
}
