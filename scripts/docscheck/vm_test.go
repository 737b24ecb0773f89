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

// TestVMInstallsWhatChapter19Needs checks that vm.yaml provisions every
// program scripts/containerd.sh looks for before it falls back to apt
// (install_missing: containerd, ctr, the runc shim, runc, the CNI plugins,
// iptables) and the rest of chapter 19 (busybox-static for the offline
// images, jq and curl for its README), each from a package vm.yaml
// installs, and that its probe waits for them. The VM cannot be started
// here: this is the claim checked on the file. A program containerd.sh
// starts to look for fails this test until it is given a provider below.
func TestVMInstallsWhatChapter19Needs(t *testing.T) {
	root := testcluster.RepoRoot(t)
	vm := decodeYAML(t, filepath.Join(root, "vm.yaml"))
	script := vm["provision"].([]any)[0].(map[string]any)["script"].(string)
	probe := vm["probes"].([]any)[0].(map[string]any)["script"].(string)
	sh, err := os.ReadFile(filepath.Join(root, "scripts", "containerd.sh"))
	require.NoError(t, err)

	// What install_missing looks for: `command -v X` and the CNI plugins
	// of its `for p in …` loop.
	body := regexp.MustCompile(`(?s)\ninstall_missing\(\) \{\n(.*?)\n\}\n`).FindSubmatch(sh)
	require.NotNil(t, body, "scripts/containerd.sh has no install_missing()")
	var needs []string
	for _, m := range regexp.MustCompile(`command -v ([a-z0-9-]+)`).FindAllSubmatch(body[1], -1) {
		if string(m[1]) != "apt-get" {
			needs = append(needs, string(m[1]))
		}
	}
	plugins := regexp.MustCompile(`for p in ([a-z -]+); do\s*\n\s*\[\[ -x "\$CNI_BIN_DIR/\$p" \]\]`).FindSubmatch(body[1])
	require.NotNil(t, plugins, "install_missing no longer checks the CNI plugins as this test reads them")
	for _, p := range strings.Fields(string(plugins[1])) {
		needs = append(needs, "cni/"+p)
	}
	require.Subset(t, needs, []string{"containerd", "ctr", "containerd-shim-runc-v2", "runc", "iptables", "cni/bridge", "cni/host-local", "cni/loopback", "cni/portmap"})
	needs = append(needs, "busybox-static", "jq", "curl")

	// Where each comes from in the VM: Docker's packages (get.docker.com
	// installs containerd.io, with containerd, ctr, the shim and runc, and
	// docker-ce, which depends on iptables), or apt.
	docker := `curl -fsSL https://get.docker.com | sh`
	provider := map[string]string{
		"containerd": docker, "ctr": docker, "containerd-shim-runc-v2": docker, "runc": docker,
		"iptables": "iptables", "busybox-static": "busybox-static", "jq": "jq", "curl": "curl",
	}
	var aptPkgs []string
	for _, m := range regexp.MustCompile(`(?m)^\s*apt-get install -y -q (.*)$`).FindAllStringSubmatch(script, -1) {
		aptPkgs = append(aptPkgs, strings.Fields(m[1])...)
	}
	for _, n := range needs {
		p, ok := provider[n]
		if strings.HasPrefix(n, "cni/") {
			p, ok = "containernetworking-plugins", true // Ubuntu's, in /usr/lib/cni as containerd.sh expects
		}
		require.True(t, ok, "scripts/containerd.sh looks for %s: say here which package of vm.yaml provides it", n)
		if p == docker {
			require.Contains(t, script, docker, "%s comes with Docker's containerd.io in vm.yaml", n)
			continue
		}
		require.Contains(t, aptPkgs, p, "vm.yaml must apt-get install %s (for %s)", p, n)
	}
	for _, c := range []string{"containerd", "runc"} {
		require.Contains(t, probe, "command -v "+c, "vm.yaml's probe must wait for %s", c)
	}
	require.Contains(t, probe, "/usr/lib/cni/bridge", "vm.yaml's probe must wait for the CNI plugins")
}
