package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"mykubelet/scripts/testkit/testcluster"
)

// TestBuildBenchNodesOnce runs scripts/build-bench-nodes.sh with a fake go
// that records what it is asked: KWOK from its module at v0.8.0 and
// kubemark from scripts/tools/kubemark, the KWOK stages gathered from the
// module's kustomize/stage, the control plane's stamp untouched; a second
// run builds nothing.
func TestBuildBenchNodesOnce(t *testing.T) {
	root := testcluster.RepoRoot(t)
	cache := t.TempDir()
	bin := filepath.Join(cache, "control-plane-"+testcluster.KubeVersion, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, ".build-stamp"), []byte("cp\n"), 0o644))

	// A module directory as `go mod download -json` names it, with the
	// five stage files kwok-stages.yaml is made of.
	mod := t.TempDir()
	for _, f := range []string{"node/fast/node-initialize.yaml", "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
		"pod/fast/pod-ready.yaml", "pod/fast/pod-complete.yaml", "pod/fast/pod-delete.yaml", "pod/general/pod-create.yaml"} {
		p := filepath.Join(mod, "kustomize", "stage", f)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("name: "+filepath.Base(f)+"\n"), 0o644))
	}
	fakeDir, calls := t.TempDir(), filepath.Join(t.TempDir(), "calls")
	require.NoError(t, os.WriteFile(filepath.Join(fakeDir, "go"), []byte(`#!/bin/sh
echo "$(basename "$PWD"): $*" >>"`+calls+`"
case "$1" in
install) printf '#!/bin/sh\n' >"$GOBIN/kwok" && chmod +x "$GOBIN/kwok" ;;
mod) printf '{\n\t"Path": "sigs.k8s.io/kwok",\n\t"Dir": "%s",\n\t"Sum": "h1:x"\n}\n' "`+mod+`" ;;
build) while [ "$1" != -o ]; do shift; done; printf '#!/bin/sh\n' >"$2" && chmod +x "$2" ;;
esac
`), 0o755))
	run := func() string {
		cmd := exec.Command(filepath.Join(root, "scripts", "build-bench-nodes.sh"))
		cmd.Env = append(os.Environ(), "MYKUBELET_CACHE_DIR="+cache, "PATH="+fakeDir+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		return string(out)
	}
	out := run()
	assert.True(t, strings.HasSuffix(strings.TrimSpace(out), bin), out)
	got, err := os.ReadFile(calls)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	require.Len(t, lines, 3, string(got))
	assert.Regexp(t, `^\.build-kwok\.\w+: install -trimpath -ldflags -s -w sigs\.k8s\.io/kwok/cmd/kwok@v0\.8\.0$`, lines[0])
	assert.Regexp(t, `: mod download -json sigs\.k8s\.io/kwok@v0\.8\.0$`, lines[1])
	assert.Regexp(t, `^kubemark: build -trimpath -ldflags -s -w -o \S+/kubemark k8s\.io/kubernetes/cmd/kubemark$`, lines[2], "from the module scripts/tools/kubemark")
	stages, err := os.ReadFile(filepath.Join(bin, "kwok-stages.yaml"))
	require.NoError(t, err)
	assert.Equal(t, "---\nname: node-initialize.yaml\n---\nname: node-heartbeat-with-lease.yaml\n---\nname: pod-ready.yaml\n---\nname: pod-complete.yaml\n---\nname: pod-delete.yaml\n",
		string(stages), "kwokctl's default fast stages, not the general ones")
	for _, f := range []string{"kwok", "kubemark", ".kwok-stamp", ".kubemark-stamp"} {
		assert.FileExists(t, filepath.Join(bin, f))
	}
	cp, err := os.ReadFile(filepath.Join(bin, ".build-stamp"))
	require.NoError(t, err)
	assert.Equal(t, "cp\n", string(cp), "the control plane's stamp is untouched")

	require.NoError(t, os.Remove(calls))
	run()
	assert.NoFileExists(t, calls, "a second run builds nothing")
}

// TestKubemarkModuleIsComplete: the module scripts/tools/kubemark lists
// every package kubemark needs with nothing to add to go.mod or go.sum
// (what `go build` would refuse with "missing go.sum entry").
func TestKubemarkModuleIsComplete(t *testing.T) {
	cmd := exec.Command("go", "list", "-mod=readonly", "-deps", "k8s.io/kubernetes/cmd/kubemark")
	cmd.Dir = filepath.Join(testcluster.RepoRoot(t), "scripts", "tools", "kubemark")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "k8s.io/kubernetes/pkg/kubelet\n")
	assert.Contains(t, string(out), "k8s.io/kubernetes/pkg/kubemark\n")
}
