package app

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	testingclock "k8s.io/utils/clock/testing"

	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/kubeletconfig"
	"mykubelet/mylib/options"
	"mykubelet/mylib/volume"
)

func TestFlagsMakeTheKubeletConfiguration(t *testing.T) {
	dir := t.TempDir()
	o := options.New("99-test")
	f := AddFlags(o, nil)
	require.NoError(t, o.Parse([]string{"--state-dir", dir, "--node-name", "n1", "--max-pods", "7",
		"--pod-manifest-path", filepath.Join(dir, "m"), "--file-check-frequency", "5s", "--housekeeping-interval", "3s",
		"--container-runtime-endpoint", "unix:///run/x.sock", "--fake-runtime=false", "--relist-period", "2s", "--node-ip", "10.1.2.3"}))
	require.NoError(t, o.Complete())
	s := f.KubeletServer()
	kc := s.KubeletConfiguration

	assert.Equal(t, filepath.Join(dir, "m"), kc.StaticPodPath)
	assert.Equal(t, 5*time.Second, kc.FileCheckFrequency.Duration)
	assert.Equal(t, "unix:///run/x.sock", kc.ContainerRuntimeEndpoint)
	assert.EqualValues(t, 7, kc.MaxPods)
	assert.Equal(t, filepath.Join(dir, "pod-logs"), kc.PodLogsDir, "--pod-logs-dir defaults into the state directory")
	assert.Empty(t, kc.Address, "the kubelet API listens on the node IP only")
	assert.EqualValues(t, kubeletconfig.DefaultPort, kc.Port)
	require.NotNil(t, kc.KubeAPIQPS)
	assert.EqualValues(t, kubelet.DefaultKubeAPIQPS, *kc.KubeAPIQPS, "the kubelet's rates, not client-go's")
	assert.EqualValues(t, kubelet.DefaultEventBurst, kc.EventBurst)

	assert.False(t, s.FakeRuntime)
	assert.Equal(t, "n1", s.NodeName)
	assert.Equal(t, "10.1.2.3", s.NodeIP.String())
	assert.Equal(t, dir, s.RootDirectory)
	assert.Equal(t, filepath.Join(dir, "pki"), s.CertDirectory)
	assert.Equal(t, 2*time.Second, s.RelistPeriod)
	assert.Equal(t, 3*time.Second, s.HousekeepingPeriod)
	assert.Equal(t, map[string]string{options.ChapterAnnotation: "99-test"}, s.Annotations)
	assert.True(t, s.RunContainers)
	assert.False(t, s.Probes || s.Admit || s.ActiveDeadline || s.EnableServer || s.ContainerGC != nil, "a program turns on its own parts")
}

func TestFlagsDefaults(t *testing.T) {
	dir := t.TempDir()
	o := options.New("99-test")
	f := AddFlags(o, net.IPv4(127, 0, 0, 1))
	require.NoError(t, o.Parse([]string{"--state-dir", dir, "--pod-logs-dir", filepath.Join(dir, "logs")}))
	require.NoError(t, o.Complete())
	s := f.KubeletServer()
	assert.True(t, s.FakeRuntime)
	assert.Equal(t, "127.0.0.1", s.NodeIP.String(), "AddFlags' node IP is the default")
	assert.Equal(t, filepath.Join(dir, "logs"), s.KubeletConfiguration.PodLogsDir)
	assert.Equal(t, filepath.Join(dir, "manifests"), s.KubeletConfiguration.StaticPodPath)
	assert.Equal(t, "unix://"+filepath.Join(dir, "mykubelet.sock"), s.KubeletConfiguration.ContainerRuntimeEndpoint)
	assert.Contains(t, o.Flags.Lookup("node-ip").Usage, "serving certificate")
}

func TestClientCA(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ca.crt")
	require.NoError(t, os.WriteFile(file, []byte("from the file"), 0o600))

	b, err := ClientCA(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: []byte("inline")}}, "")
	require.NoError(t, err)
	assert.Equal(t, "inline", string(b), "the node kubeconfig's CA")

	b, err = ClientCA(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: []byte("inline")}}, file)
	require.NoError(t, err)
	assert.Equal(t, "from the file", string(b), "the client CA file wins")

	b, err = ClientCA(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAFile: file}}, "")
	require.NoError(t, err)
	assert.Equal(t, "from the file", string(b), "the kubeconfig's CA file")

	_, err = ClientCA(&rest.Config{}, "")
	assert.EqualError(t, err, "no client CA: the node kubeconfig has no CA and no client CA file is set (--client-ca-file, authentication.x509.clientCAFile)")

	missing := filepath.Join(dir, "missing.crt")
	_, err = ClientCA(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: []byte("inline")}}, missing)
	assert.EqualError(t, err, "client CA "+missing+": open "+missing+": no such file or directory")
}

func TestStoppedSaysWhatStoppedByTheRuntimeMode(t *testing.T) {
	assert.Equal(t, "stopped (the containers keep running in the runtime; started again, the kubelet adopts them)",
		stopped(&KubeletServer{FakeRuntime: false, PodNetwork: true}), "a runtime of its own: nothing stops")
	assert.Equal(t, "stopped (the mock runtime, its containers and its pod network with it)", stopped(&KubeletServer{FakeRuntime: true, PodNetwork: true}))
	assert.Equal(t, "stopped (the mock runtime, and its containers, with it)", stopped(&KubeletServer{FakeRuntime: true}))
}

// TestPreInitRuntimeServiceServesTheMockAndItsControlAPI: with FakeRuntime,
// the mock is served on the endpoint and connected to; the probes may dial
// loopback only (no pod network asked for).
func TestPreInitRuntimeServiceServesTheMockAndItsControlAPI(t *testing.T) {
	dir, err := os.MkdirTemp("", "app") // short: a unix socket's path is at most 107 bytes
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o700))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	s := &KubeletServer{FakeRuntime: true, ControlAddress: filepath.Join(dir, "control.sock"),
		KubeletConfiguration: &kubeletv1beta1.KubeletConfiguration{ContainerRuntimeEndpoint: "unix://" + filepath.Join(dir, "cri.sock")}}
	deps := &kubelet.Dependencies{Clock: testingclock.NewFakeClock(time.Now())}
	rt, err := PreInitRuntimeService(ctx, &wg, s, deps)
	require.NoError(t, err)
	defer rt.Close()
	assert.Equal(t, "mykubelet-fake", rt.Type())
	assert.Equal(t, rt.RuntimeService(), deps.RemoteRuntimeService)
	assert.Equal(t, rt.ImageService(), deps.RemoteImageService)
	_, err = os.Stat(filepath.Join(dir, "control.sock"))
	assert.NoError(t, err, "the control API listens")

	require.NotNil(t, deps.ProbeDial)
	dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
	defer dcancel()
	_, err = deps.ProbeDial(dctx, "tcp", "10.88.0.2:80")
	assert.ErrorContains(t, err, "outside the networks this kubelet may reach")
}

func TestMountRootsAreThePodsAndHostDirectories(t *testing.T) {
	assert.Equal(t, []string{"/r/pods", "/r/host"}, mountRoots("/r", ""))
	assert.Equal(t, []string{"/r/pods", "/srv/host"}, mountRoots("/r", "/srv/host"), "--host-path-root")
	wd, err := os.Getwd()
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(wd, "state", "pods"), filepath.Join(wd, "state", "host")}, mountRoots("state", ""), "absolute, as CRI mounts are")
}

func TestVolumeDependenciesKeepPluginsGiven(t *testing.T) {
	deps := &kubelet.Dependencies{VolumePlugins: []volume.VolumePlugin{nil}}
	volumeDependencies(deps, "n1", time.Minute, false)
	assert.Len(t, deps.VolumePlugins, 1, "a program's own plugins are kept")
}

// TestTokenRequestsGoThroughTheTokenClient: with a TokenClient the token
// manager's TokenRequests go there, not through KubeClient; without one,
// through KubeClient, as upstream.
func TestTokenRequestsGoThroughTheTokenClient(t *testing.T) {
	tokenCreates := func(c *fake.Clientset) (n int) {
		for _, a := range c.Actions() {
			if a.GetVerb() == "create" && a.GetResource().Resource == "serviceaccounts" && a.GetSubresource() == "token" {
				n++
			}
		}
		return n
	}
	request := func(deps *kubelet.Dependencies) {
		volumeDependencies(deps, "n1", time.Minute, false)
		exp := int64(3600)
		_, err := deps.TokenManager.GetServiceAccountToken("default", "default", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}})
		require.NoError(t, err)
	}
	// A fake API server that answers every TokenRequest.
	answering := func() *fake.Clientset {
		c := fake.NewClientset()
		c.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
			tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest).DeepCopy()
			tr.Status = authenticationv1.TokenRequestStatus{Token: "t", ExpirationTimestamp: metav1.NewTime(time.Now().Add(time.Hour))}
			return true, tr, nil
		})
		return c
	}
	main, tokens := answering(), answering()
	request(&kubelet.Dependencies{KubeClient: main, TokenClient: tokens, Clock: testingclock.NewFakeClock(time.Now())})
	assert.Equal(t, 1, tokenCreates(tokens))
	assert.Equal(t, 0, tokenCreates(main))

	main = answering()
	request(&kubelet.Dependencies{KubeClient: main, Clock: testingclock.NewFakeClock(time.Now())})
	assert.Equal(t, 1, tokenCreates(main), "no TokenClient: KubeClient, as upstream")
}

func TestVolumeDependenciesAreUpstreamsPluginsAndManagers(t *testing.T) {
	deps := &kubelet.Dependencies{KubeClient: fake.NewClientset()}
	volumeDependencies(deps, "n1", time.Minute, false)
	var names []string
	for _, p := range deps.VolumePlugins {
		names = append(names, p.GetPluginName())
	}
	assert.ElementsMatch(t, []string{"kubernetes.io/empty-dir", "kubernetes.io/configmap", "kubernetes.io/secret",
		"kubernetes.io/projected", "kubernetes.io/downward-api", "kubernetes.io/host-path", "kubernetes.io/image"}, names)
	assert.NotNil(t, deps.ConfigMapManager)
	assert.NotNil(t, deps.SecretManager)
	assert.NotNil(t, deps.TokenManager)
}
