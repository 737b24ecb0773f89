package kubelet

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	testingclock "k8s.io/utils/clock/testing"

	"mykubelet/mylib/cadvisor"
	"mykubelet/mylib/config"
	"mykubelet/mylib/eviction"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/kubeletconfig"
	"mykubelet/mylib/kuberuntime"
)

// criDeps are Dependencies with the mock runtime's CRI clients.
func criDeps(t *testing.T, clk *testingclock.FakeClock, podConfig *config.PodConfig) *Dependencies {
	t.Helper()
	m, err := kuberuntime.Connect(context.Background(), "unix://"+fakeruntimetest.Serve(t, fakeruntime.New(clk)), clk)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return &Dependencies{KubeClient: fake.NewClientset(), PodConfig: podConfig,
		RemoteRuntimeService: m.RuntimeService(), RemoteImageService: m.ImageService(), Clock: clk}
}

func TestNewMainKubeletReadsTheKubeletConfiguration(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	kc := &kubeletv1beta1.KubeletConfiguration{NodeStatusUpdateFrequency: metav1.Duration{Duration: 4 * time.Second}, PodLogsDir: t.TempDir()}
	kubeletconfig.SetDefaults(kc)
	deps := criDeps(t, clk, config.NewPodConfig(clk))
	kl, err := NewMainKubelet(kc, deps, MainOptions{NodeName: "n1", RootDirectory: t.TempDir(), Annotations: map[string]string{"a": "b"}, RunContainers: true})
	require.NoError(t, err)
	require.NotNil(t, kl.node, "the node half")
	assert.NotNil(t, kl.podManager, "the pod half")
	assert.Same(t, kl.podManager, kl.GetPodManager())
	assert.Equal(t, 4*time.Second, kl.node.nodeStatusUpdateFrequency)
	assert.Equal(t, 4*time.Second, kl.node.nodeStatusReportFrequency, "the report frequency follows the update frequency when only that is set")
	assert.Equal(t, map[string]string{"a": "b"}, kl.node.annotations)
	require.NotNil(t, kl.containerRuntime, "the runtime manager, built from the CRI clients")
	assert.Equal(t, "mykubelet-fake", kl.containerRuntime.Type())
	assert.NotNil(t, kl.statusManager, "RunContainers: a status manager")
}

func TestNewMainKubeletNeedsItsParts(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	kc := &kubeletv1beta1.KubeletConfiguration{}
	kubeletconfig.SetDefaults(kc)
	opts := MainOptions{NodeName: "n1", RootDirectory: t.TempDir()}
	_, err := NewMainKubelet(kc, criDeps(t, clk, nil), opts)
	assert.ErrorContains(t, err, "Dependencies.PodConfig is required")

	deps := criDeps(t, clk, config.NewPodConfig(clk))
	_, err = NewMainKubelet(kc, deps, MainOptions{NodeName: "n1"})
	assert.ErrorContains(t, err, "RootDirectory is required")

	opts.ContainerLogRotation = true
	_, err = NewMainKubelet(&kubeletv1beta1.KubeletConfiguration{}, deps, opts)
	assert.ErrorContains(t, err, "needs a defaulted KubeletConfiguration")
}

// TestNewMainKubeletWithEvictionBuildsTheManagers: MainOptions.Eviction
// reads the KubeletConfiguration's eviction and image fields into the
// managers, and the mock machine's sizes reach the node's capacity.
func TestNewMainKubeletWithEvictionBuildsTheManagers(t *testing.T) {
	em, ig := useFakeManagers(t)
	old := parseThresholdConfig
	parseThresholdConfig = func(hard, _, _, _ map[string]string) ([]eviction.Threshold, error) {
		return []eviction.Threshold{{Signal: eviction.Signal(strings.Join(slices.Sorted(maps.Keys(hard)), ","))}}, nil
	}
	t.Cleanup(func() { parseThresholdConfig = old })
	clk := testingclock.NewFakeClock(t0)
	kc := &kubeletv1beta1.KubeletConfiguration{PodLogsDir: t.TempDir(),
		EvictionHard: map[string]string{"memory.available": "100Mi"}, EvictionPressureTransitionPeriod: metav1.Duration{Duration: 30 * time.Second}}
	kubeletconfig.SetDefaults(kc)
	deps := criDeps(t, clk, config.NewPodConfig(clk))
	opts := MainOptions{NodeName: "n1", RootDirectory: t.TempDir(), RunContainers: true, Admit: true, Eviction: true,
		ImageGCPeriod: time.Minute, MockMachine: cadvisor.MockMachine{MemoryCapacity: 1 << 30}}
	_, err := NewMainKubelet(kc, deps, opts)
	assert.EqualError(t, err, "kubelet: MainOptions.Eviction needs Dependencies.StatsProvider")

	deps.StatsProvider = fakeStats{}
	kl, err := NewMainKubelet(kc, deps, opts)
	require.NoError(t, err)
	require.NotNil(t, kl.nodePressure)
	assert.Equal(t, time.Minute, kl.nodePressure.imageGCPeriod)
	assert.Equal(t, eviction.MonitoringInterval, kl.nodePressure.monitoringInterval)
	assert.Equal(t, eviction.Config{PressureTransitionPeriod: 30 * time.Second,
		Thresholds: []eviction.Threshold{{Signal: "memory.available"}}}, em.config)
	assert.Equal(t, 85, ig.policy.HighThresholdPercent)

	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	for _, s := range kl.node.setters {
		require.NoError(t, s(context.Background(), node))
	}
	assert.Equal(t, "1Gi", node.Status.Capacity.Memory().String(), "the mock machine's memory")
}
