package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"mykubelet/scripts/docscheck"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

const node = "config-node"

func TestChapter07EndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	f := chaptertest.NewFixture(t, "./chapters/07-pod-config", node)
	bin, root, admin, nodeCfg := f.Bin, f.Root, f.Admin, f.NodeConfig
	ctx := context.Background()

	// The node kubeconfig where chapter 03 leaves it: the default --kubeconfig.
	state := t.TempDir()
	chaptertest.WriteNodeKubeconfig(t, state, nodeCfg)
	chaptertest.AddStaticPod(t, state, "yaml/static/static-web.yaml")

	p := chaptertest.Start(t, bin, "--node-name", node, "--state-dir", state, "--debug-address", "127.0.0.1:0")
	addr := p.WaitForSubmatch(`debug server on http://(\S+)/pods`, 0, 30*time.Second)[1]
	base := "http://" + addr
	static := "static-web-" + node
	p.WaitForOutput("mirror pod default/"+static+" created", 30*time.Second)

	t.Run("the static pod and its mirror pod are translated", func(t *testing.T) {
		mirror, err := admin.CoreV1().Pods("default").Get(ctx, static, metav1.GetOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			_, body := get(t, base+"/pods?format=html", "")
			return strings.Contains(body, "<td>"+string(mirror.UID)+"</td>")
		}, 15*time.Second, 100*time.Millisecond, "the HTML table shows the mirror pod's UID next to the static pod")
		code, body := get(t, base+"/pods/default/"+static, "")
		assert.Equal(t, 200, code)
		var pod v1.Pod
		require.NoError(t, json.Unmarshal([]byte(body), &pod))
		assert.Equal(t, "file", pod.Annotations["kubernetes.io/config.source"])
		assert.NotEqual(t, mirror.UID, pod.UID)
	})

	t.Run("kubectl apply: the pod appears in /pods", func(t *testing.T) {
		f.Shell(t, `sed "s/NODE_NAME/$NODE_NAME/" yaml/nginx.yaml | kubectl apply -f -`)
		p.WaitForOutput(`SyncLoop ADD source=api pods=\[default/nginx-kubelet\]`, 15*time.Second)
		assert.Contains(t, podNames(t, base), "nginx-kubelet")
		code, body := get(t, base+"/pods", "text/html")
		assert.Equal(t, 200, code)
		assert.Contains(t, body, `<a href="/pods/default/nginx-kubelet">nginx-kubelet</a>`)
		pod, err := admin.CoreV1().Pods("default").Get(ctx, "nginx-kubelet", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, v1.PodPending, pod.Status.Phase, "nothing runs it: it stays Pending")
	})

	t.Run("kubectl delete: DELETE, then REMOVE, then gone from /pods", func(t *testing.T) {
		f.Shell(t, `kubectl delete pod nginx-kubelet --wait=false`)
		p.WaitForOutput(`SyncLoop DELETE source=api pods=\[default/nginx-kubelet\]`, 15*time.Second)
		assert.Contains(t, podNames(t, base), "nginx-kubelet", "marked for deletion, still known")
		f.Shell(t, `kubectl delete pod nginx-kubelet --grace-period=0 --force`)
		p.WaitForOutput(`SyncLoop REMOVE source=api pods=\[default/nginx-kubelet\]`, 15*time.Second)
		assert.NotContains(t, podNames(t, base), "nginx-kubelet")
		code, _ := get(t, base+"/pods/default/nginx-kubelet", "")
		assert.Equal(t, 404, code)
	})

	t.Run("a deleted mirror pod comes back through the watch", func(t *testing.T) {
		f.Shell(t, `kubectl delete pod "static-web-$NODE_NAME"`)
		p.WaitForOutput("mirror pod default/"+static+" recreated", 20*time.Second)
	})

	t.Run("Ctrl-C stops it; the output is the README's", func(t *testing.T) {
		assert.Equal(t, 0, p.Stop())
		assert.NoError(t, docscheck.Match(chaptertest.ExpectedOutput(t, filepath.Join(root, "chapters/07-pod-config/README.md")), p.Stdout()))
	})
}

func TestChapter07RefusesNonLoopbackDebugAddress(t *testing.T) {
	bin := testcluster.BuildChapter(t, "./chapters/07-pod-config")
	stdout, stderr, code := chaptertest.Run(t, bin, "--state-dir", stateWithNodeKubeconfig(t), "--debug-address", "0.0.0.0:10255")
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout)
	assert.Equal(t, `07-pod-config: error: --debug-address "0.0.0.0:10255": use 127.0.0.1 or localhost; the debug server has no authentication`+"\n", stderr)
}

func get(t *testing.T, url, accept string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func podNames(t *testing.T, base string) []string {
	t.Helper()
	code, body := get(t, base+"/pods", "")
	require.Equal(t, 200, code)
	var list v1.PodList
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names
}

func TestChapter07DebugPortInUse(t *testing.T) {
	bin := testcluster.BuildChapter(t, "./chapters/07-pod-config")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer lis.Close()
	stdout, stderr, code := chaptertest.Run(t, bin, "--state-dir", stateWithNodeKubeconfig(t), "--debug-address", lis.Addr().String())
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "07-pod-config: error: --debug-address: listen tcp "+lis.Addr().String()+": bind: address already in use\n", stderr)
}

// stateWithNodeKubeconfig is a state directory with a node kubeconfig in it
// (for an API server that is not there): enough to get past the start-up
// checks that come before the debug server's.
func stateWithNodeKubeconfig(t *testing.T) string {
	state := t.TempDir()
	chaptertest.WriteNodeKubeconfig(t, state, &rest.Config{Host: "https://127.0.0.1:1"})
	return state
}
