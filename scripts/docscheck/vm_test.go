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

// TestVMConfig checks what the README says of vm.yaml: Ubuntu 24.04 for
// both architectures, each image pinned by its digest (a dated release
// location, whose file does not change under it), downloads chosen by the
// VM's own architecture, the home directory mounted writable, and versions
// that match the rest of the repository, kind's node image pinned by digest
// as the release notes of vm.yaml's kind name it.
func TestVMConfig(t *testing.T) {
	root := testcluster.RepoRoot(t)
	vm := decodeYAML(t, filepath.Join(root, "vm.yaml"))

	arches := map[string]bool{}
	for _, img := range vm["images"].([]any) {
		img := img.(map[string]any)
		arches[img["arch"].(string)] = true
		loc := img["location"].(string)
		require.Contains(t, loc, "ubuntu-24.04-server-cloudimg-", "the README says Ubuntu 24.04")
		require.Regexp(t, `/release-\d{8}/`, loc, "an image pinned by digest needs a dated release location: release/ moves to each new build")
		require.Regexp(t, `^sha256:[0-9a-f]{64}$`, img["digest"], "vm.yaml's image %s has no digest", loc)
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
	require.Regexp(t, `image="\$\{KIND_NODE_IMAGE:-kindest/node:v1\.37\.\d+@sha256:[0-9a-f]{64}\}"`, string(up), "kind-up.sh's node image must be pinned by digest")
	notes := regexp.MustCompile(`release notes of kind (v\S+),`).FindSubmatch(up)
	require.NotNil(t, notes, "kind-up.sh must say which kind release's notes its image digest is from")
	require.Equal(t, version("KIND_VERSION"), string(notes[1]), "kind-up.sh's image must be one of the kind release vm.yaml installs")
}

// TestVMDockerWorksInTheFirstShell checks that Docker's socket is the
// user's before Docker is installed (a systemd drop-in, as lima's
// templates/docker-rootful.yaml writes it), not only through the docker
// group, which reaches no session before lima's SSH master restarts; and
// that the probe, run as the user over that master, checks it.
func TestVMDockerWorksInTheFirstShell(t *testing.T) {
	root := testcluster.RepoRoot(t)
	vm := decodeYAML(t, filepath.Join(root, "vm.yaml"))
	script := vm["provision"].([]any)[0].(map[string]any)["script"].(string)
	probe := vm["probes"].([]any)[0].(map[string]any)["script"].(string)

	dropin := strings.Index(script, `SocketUser=%s\n' "{{.User}}" >/etc/systemd/system/docker.socket.d/override.conf`)
	require.GreaterOrEqual(t, dropin, 0, "vm.yaml must give Docker's socket to the user (docker.socket.d/override.conf, SocketUser={{.User}})")
	install := strings.Index(script, "https://get.docker.com")
	require.Greater(t, install, dropin, "the drop-in must be there before Docker's install starts its socket")
	require.NotRegexp(t, `(?m)^\s*usermod\b`, script, "the docker group reaches limactl shell only after lima's SSH master restarts")
	require.Contains(t, probe, "docker info", "the probe must check that the user can use Docker")
}

// TestVMProbeFitsInLimasTimeouts checks that the probe looks once and lets
// lima retry it (lima-vm/lima pkg/hostagent/requirements.go,
// waitForRequirements: 60 tries 10 s apart in lima 1.0 to 2.0; 200 tries 3
// s apart later), instead of a loop of its own that could use all of
// `limactl start`'s 10 minutes (pkg/instance/start.go,
// DefaultWatchHostAgentEventsTimeout), and that provisioning, which that
// start also waits for, builds and pulls nothing: chapter 19's containerd is
// built by scripts/containerd.sh, kind's node image pulled by kind-up.sh.
func TestVMProbeFitsInLimasTimeouts(t *testing.T) {
	root := testcluster.RepoRoot(t)
	vm := decodeYAML(t, filepath.Join(root, "vm.yaml"))
	script := vm["provision"].([]any)[0].(map[string]any)["script"].(string)
	for _, p := range vm["probes"].([]any) {
		probe := p.(map[string]any)["script"].(string)
		require.NotRegexp(t, `\b(for|while|until|sleep|timeout)\b`, probe, "a probe looks once: lima retries it")
	}
	require.NotRegexp(t, `\bgo (build|install)\b|docker pull|kind create|containerd\.sh (up|install|images)`, script, "provisioning must not build or pull: limactl start waits 10 minutes for it")

	b, err := os.ReadFile(filepath.Join(root, "vm.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(b), "every\n# 10 s, 60 times", "vm.yaml says how lima retries the probe")
}

// TestVMStateIsOnTheGuestDisk checks that vm.yaml makes the directory
// scripts/lib.sh links .state to on lima's mount (TestStateIsOnTheGuestDiskOnALimaMount
// checks the link), writable by the user, and that the probe waits for it.
func TestVMStateIsOnTheGuestDisk(t *testing.T) {
	root := testcluster.RepoRoot(t)
	vm := decodeYAML(t, filepath.Join(root, "vm.yaml"))
	script := vm["provision"].([]any)[0].(map[string]any)["script"].(string)
	probe := vm["probes"].([]any)[0].(map[string]any)["script"].(string)
	lib, err := os.ReadFile(filepath.Join(root, "scripts", "lib.sh"))
	require.NoError(t, err)
	m := regexp.MustCompile(`\$\{MYKUBELET_GUEST_STATE_ROOT:-([^}]+)\}/state\$REPO_ROOT`).FindSubmatch(lib)
	require.NotNil(t, m, "scripts/lib.sh links .state below $MYKUBELET_GUEST_STATE_ROOT/state")
	dir := string(m[1])
	require.Contains(t, script, `install -d -o "{{.User}}" -m 0755 `+dir, "vm.yaml must make %s, the user's", dir)
	require.Contains(t, probe, "test -d "+dir)
}

// TestVMInstallsWhatChapter19Needs checks that vm.yaml sets
// MYKUBELET_CONTAINERD=v2 (lima's env, /etc/environment), so that chapter
// 19 runs the containerd scripts/containerd.sh builds from its pinned
// module (build_v2: containerd, ctr, the runc shim), not Docker's
// containerd.io, as chapter 19's README says; that it provisions every
// other program containerd.sh looks for before it falls back to apt
// (install_missing, less what only the debian flavour looks for: runc, the
// CNI plugins, iptables), Go for build_v2, and the rest of chapter 19
// (busybox-static for the offline images, jq and curl for its README),
// each from a package vm.yaml installs; and that its probe waits for them.
// The VM cannot be started here: this is the claim checked on the file. A
// program containerd.sh starts to look for fails this test until it is
// given a provider below.
func TestVMInstallsWhatChapter19Needs(t *testing.T) {
	root := testcluster.RepoRoot(t)
	vm := decodeYAML(t, filepath.Join(root, "vm.yaml"))
	script := vm["provision"].([]any)[0].(map[string]any)["script"].(string)
	probe := vm["probes"].([]any)[0].(map[string]any)["script"].(string)
	sh, err := os.ReadFile(filepath.Join(root, "scripts", "containerd.sh"))
	require.NoError(t, err)

	// What install_missing looks for: `command -v X` and the CNI plugins
	// of its `for p in …` loop.
	env, _ := vm["env"].(map[string]any)
	require.Equal(t, "v2", env["MYKUBELET_CONTAINERD"], "vm.yaml's chapter 19 runs containerd.sh's v2 build (env MYKUBELET_CONTAINERD)")
	v2version := regexp.MustCompile(`(?m)^CONTAINERD_V2_VERSION="(v[0-9.]+)"$`).FindSubmatch(sh)
	require.NotNil(t, v2version, "scripts/containerd.sh pins no CONTAINERD_V2_VERSION")
	build := regexp.MustCompile(`(?s)\nbuild_v2\(\) \{\n(.*?)\n\}\n`).FindSubmatch(sh)
	require.NotNil(t, build, "scripts/containerd.sh has no build_v2()")
	for _, c := range []string{"containerd", "ctr", "containerd-shim-runc-v2"} {
		require.Contains(t, string(build[1]), "github.com/containerd/containerd/v2/cmd/"+c, "build_v2 must build %s", c)
	}
	ch19, err := os.ReadFile(filepath.Join(root, "chapters", "19-real-node", "README.md"))
	require.NoError(t, err)
	where := regexp.MustCompile(`(?s)\n## Where to run\n(.*?)\n<!-- walk: run`).FindSubmatch(ch19)
	require.NotNil(t, where, "chapter 19's README has no Where to run")
	require.Contains(t, strings.Join(strings.Fields(string(where[1])), " "), "`MYKUBELET_CONTAINERD=v2` (its `env`), so `scripts/containerd.sh up` builds and runs containerd "+string(v2version[1]),
		"chapter 19's README must say which containerd runs in the lima VM")

	body := regexp.MustCompile(`(?s)\ninstall_missing\(\) \{\n(.*?)\n\}\n`).FindSubmatch(sh)
	require.NotNil(t, body, "scripts/containerd.sh has no install_missing()")
	// What only the debian flavour looks for, v2 builds.
	debianOnly := regexp.MustCompile(`(?s)\n\s*if \[\[ "\$FLAVOR" == debian \]\]; then\n.*?\n\s*fi\n`)
	require.Regexp(t, debianOnly, string(body[1]), "install_missing no longer looks for containerd only in the debian flavour as this test reads it")
	var needs []string
	for _, m := range regexp.MustCompile(`command -v ([a-z0-9-]+)`).FindAllSubmatch([]byte(debianOnly.ReplaceAllString(string(body[1]), "\n")), -1) {
		if string(m[1]) != "apt-get" {
			needs = append(needs, string(m[1]))
		}
	}
	plugins := regexp.MustCompile(`for p in ([a-z -]+); do\s*\n\s*\[\[ -x "\$CNI_BIN_DIR/\$p" \]\]`).FindSubmatch(body[1])
	require.NotNil(t, plugins, "install_missing no longer checks the CNI plugins as this test reads them")
	for _, p := range strings.Fields(string(plugins[1])) {
		needs = append(needs, "cni/"+p)
	}
	require.Subset(t, needs, []string{"runc", "iptables", "cni/bridge", "cni/host-local", "cni/loopback", "cni/portmap"})
	require.NotContains(t, needs, "containerd", "in the v2 flavour containerd.sh builds containerd")
	needs = append(needs, "go", "busybox-static", "jq", "curl")

	// Where each comes from in the VM: Docker's packages (get.docker.com
	// installs containerd.io, with runc), Go's tarball, or apt.
	docker := `curl -fsSL https://get.docker.com | sh`
	provider := map[string]string{
		"runc": docker, "go": `https://go.dev/dl/go${GO_VERSION}.linux-${ARCH}.tar.gz`,
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
		if strings.HasPrefix(p, "curl ") || strings.HasPrefix(p, "https://") {
			require.Contains(t, script, p, "vm.yaml must install %s", n)
			continue
		}
		require.Contains(t, aptPkgs, p, "vm.yaml must apt-get install %s (for %s)", p, n)
	}
	for _, c := range []string{"go", "runc"} {
		require.Contains(t, probe, "command -v "+c, "vm.yaml's probe must wait for %s", c)
	}
	require.Contains(t, probe, "/usr/lib/cni/bridge", "vm.yaml's probe must wait for the CNI plugins")
}

// section returns the markdown from the heading line to the next heading of
// the same or a higher level.
func section(t *testing.T, md, heading string) string {
	i := strings.Index(md, "\n"+heading+"\n")
	require.GreaterOrEqual(t, i, 0, "README.md has no %q", heading)
	level := strings.Index(heading, " ")
	rest := md[i+len(heading)+2:]
	for _, m := range regexp.MustCompile(`(?m)^#+ `).FindAllStringIndex(rest, -1) {
		if m[1]-m[0]-1 <= level {
			return rest[:m[0]]
		}
	}
	return rest
}

// TestReadmeSaysWhatVMYamlDoes checks README.md's "B. lima and kind" and its
// troubleshooting "In the lima VM" against the files they speak of: where
// .state goes (scripts/lib.sh), the containerd chapter 19 runs (vm.yaml's
// env, scripts/containerd.sh's version), Docker's socket, the dated Ubuntu
// release, lib.sh's error line, lima's 10 minutes, and the tests named.
func TestReadmeSaysWhatVMYamlDoes(t *testing.T) {
	root := testcluster.RepoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	b := strings.Join(strings.Fields(section(t, string(readme), "### B. lima and kind")), " ")
	trouble := strings.Join(strings.Fields(section(t, string(readme), "### In the lima VM")), " ")
	vmText, err := os.ReadFile(filepath.Join(root, "vm.yaml"))
	require.NoError(t, err)
	vm := decodeYAML(t, filepath.Join(root, "vm.yaml"))
	lib, err := os.ReadFile(filepath.Join(root, "scripts", "lib.sh"))
	require.NoError(t, err)
	sh, err := os.ReadFile(filepath.Join(root, "scripts", "containerd.sh"))
	require.NoError(t, err)

	guest := regexp.MustCompile(`\$\{MYKUBELET_GUEST_STATE_ROOT:-([^}]+)\}/state\$REPO_ROOT`).FindSubmatch(lib)
	require.NotNil(t, guest)
	require.Contains(t, b, "`"+string(guest[1])+"/state/<the checkout's path>`")
	require.Contains(t, trouble, "`.state -> "+string(guest[1])+"/state/…`")

	env, _ := vm["env"].(map[string]any)
	require.Contains(t, b, "`MYKUBELET_CONTAINERD="+env["MYKUBELET_CONTAINERD"].(string)+"`, set by `vm.yaml`")
	v2 := regexp.MustCompile(`(?m)^CONTAINERD_V2_VERSION="(v[0-9.]+)"$`).FindSubmatch(sh)
	require.NotNil(t, v2)
	require.Contains(t, b, "containerd "+string(v2[1]))

	require.Contains(t, trouble, "`SocketUser`")
	require.Contains(t, string(vmText), "SocketUser=")

	release := regexp.MustCompile(`/release-\d{8}/`).Find(vmText)
	require.NotNil(t, release)
	require.Contains(t, trouble, "`…"+string(release)+"…`", "the README names vm.yaml's Ubuntu release")

	lines := regexp.MustCompile(`echo "error: \$STATE_DIR is a directory on this VM's \$fs mount of your home, (which cannot hold unix sockets: move it away \(mv \.state \.state\.host\))`).FindSubmatch(lib)
	require.NotNil(t, lines, "scripts/lib.sh no longer says this")
	require.Contains(t, trouble, "`error: <path>/.state is a directory on this VM's <type> mount of your home, "+string(lines[1])+" …`")

	require.Contains(t, trouble, "it waits 10 minutes in all")
	require.Contains(t, string(vmText), "`limactl start` waits 10 minutes in all (its --timeout)")

	tests := ""
	for _, f := range []string{"vm_test.go", "statedir_test.go"} {
		b, err := os.ReadFile(filepath.Join(root, "scripts", "docscheck", f))
		require.NoError(t, err)
		tests += string(b)
	}
	for _, m := range regexp.MustCompile("`(Test[A-Za-z]+)`").FindAllStringSubmatch(trouble, -1) {
		require.Contains(t, tests, "func "+m[1]+"(", "README.md names %s", m[1])
	}
}
