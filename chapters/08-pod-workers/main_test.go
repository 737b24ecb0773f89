package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mykubelet/scripts/docscheck"
	"mykubelet/scripts/testkit/chaptertest"
)

const node = "workers-node"

type fixture struct {
	*chaptertest.Fixture
	state string
}

func (f *fixture) start(t *testing.T, args ...string) (*chaptertest.Process, string) {
	t.Helper()
	p := chaptertest.Start(t, f.Bin, append([]string{"--node-name", node, "--state-dir", f.state, "--debug-address", "127.0.0.1:0"}, args...)...)
	return p, "http://" + p.WaitForSubmatch(`debug server on http://(\S+)/pods`, 0, 30*time.Second)[1]
}

func TestChapter08EndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	f := &fixture{Fixture: chaptertest.NewFixture(t, "./chapters/08-pod-workers", node)}
	ctx := context.Background()
	admin := f.Admin
	f.state = chaptertest.ShortTempDir(t) // the runtime socket lives here
	chaptertest.WriteNodeKubeconfig(t, f.state, f.NodeConfig)
	chaptertest.AddStaticPod(t, f.state, "yaml/static/static-web.yaml")

	t.Run("a pod bound to the node is synced, and terminated when deleted", func(t *testing.T) {
		p, _ := f.start(t)
		p.WaitForOutput(`mirror pod default/static-web-`+node+` created`, 30*time.Second)

		f.Shell(t, `sed "s/NODE_NAME/$NODE_NAME/" yaml/nginx.yaml | kubectl apply -f -`)
		p.WaitForOutput(`syncPod create default/nginx-kubelet: would start containers \[nginx\]`, 20*time.Second)

		f.Shell(t, `kubectl delete pod nginx-kubelet`) // waits until the kubelet finished the deletion
		p.WaitForOutput(`syncTerminatingPod default/nginx-kubelet: would stop containers \[nginx\] within 30s`, 10*time.Second)
		p.WaitForOutput(`syncTerminatedPod default/nginx-kubelet`, 10*time.Second)
		p.WaitForOutput(`pod default/nginx-kubelet: finishing its deletion in the API server \(grace period 0\)`, 10*time.Second)
		_, err := admin.CoreV1().Pods("default").Get(ctx, "nginx-kubelet", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "the pod is gone from the API server: %v", err)
		p.WaitForOutput(`pod worker default/nginx-kubelet \(uid \S+\) cleaned up`, 15*time.Second)

		assert.Equal(t, 0, p.Stop())
		assert.NoError(t, docscheck.Match(chaptertest.ExpectedOutput(t, filepath.Join(f.Root, "chapters/08-pod-workers/README.md")), p.Stdout()))
		assert.NotContains(t, p.Stderr(), "Error syncing pod")
	})

	t.Run("with a slow PLEG a worker waits for the pod cache; /podcache unblocks it", func(t *testing.T) {
		p, base := f.start(t, "--relist-period", "1h")
		f.Shell(t, `sed "s/NODE_NAME/$NODE_NAME/" yaml/nginx.yaml | kubectl apply -f -`)
		p.WaitForOutput(`syncPod create default/nginx-kubelet`, 20*time.Second)
		uid := f.Shell(t, `kubectl get pod nginx-kubelet -o jsonpath='{.metadata.uid}'`)

		f.Shell(t, `kubectl label pod nginx-kubelet tier=web`)
		p.WaitForOutput(`SyncLoop UPDATE source=api pods=\[default/nginx-kubelet\]`, 10*time.Second)
		time.Sleep(2 * time.Second)
		assert.NotContains(t, p.Stdout(), "syncPod update default/nginx-kubelet", "the worker waits in GetNewerThan")

		code, body := post(t, base+"/podcache/"+uid)
		assert.Equal(t, 200, code, body)
		assert.Contains(t, body, "pod cache: set a status for default/nginx-kubelet (uid "+uid+")")
		p.WaitForOutput(`syncPod update default/nginx-kubelet`, 10*time.Second)

		code, body = post(t, base+"/podcache/nope")
		assert.Equal(t, 400, code)
		assert.Contains(t, body, `malformed pod UID "nope"`)
		code, body = post(t, base+"/podcache/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")
		assert.Equal(t, 400, code)
		assert.Contains(t, body, "unknown pod UID")

		f.Shell(t, `kubectl delete pod nginx-kubelet --grace-period=0 --force`)
		assert.Equal(t, 0, p.Stop())
	})
}

func post(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "", nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}
