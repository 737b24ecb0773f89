package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/yaml"

	"mykubelet/scripts/testkit/localcluster"
	"mykubelet/scripts/testkit/testcluster"
)

const releaseManifest = "https://github.com/kubernetes-sigs/metrics-server/releases/download/" +
	localcluster.MetricsServerVersion + "/components.yaml"

// TestKindMetricsServerManifest renders yaml/metrics-server as kind-up.sh
// applies it, with the release manifest served from loopback: the release
// manifest is rebuilt from the module sigs.k8s.io/metrics-server (its
// manifests/overlays/release, what the release's components.yaml is made
// from), which scripts/build-control-plane.sh downloaded. Only the kubelet
// TLS flag may differ from upstream.
func TestKindMetricsServerManifest(t *testing.T) {
	root := testcluster.RepoRoot(t)
	kubectl := filepath.Join(testcluster.BinDir(), "kubectl")

	dl := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/metrics-server@"+localcluster.MetricsServerVersion)
	dl.Dir = t.TempDir() // outside this module: nothing is added to go.mod
	out, err := dl.Output()
	require.NoError(t, err, "go mod download: %s", out)
	var mod struct{ Dir string }
	require.NoError(t, json.Unmarshal(out, &mod))
	upstream, err := exec.Command(kubectl, "kustomize", filepath.Join(mod.Dir, "manifests", "overlays", "release")).Output()
	require.NoError(t, err)

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(upstream) }))
	defer srv.Close()
	kz, err := os.ReadFile(filepath.Join(root, "yaml", "metrics-server", "kustomization.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(kz), releaseManifest, "kind gets the upstream release manifest")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"),
		[]byte(strings.Replace(string(kz), releaseManifest, srv.URL+"/components.yaml", 1)), 0o600))
	rendered, err := exec.Command(kubectl, "kustomize", dir).CombinedOutput()
	require.NoError(t, err, string(rendered))

	deployment := func(all []byte) appsv1.Deployment {
		for _, doc := range strings.Split(string(all), "\n---\n") {
			var d appsv1.Deployment
			require.NoError(t, yaml.Unmarshal([]byte(doc), &d))
			if d.Kind == "Deployment" && d.Name == "metrics-server" {
				return d
			}
		}
		t.Fatal("no Deployment metrics-server")
		return appsv1.Deployment{}
	}
	want := deployment(upstream).Spec.Template.Spec.Containers[0]
	got := deployment(rendered).Spec.Template.Spec.Containers[0]
	require.Equal(t, "registry.k8s.io/metrics-server/metrics-server:"+localcluster.MetricsServerVersion, got.Image)
	require.Equal(t, append(want.Args, "--kubelet-insecure-tls"), got.Args)
	require.Equal(t, strings.Count(string(upstream), "\nkind: "), strings.Count(string(rendered), "\nkind: "),
		"every object of the release manifest, no more")
	require.Contains(t, string(rendered), "name: v1beta1.metrics.k8s.io")

	up, err := os.ReadFile(filepath.Join(root, "scripts", "kind-up.sh"))
	require.NoError(t, err)
	require.Contains(t, string(up), `apply -k "$REPO_ROOT/yaml/metrics-server"`)
	require.Contains(t, string(up), "apiservice/v1beta1.metrics.k8s.io")
}
