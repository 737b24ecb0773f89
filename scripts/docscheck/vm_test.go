package docscheck_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/yaml"

	"mykubelet/scripts/testkit/testcluster"
)

func decodeYAML(t *testing.T, path string) map[string]any {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096).Decode(&v), path)
	return v
}

// TestVMConfig checks what the README says of vm.yaml: both architectures,
// downloads chosen by the VM's own architecture, the home directory mounted
// writable, and versions that match the rest of the repository.
func TestVMConfig(t *testing.T) {
	root := testcluster.RepoRoot(t)
	vm := decodeYAML(t, filepath.Join(root, "vm.yaml"))

	arches := map[string]bool{}
	for _, img := range vm["images"].([]any) {
		arches[img.(map[string]any)["arch"].(string)] = true
	}
	require.Equal(t, map[string]bool{"x86_64": true, "aarch64": true}, arches)

	mount := vm["mounts"].([]any)[0].(map[string]any)
	require.Equal(t, "~", mount["location"])
	require.Equal(t, true, mount["writable"])

	script := vm["provision"].([]any)[0].(map[string]any)["script"].(string)
	require.NotRegexp(t, `linux-(amd64|arm64)`, script, "downloads must use ${ARCH}, not a fixed architecture")
	version := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `=(\S+)$`).FindStringSubmatch(script)
		require.NotNil(t, m, "vm.yaml pins no %s", name)
		return m[1]
	}
	require.Equal(t, testcluster.KubeVersion, version("KUBECTL_VERSION"))
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	goDirective := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	require.True(t, strings.HasPrefix(version("GO_VERSION"), string(goDirective[1])+"."), "vm.yaml's Go must match go.mod's go %s", goDirective[1])
	require.NotEmpty(t, version("KIND_VERSION"))
	require.NotEmpty(t, version("DOCKER_VERSION"))
	require.Equal(t, "v1.37", version("CRICTL_VERSION")[:5], "crictl follows Kubernetes' minor version")
	require.Contains(t, script, "containernetworking-plugins", "chapter 19's scripts/containerd.sh needs the CNI plugins in /usr/lib/cni")

	kind := decodeYAML(t, filepath.Join(root, "yaml", "kind.yaml"))
	require.Equal(t, "Cluster", kind["kind"])
	require.Equal(t, "kind.x-k8s.io/v1alpha4", kind["apiVersion"])

	up, err := os.ReadFile(filepath.Join(root, "scripts", "kind-up.sh"))
	require.NoError(t, err)
	require.Contains(t, string(up), "kindest/node:v1.37.", "kind's node image must be Kubernetes 1.37, like the local control plane")
}
