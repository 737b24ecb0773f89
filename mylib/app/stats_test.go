package app

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/metrics"
	kubepod "mykubelet/mylib/pod"
	"mykubelet/mylib/server"
	"mykubelet/mylib/stats"
)

// fakeHost is the Kubelet as the endpoints see it: a pod manager, each
// pod's volumes, and health checks that say which was called.
type fakeHost struct {
	pods    kubepod.Manager
	volumes map[types.UID]map[string]string
	called  []string
}

func (h *fakeHost) GetPodManager() kubepod.Manager { return h.pods }
func (h *fakeHost) ListVolumesForPod(uid types.UID) map[string]string {
	return h.volumes[uid]
}
func (h *fakeHost) SyncLoopHealthCheck(*http.Request) error {
	h.called = append(h.called, "syncloop")
	return errors.New("syncloop is stuck")
}
func (h *fakeHost) PLEGHealthCheck(*http.Request) error {
	h.called = append(h.called, "pleg")
	return nil
}

func statsServer(t *testing.T) (*server.Config, *fakeHost, *KubeletServer, *kubelet.Dependencies) {
	t.Helper()
	h := &fakeHost{pods: kubepod.NewBasicPodManager()}
	kc := &kubeletv1beta1.KubeletConfiguration{PodLogsDir: t.TempDir(), MaxPods: 110}
	s := &KubeletServer{KubeletConfiguration: kc, Stats: true,
		MainOptions: kubelet.MainOptions{NodeName: "n1", RootDirectory: t.TempDir()}}
	deps := &kubelet.Dependencies{RemoteRuntimeService: runtimeapi.NewRuntimeServiceClient(nil),
		RemoteImageService: runtimeapi.NewImageServiceClient(nil)}
	statsDependencies(deps)
	cfg := &server.Config{NodeName: "n1"}
	require.NoError(t, statsEndpoints(cfg, s, h, deps))
	return cfg, h, s, deps
}

// With Stats, every optional endpoint of the server has its handler: none
// is left to answer 404.
func TestStatsFillsEveryOptionalEndpoint(t *testing.T) {
	cfg, _, s, deps := statsServer(t)
	assert.NotNil(t, cfg.Summary, "/stats/summary")
	assert.IsType(t, &stats.Provider{}, cfg.Summary)
	assert.NotNil(t, cfg.ResourceMetrics, "/metrics/resource")
	assert.NotNil(t, cfg.Metrics, "/metrics")
	assert.NotNil(t, cfg.ProbeMetrics, "/metrics/probes")
	require.NotNil(t, cfg.Configz, "/configz")
	assert.Same(t, s.KubeletConfiguration, cfg.Configz(), "/configz shows the configuration the kubelet runs with")
	assert.NotNil(t, deps.Metrics, "the kubelet records its series")
}

// /healthz's checks are upstream's syncloop and the PLEG's, by those
// names, each calling the Kubelet's own.
func TestStatsHealthChecksAreTheKubeletsSyncLoopAndPLEG(t *testing.T) {
	cfg, h, _, _ := statsServer(t)
	require.Len(t, cfg.HealthChecks, 2)
	assert.Equal(t, "syncloop", cfg.HealthChecks[0].Name)
	assert.Equal(t, "pleg", cfg.HealthChecks[1].Name)
	r := httptest.NewRequest(http.MethodGet, "/healthz", nil)
	assert.EqualError(t, cfg.HealthChecks[0].Check(r), "syncloop is stuck")
	assert.NoError(t, cfg.HealthChecks[1].Check(r))
	assert.Equal(t, []string{"syncloop", "pleg"}, h.called)
}

// A program's own Metrics are kept (the capstone's tests may bring
// theirs); without, each kubelet gets a registry of its own.
func TestStatsDependenciesKeepTheProgramsMetrics(t *testing.T) {
	m := metrics.New()
	deps := &kubelet.Dependencies{Metrics: m}
	statsDependencies(deps)
	assert.Same(t, m, deps.Metrics)
	a, b := &kubelet.Dependencies{}, &kubelet.Dependencies{}
	statsDependencies(a)
	statsDependencies(b)
	require.NotNil(t, a.Metrics)
	// (A zero-size stub of metrics.Metrics would make the two pointers
	// equal: this holds once Metrics has its registry.)
	assert.NotSame(t, a.Metrics, b.Metrics, "one kubelet's series are not another's")
}

// The provider needs the runtime: a Dependencies without it is an error,
// not a summary that panics at the first scrape.
func TestStatsEndpointsNeedTheRuntime(t *testing.T) {
	s := &KubeletServer{KubeletConfiguration: &kubeletv1beta1.KubeletConfiguration{}, Stats: true,
		MainOptions: kubelet.MainOptions{NodeName: "n1", RootDirectory: t.TempDir()}}
	err := statsEndpoints(&server.Config{}, s, &fakeHost{pods: kubepod.NewBasicPodManager()}, &kubelet.Dependencies{})
	assert.Error(t, err)
}

func TestVolumeInfosAreSortedByName(t *testing.T) {
	assert.Equal(t, []stats.VolumeInfo{{Name: "a", Path: "/p/a"}, {Name: "kube-api-access-x", Path: "/p/k"}, {Name: "z", Path: "/p/z"}},
		volumeInfos(map[string]string{"z": "/p/z", "a": "/p/a", "kube-api-access-x": "/p/k"}))
	assert.Empty(t, volumeInfos(nil))
}

// The pods' work is in this process with the mock runtime served here,
// unless the mock walls its scripts in a sandbox process (root, real
// clock); never with a runtime of its own.
func TestPodsInProcess(t *testing.T) {
	assert.False(t, podsInProcess(&KubeletServer{FakeRuntime: false}, clock.RealClock{}), "a runtime of its own")
	assert.True(t, podsInProcess(&KubeletServer{FakeRuntime: true}, testingclock.NewFakeClock(time.Now())), "a fake clock keeps the scripts in process")
	assert.Equal(t, os.Geteuid() != 0, podsInProcess(&KubeletServer{FakeRuntime: true}, clock.RealClock{}), "root on the real clock: the sandbox process")
}
