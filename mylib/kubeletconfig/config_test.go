package kubeletconfig

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubelet-config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func parse(t *testing.T, args ...string) (*Flags, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return f, nil
}

func TestDefaultsAreUpstreams(t *testing.T) {
	f, err := parse(t)
	require.NoError(t, err)
	kc, err := f.KubeletConfiguration()
	require.NoError(t, err)
	assert.Equal(t, "0.0.0.0", kc.Address)
	assert.Equal(t, int32(10250), kc.Port)
	assert.Equal(t, time.Minute, kc.SyncFrequency.Duration)
	assert.Equal(t, 20*time.Second, kc.FileCheckFrequency.Duration)
	assert.Equal(t, 10*time.Second, kc.NodeStatusUpdateFrequency.Duration)
	assert.Equal(t, 5*time.Minute, kc.NodeStatusReportFrequency.Duration)
	assert.Equal(t, int32(40), kc.NodeLeaseDurationSeconds)
	assert.Equal(t, int32(50), *kc.KubeAPIQPS)
	assert.Equal(t, int32(100), kc.KubeAPIBurst)
	assert.Equal(t, int32(50), *kc.EventRecordQPS)
	assert.Equal(t, int32(100), kc.EventBurst)
	assert.Equal(t, int32(110), kc.MaxPods)
	assert.Equal(t, "unix:///run/containerd/containerd.sock", kc.ContainerRuntimeEndpoint)
	assert.False(t, *kc.Authentication.Anonymous.Enabled)
	assert.True(t, *kc.Authentication.Webhook.Enabled)
	assert.Equal(t, 2*time.Minute, kc.Authentication.Webhook.CacheTTL.Duration)
	assert.Equal(t, kubeletv1beta1.KubeletAuthorizationModeWebhook, kc.Authorization.Mode)
	assert.Equal(t, 5*time.Minute, kc.Authorization.Webhook.CacheAuthorizedTTL.Duration)
	assert.Equal(t, 30*time.Second, kc.Authorization.Webhook.CacheUnauthorizedTTL.Duration)
	assert.False(t, kc.RotateCertificates)
	assert.False(t, kc.ServerTLSBootstrap)
	assert.Empty(t, kc.StaticPodPath, "no static pods unless asked")
	assert.Equal(t, "10Mi", kc.ContainerLogMaxSize)
	assert.Equal(t, int32(5), *kc.ContainerLogMaxFiles)
	assert.Equal(t, int32(1), *kc.ContainerLogMaxWorkers)
	assert.Equal(t, 10*time.Second, kc.ContainerLogMonitorInterval.Duration)
}

func TestContainerLogRotationFields(t *testing.T) {
	f, err := parse(t, "--config", writeConfig(t, header+"containerLogMaxSize: 256Ki\ncontainerLogMaxFiles: 3\ncontainerLogMaxWorkers: 2\ncontainerLogMonitorInterval: 5s\n"))
	require.NoError(t, err)
	kc, err := f.KubeletConfiguration()
	require.NoError(t, err)
	assert.Equal(t, "256Ki", kc.ContainerLogMaxSize)
	assert.Equal(t, int32(3), *kc.ContainerLogMaxFiles)
	assert.Equal(t, int32(2), *kc.ContainerLogMaxWorkers)
	assert.Equal(t, 5*time.Second, kc.ContainerLogMonitorInterval.Duration)
}

func TestReportFrequencyFollowsAnUpdateFrequencyGivenAlone(t *testing.T) {
	f, err := parse(t, "--config", writeConfig(t, header+"nodeStatusUpdateFrequency: 4s\n"))
	require.NoError(t, err)
	kc, err := f.KubeletConfiguration()
	require.NoError(t, err)
	assert.Equal(t, 4*time.Second, kc.NodeStatusUpdateFrequency.Duration)
	assert.Equal(t, 4*time.Second, kc.NodeStatusReportFrequency.Duration, "as upstream, for backward compatibility")
}

func TestFileValuesAndRelativePaths(t *testing.T) {
	path := writeConfig(t, header+`
address: 127.0.0.1
port: 10260
staticPodPath: manifests
maxPods: 20
rotateCertificates: true
serverTLSBootstrap: true
kubeAPIQPS: 0
authentication:
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
  anonymous:
    enabled: false
authorization:
  mode: AlwaysAllow
`)
	f, err := parse(t, "--config", path)
	require.NoError(t, err)
	kc, err := f.KubeletConfiguration()
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", kc.Address)
	assert.Equal(t, int32(10260), kc.Port)
	assert.Equal(t, filepath.Join(filepath.Dir(path), "manifests"), kc.StaticPodPath, "relative to the file, as upstream")
	assert.Equal(t, "/etc/kubernetes/pki/ca.crt", kc.Authentication.X509.ClientCAFile)
	assert.Equal(t, int32(20), kc.MaxPods)
	assert.True(t, kc.RotateCertificates)
	assert.True(t, kc.ServerTLSBootstrap)
	assert.Equal(t, int32(0), *kc.KubeAPIQPS, "an explicit 0 is kept: the field is a pointer")
	assert.Equal(t, kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow, kc.Authorization.Mode)
}

func TestFlagsGivenWinOverTheFile(t *testing.T) {
	path := writeConfig(t, header+"maxPods: 20\nstaticPodPath: /etc/kubernetes/manifests\ncontainerRuntimeEndpoint: unix:///run/from-file.sock\nrotateCertificates: true\n")
	f, err := parse(t, "--config", path, "--max-pods=7", "--rotate-certificates=false", "--rotate-server-certificates",
		"--kubeconfig", "/k", "--bootstrap-kubeconfig", "/b", "--cert-dir", "/pki", "--node-ip", "127.0.0.1", "--hostname-override", "learner-1")
	require.NoError(t, err)
	kc, err := f.KubeletConfiguration()
	require.NoError(t, err)
	assert.Equal(t, int32(7), kc.MaxPods, "flag over file")
	assert.False(t, kc.RotateCertificates, "flag over file, even to false")
	assert.True(t, kc.ServerTLSBootstrap, "flag over default")
	assert.Equal(t, "/etc/kubernetes/manifests", kc.StaticPodPath, "not given as a flag: the file's")
	assert.Equal(t, "unix:///run/from-file.sock", kc.ContainerRuntimeEndpoint, "a flag's default does not override the file")
	assert.Equal(t, "/k", f.Kubeconfig)
	assert.Equal(t, "/b", f.BootstrapKubeconfig)
	assert.Equal(t, "/pki", f.CertDir)
	assert.Equal(t, "127.0.0.1", f.NodeIP.String())
	assert.Equal(t, "learner-1", f.HostnameOverride)

	f, err = parse(t, "--config", writeConfig(t, header+"port: 10260\naddress: 127.0.0.1\n"), "--port", "10270")
	require.NoError(t, err)
	kc, err = f.KubeletConfiguration()
	require.NoError(t, err)
	assert.Equal(t, int32(10270), kc.Port, "--port over the file")
	assert.Equal(t, "127.0.0.1", kc.Address, "not given as a flag: the file's")
}

func TestStrictErrorsNameTheFieldAndTheFile(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"unknown field", header + "maxpods: 3\n", `strict decoding error: unknown field "maxpods"`},
		{"unknown nested field", header + "authentication:\n  x509:\n    caFile: /x\n", `unknown field "authentication.x509.caFile"`},
		{"repeated field", header + "maxPods: 3\nmaxPods: 4\n", `"maxPods"`},
		{"unsupported field", header + "podPidsLimit: 100\n", "field podPidsLimit is not supported by this kubelet (supported: address, port, staticPodPath"},
		{"unsupported nested fields", header + "authentication:\n  webhook:\n    enabled: true\n  x509:\n    clientCAFile: /ca\ncpuManagerPolicy: static\n",
			"field cpuManagerPolicy is not supported"},
		{"unsupported under a supported section", header + "authorization:\n  webhook:\n    cacheAuthorizedTTL: 1m\n  mode: Webhook\nauthentication:\n  anonymous:\n    enabled: true\n", ""},
		{"wrong kind", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n", "kind KubeProxyConfiguration, apiVersion kubelet.config.k8s.io/v1beta1: want kind KubeletConfiguration, apiVersion kubelet.config.k8s.io/v1beta1"},
		{"wrong version", "apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n", "apiVersion kubelet.config.k8s.io/v1: want"},
		{"not an object", "- 1\n", "not a KubeletConfiguration"},
		{"wrong type", header + "maxPods: many\n", "maxPods"},
		{"bad port", header + "port: 70000\n", "port 70000: want 1-65535"},
		{"bad log size", header + "containerLogMaxSize: ten\n", `containerLogMaxSize "ten": want a quantity such as 10Mi`},
		{"one log file", header + "containerLogMaxFiles: 1\n", "containerLogMaxFiles 1: want at least 2"},
		{"no log workers", header + "containerLogMaxWorkers: 0\n", "containerLogMaxWorkers 0: want at least 1"},
		{"log monitor too often", header + "containerLogMonitorInterval: 1s\n", "containerLogMonitorInterval 1s: want at least 3s"},
		{"bad authorization mode", header + "authorization:\n  mode: RBAC\n", `authorization.mode "RBAC": want Webhook or AlwaysAllow`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.body)
			f, err := parse(t, "--config", path)
			require.NoError(t, err)
			_, err = f.KubeletConfiguration()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), path, "names the file")
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestClusterDNSFields(t *testing.T) {
	kc, err := Load(writeConfig(t, header+"clusterDNS: [\"10.96.0.10\"]\nclusterDomain: cluster.local\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"10.96.0.10"}, kc.ClusterDNS)
	assert.Equal(t, "cluster.local", kc.ClusterDomain)
}

func TestUnsupportedFieldsAreAllNamed(t *testing.T) {
	_, err := Decode([]byte(header + "podPidsLimit: 1\ncpuManagerPolicy: static\nauthentication:\n  x509:\n    clientCAFile: /ca\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "field cpuManagerPolicy, field podPidsLimit is not supported")
}

func TestMissingFileAndBadFlags(t *testing.T) {
	f, err := parse(t, "--config", "/nonexistent/kubelet.yaml")
	require.NoError(t, err)
	_, err = f.KubeletConfiguration()
	assert.EqualError(t, err, "kubelet config: open /nonexistent/kubelet.yaml: no such file or directory")
	_, err = parse(t, "--max-pods", "0")
	assert.ErrorContains(t, err, `invalid value "0" for flag -max-pods: want a whole number of at least 1, got "0"`)
	_, err = parse(t, "--port", "70000")
	assert.ErrorContains(t, err, `invalid value "70000" for flag -port: want a port, 1-65535, got "70000"`)
	_, err = parse(t, "--node-ip", "nope")
	assert.ErrorContains(t, err, "node-ip")
}

// allowedUnsafeSysctls (upstream's default: none) from the file, and
// --allowed-unsafe-sysctls, comma-separated, over it.
func TestAllowedUnsafeSysctls(t *testing.T) {
	f, err := parse(t)
	require.NoError(t, err)
	kc, err := f.KubeletConfiguration()
	require.NoError(t, err)
	assert.Empty(t, kc.AllowedUnsafeSysctls, "upstream's default: none")

	path := writeConfig(t, header+"allowedUnsafeSysctls: [\"kernel.msg*\"]\n")
	f, err = parse(t, "--config", path)
	require.NoError(t, err)
	kc, err = f.KubeletConfiguration()
	require.NoError(t, err)
	assert.Equal(t, []string{"kernel.msg*"}, kc.AllowedUnsafeSysctls)

	f, err = parse(t, "--config", path, "--allowed-unsafe-sysctls", "net.core.somaxconn, kernel/sem")
	require.NoError(t, err)
	kc, err = f.KubeletConfiguration()
	require.NoError(t, err)
	assert.Equal(t, []string{"net.core.somaxconn", "kernel/sem"}, kc.AllowedUnsafeSysctls, "the flag over the file")
}
