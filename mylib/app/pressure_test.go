package app

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	testingclock "k8s.io/utils/clock/testing"

	"mykubelet/mylib/cadvisor"
	"mykubelet/mylib/config"
	"mykubelet/mylib/images"
	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/kubeletconfig"
	"mykubelet/mylib/options"
	kubepod "mykubelet/mylib/pod"
	"mykubelet/mylib/server"
	"mykubelet/mylib/stats"
)

// pressureServer parses args as a chapter program with AddFlags and
// AddNodePressureFlags would, and applies them.
func pressureServer(t *testing.T, args ...string) (*KubeletServer, error) {
	t.Helper()
	o := options.New("99-test")
	f := AddFlags(o, nil)
	p := AddNodePressureFlags(o)
	require.NoError(t, o.Parse(append([]string{"--state-dir", t.TempDir(), "--node-name", "n1"}, args...)))
	require.NoError(t, o.Complete())
	s := f.KubeletServer()
	return s, p.Apply(s)
}

func TestNodePressureFlagsApply(t *testing.T) {
	s, err := pressureServer(t, "--fake-memory-capacity", "1Gi", "--fake-nodefs-capacity", "2Gi", "--fake-imagefs-capacity", "500Mi",
		"--image-gc-period", "20s", "--eviction-hard", "memory.available<200Mi", "--eviction-pressure-transition-period", "30s",
		"--image-gc-high-threshold", "60", "--image-gc-low-threshold", "40", "--minimum-image-gc-age", "10s")
	require.NoError(t, err)
	assert.True(t, s.Eviction)
	assert.Equal(t, cadvisor.MockMachine{MemoryCapacity: 1 << 30, NodeFsCapacity: 2 << 30, ImageFsCapacity: 500 << 20}, s.MockMachine)
	assert.Equal(t, 20*time.Second, s.ImageGCPeriod)
	kc := s.KubeletConfiguration
	assert.Equal(t, map[string]string{"memory.available": "200Mi"}, kc.EvictionHard)
	assert.Equal(t, 30*time.Second, kc.EvictionPressureTransitionPeriod.Duration)
	assert.Equal(t, int32(60), *kc.ImageGCHighThresholdPercent)
	assert.Equal(t, int32(40), *kc.ImageGCLowThresholdPercent)
	assert.Equal(t, 10*time.Second, kc.ImageMinimumGCAge.Duration)
	assert.Empty(t, kc.Address, "Apply keeps what KubeletServer set: the API on the node IP only")
	assert.True(t, mainOptions(s).Admit, "the eviction manager refuses pods through admission")
}

// Without the flags: upstream's defaults, the host's machine, the image GC
// period of upstream's constant; still on.
func TestNodePressureFlagsDefaults(t *testing.T) {
	s, err := pressureServer(t)
	require.NoError(t, err)
	assert.True(t, s.Eviction)
	assert.True(t, s.MockMachine.IsZero(), "the host's figures")
	assert.Equal(t, images.ImageGCPeriod, s.ImageGCPeriod)
	assert.Equal(t, "100Mi", s.KubeletConfiguration.EvictionHard["memory.available"])
	assert.Equal(t, int32(85), *s.KubeletConfiguration.ImageGCHighThresholdPercent)
	assert.Equal(t, 5*time.Minute, s.KubeletConfiguration.EvictionPressureTransitionPeriod.Duration)
	assert.False(t, mainOptions(&KubeletServer{}).Admit, "no eviction, no admission unless asked")
}

func TestNodePressureFlagsRefuseBadValues(t *testing.T) {
	for _, tt := range []struct{ arg, want string }{
		{"--fake-memory-capacity=lots", `invalid value "lots" for flag -fake-memory-capacity: want a size such as 1Gi or 500Mi, got "lots"`},
		{"--fake-imagefs-capacity=-1Gi", `want a size such as 1Gi or 500Mi`},
		{"--image-gc-period=0s", `invalid value "0s" for flag -image-gc-period: want a positive duration such as 30s or 5m, got "0s"`},
		{"--eviction-hard=memory.available>1Gi", `for flag -eviction-hard: "memory.available>1Gi": want signal<value pairs`},
	} {
		t.Run(tt.arg, func(t *testing.T) {
			o := options.New("99-test")
			AddNodePressureFlags(o)
			err := o.Parse([]string{tt.arg})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	_, err := pressureServer(t, "--eviction-soft", "memory.available<300Mi")
	assert.EqualError(t, err, "node pressure flags: eviction thresholds: grace period must be specified for the soft eviction threshold memory.available")
	_, err = pressureServer(t, "--image-gc-high-threshold", "50", "--image-gc-low-threshold", "50")
	assert.ErrorContains(t, err, "imageGCLowThresholdPercent (--image-gc-low-threshold) 50 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 50")
}

// The capstone's flag set: the course's flags alone, with their help.
func TestMockMachineFlagsOnAFlagSet(t *testing.T) {
	fs := flag.NewFlagSet("mykubelet", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	m := AddMockMachineFlags(fs)
	require.NoError(t, fs.Parse([]string{"--fake-memory-capacity", "512Mi"}))
	s := &KubeletServer{}
	m.Apply(s)
	assert.Equal(t, cadvisor.MockMachine{MemoryCapacity: 512 << 20}, s.MockMachine)
	assert.Equal(t, images.ImageGCPeriod, s.ImageGCPeriod)
	var help strings.Builder
	fs.SetOutput(&help)
	fs.PrintDefaults()
	assert.Contains(t, help.String(), "(the course's flag; default: the host's)")
	assert.Contains(t, help.String(), "(default 5m0s)")
}

// One provider for the eviction manager and the kubelet API: built before
// the Kubelet, handed over as Dependencies.StatsProvider, and served by
// the endpoints.
func TestStatsProviderIsSharedWithTheEndpoints(t *testing.T) {
	s := &KubeletServer{KubeletConfiguration: &kubeletv1beta1.KubeletConfiguration{PodLogsDir: t.TempDir()}, Stats: true,
		MainOptions: kubelet.MainOptions{NodeName: "n1", RootDirectory: t.TempDir(), Eviction: true,
			MockMachine: cadvisor.MockMachine{MemoryCapacity: 1 << 30}}}
	deps := &kubelet.Dependencies{RemoteRuntimeService: runtimeapi.NewRuntimeServiceClient(nil),
		RemoteImageService: runtimeapi.NewImageServiceClient(nil)}
	statsDependencies(deps)
	host := &lateHost{}
	require.NoError(t, statsProviderDependency(s, deps, host))
	require.IsType(t, &stats.Provider{}, deps.StatsProvider)

	cfg := &server.Config{NodeName: "n1"}
	require.NoError(t, statsEndpoints(cfg, s, &fakeHost{pods: kubepod.NewBasicPodManager()}, deps))
	assert.Same(t, deps.StatsProvider, cfg.Summary, "the summary the kubelet API serves is the eviction manager's")

	// A program's own provider is kept.
	mine := deps.StatsProvider
	require.NoError(t, statsProviderDependency(s, deps, &lateHost{}))
	assert.Same(t, mine, deps.StatsProvider)
}

// The provider, built before the Kubelet, sees no pods until the Kubelet
// is set, then the Kubelet's pods and their volumes.
func TestLateHostFollowsTheKubeletOnceSet(t *testing.T) {
	host := &lateHost{}
	assert.Empty(t, host.pods())
	assert.Empty(t, host.volumes("u1"))

	pods := kubepod.NewBasicPodManager()
	pods.AddPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1"}})
	host.set(&fakeHost{pods: pods, volumes: map[types.UID]map[string]string{"u1": {"data": "/v/data", "cache": "/v/cache"}}})
	require.Len(t, host.pods(), 1)
	assert.Equal(t, "p", host.pods()[0].Name)
	assert.Equal(t, []stats.VolumeInfo{{Name: "cache", Path: "/v/cache"}, {Name: "data", Path: "/v/data"}}, host.volumes("u1"))
}

// createAndInitKubelet with Eviction: the stats provider is made before
// the Kubelet and handed to it (Dependencies.StatsProvider), on the mock
// machine's sizes, and the Kubelet is made with admission on.
func TestCreateAndInitKubeletGivesTheKubeletTheStatsProvider(t *testing.T) {
	dir, err := os.MkdirTemp("", "app") // short: a unix socket's path is at most 107 bytes
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o700))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	kc := &kubeletv1beta1.KubeletConfiguration{ContainerRuntimeEndpoint: "unix://" + filepath.Join(dir, "cri.sock"), PodLogsDir: filepath.Join(dir, "logs")}
	kubeletconfig.SetDefaults(kc)
	s := &KubeletServer{KubeletConfiguration: kc, FakeRuntime: true,
		MainOptions: kubelet.MainOptions{NodeName: "n1", RootDirectory: dir, RunContainers: true, Eviction: true,
			MockMachine: cadvisor.MockMachine{MemoryCapacity: 1 << 30, ImageFsCapacity: 500 << 20}}}
	clk := testingclock.NewFakeClock(time.Now())
	deps := &kubelet.Dependencies{Clock: clk, KubeClient: fake.NewClientset(), EventClient: fake.NewClientset(),
		Recorder: record.NewFakeRecorder(100), PodConfig: config.NewPodConfig(clk)}
	rt, err := PreInitRuntimeService(ctx, &wg, s, deps)
	require.NoError(t, err)
	defer rt.Close()

	kl, err := createAndInitKubelet(s, deps)
	require.NoError(t, err)
	require.NotNil(t, kl)
	p, ok := deps.StatsProvider.(*stats.Provider)
	require.True(t, ok, "the Kubelet reads a stats.Provider")
	summary, err := p.Get(ctx, true)
	require.NoError(t, err)
	require.NotNil(t, summary.Node.Memory)
	assert.Equal(t, uint64(1<<30), *summary.Node.Memory.AvailableBytes+*summary.Node.Memory.WorkingSetBytes,
		"the capacity (available + working set) is the mock machine's memory, not the host's")
}

// A real runtime's kubelet gives hostNetwork pods the node's /etc/hosts
// (with their hostAliases), as upstream; the mock runtime's none.
func TestMainOptionsNodeHostsFileOnARealRuntime(t *testing.T) {
	assert.Equal(t, "/etc/hosts", mainOptions(&KubeletServer{}).NodeHostsFile)
	assert.Empty(t, mainOptions(&KubeletServer{FakeRuntime: true}).NodeHostsFile)
	assert.Equal(t, "/", mainOptions(&KubeletServer{}).HostPathRoot, "a hostPath is the machine's own path")
	assert.Empty(t, mainOptions(&KubeletServer{FakeRuntime: true}).HostPathRoot, "<root-dir>/host: the mock's pods never reach the machine's files")
}
