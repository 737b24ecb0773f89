package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"mykubelet/scripts/testkit/testcluster"
)

// TestBuildAddsMetricsServerAlone runs scripts/build-control-plane.sh on a
// cache whose control plane is up to date and which has no metrics-server,
// with a fake go that records what it is asked: only metrics-server is
// built (go install of the module at its version), the control plane's
// stamp stays, and a second run builds nothing.
func TestBuildAddsMetricsServerAlone(t *testing.T) {
	root := testcluster.RepoRoot(t)
	stamp, err := os.ReadFile(filepath.Join(testcluster.BinDir(), ".build-stamp"))
	require.NoError(t, err, "the control plane must be built (scripts/build-control-plane.sh)")

	cache := t.TempDir()
	bin := filepath.Join(cache, "control-plane-"+testcluster.KubeVersion, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"} {
		require.NoError(t, os.WriteFile(filepath.Join(bin, b), nil, 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(bin, ".build-stamp"), stamp, 0o644))

	fakeDir, calls := t.TempDir(), filepath.Join(t.TempDir(), "calls")
	require.NoError(t, os.WriteFile(filepath.Join(fakeDir, "go"), []byte(`#!/bin/sh
echo "$*" >>"`+calls+`"
if [ "$1" = install ]; then printf '#!/bin/sh\n' >"$GOBIN/metrics-server" && chmod +x "$GOBIN/metrics-server"; fi
`), 0o755))

	run := func() string {
		cmd := exec.Command(filepath.Join(root, "scripts", "build-control-plane.sh"))
		cmd.Env = append(os.Environ(), "MYKUBELET_CACHE_DIR="+cache, "PATH="+fakeDir+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		return string(out)
	}
	out := run()
	require.Contains(t, out, "building metrics-server v0.8.0 into "+bin)
	require.True(t, strings.HasSuffix(strings.TrimSpace(out), bin), out)
	got, err := os.ReadFile(calls)
	require.NoError(t, err)
	require.Equal(t, "install -v -trimpath -ldflags -s -w -X k8s.io/client-go/pkg/version.gitVersion=v0.8.0 sigs.k8s.io/metrics-server/cmd/metrics-server@v0.8.0\n", string(got),
		"metrics-server alone, from its module (-v: go_progress counts the packages it compiles)")
	after, err := os.ReadFile(filepath.Join(bin, ".build-stamp"))
	require.NoError(t, err)
	require.Equal(t, stamp, after, "the control plane's stamp is untouched")
	info, err := os.Stat(filepath.Join(bin, "metrics-server"))
	require.NoError(t, err)
	require.NotZero(t, info.Mode()&0o111)
	require.FileExists(t, filepath.Join(bin, ".metrics-server-stamp"))

	out = run()
	require.NotContains(t, out, "building")
	got, err = os.ReadFile(calls)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(got), "\n"), "cached: go is not run again")
}
