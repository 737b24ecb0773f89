package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mykubelet/mylib/kubetypes"
	"mykubelet/scripts/docscheck"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

const node = "static-node"

func TestChapter06EndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	// The node's own credentials, as chapter 03 would have them, and its
	// Node object, as chapter 04 would have registered it.
	f := chaptertest.NewFixture(t, "./chapters/06-static-pods", node)
	bin, root, c, admin, nodeCfg := f.Bin, f.Root, f.Cluster, f.Admin, f.NodeConfig
	ctx := context.Background()

	state := t.TempDir()
	manifests := filepath.Join(state, "manifests")
	p := chaptertest.Start(t, bin, "--kubeconfig", testcluster.WriteKubeconfig(t, nodeCfg), "--node-name", node, "--state-dir", state)
	p.WaitForOutput("watching .* for static pods", 30*time.Second)

	// cp yaml/static/static-web.yaml .state/manifests/, plus a broken manifest.
	webPath := chaptertest.AddStaticPod(t, state, "yaml/static/static-web.yaml")
	web, err := os.ReadFile(webPath)
	require.NoError(t, err)
	brokenPath := filepath.Join(manifests, "broken.yaml")
	require.NoError(t, os.WriteFile(brokenPath, []byte("kind: Pod\n"), 0o600))

	name := "static-web-" + node
	mirror := waitForMirror(t, admin, name, func(*v1.Pod) bool { return true })
	p.WaitForOutput("mirror pod default/"+name+" created", 10*time.Second)

	t.Run("the mirror pod is what the README shows", func(t *testing.T) {
		a := mirror.Annotations
		assert.Equal(t, "file", a[kubetypes.ConfigSourceAnnotationKey])
		assert.Len(t, a[kubetypes.ConfigHashAnnotationKey], 32)
		assert.Equal(t, a[kubetypes.ConfigHashAnnotationKey], a[kubetypes.ConfigMirrorAnnotationKey])
		assert.NotEmpty(t, a[kubetypes.ConfigFirstSeenAnnotationKey])
		assert.Equal(t, node, mirror.Spec.NodeName)
		assert.Contains(t, mirror.Spec.Tolerations, v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute})
		require.Len(t, mirror.OwnerReferences, 1)
		ref := mirror.OwnerReferences[0]
		assert.Equal(t, []string{"v1", "Node", node}, []string{ref.APIVersion, ref.Kind, ref.Name})
		assert.True(t, *ref.Controller)
		assert.Contains(t, mirror.ManagedFields[0].Manager, "06-static-pods", "created by the chapter, with the node's credentials")
	})

	t.Run("a malformed manifest is logged with its name and skipped", func(t *testing.T) {
		line := p.WaitForLog(`"Could not process manifest file, skipping it".*`, 10*time.Second)
		assert.Contains(t, line, `path="`+brokenPath+`"`)
	})

	t.Run("kubectl delete: the mirror pod comes back", func(t *testing.T) {
		// What kubectl delete does: a graceful delete (grace period 30 s).
		require.NoError(t, admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}))
		waitForMirror(t, admin, name, func(p *v1.Pod) bool { return p.UID != mirror.UID && p.DeletionTimestamp == nil })
		p.WaitForOutput("mirror pod default/"+name+" recreated", 10*time.Second)
	})

	t.Run("editing the manifest replaces the mirror pod", func(t *testing.T) {
		edited := strings.Replace(string(web), "app: static-web", "app: static-web-v2", 1)
		require.NoError(t, os.WriteFile(webPath, []byte(edited), 0o600))
		m := waitForMirror(t, admin, name, func(p *v1.Pod) bool {
			return p.Annotations[kubetypes.ConfigMirrorAnnotationKey] != mirror.Annotations[kubetypes.ConfigMirrorAnnotationKey]
		})
		assert.Equal(t, "static-web-v2", m.Labels["app"])
		p.WaitForOutput("mirror pod default/"+name+" replaced", 10*time.Second)
	})

	t.Run("removing the manifest deletes the mirror pod", func(t *testing.T) {
		require.NoError(t, os.Remove(webPath))
		require.Eventually(t, func() bool {
			_, err := admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, 20*time.Second, 100*time.Millisecond)
		p.WaitForOutput("mirror pod default/"+name+" deleted", 10*time.Second)
	})

	t.Run("two manifests naming one pod: the second is dropped, the mirror pod stays", func(t *testing.T) {
		for _, copyName := range []string{"a.yaml", "b.yaml"} {
			require.NoError(t, os.WriteFile(filepath.Join(manifests, copyName), web, 0o600))
		}
		p.WaitForLog(`"Pod failed validation due to duplicate pod name, ignoring".*`+name, 30*time.Second)
		p.WaitForSubmatch("mirror pod default/"+name+" created", 1, 10*time.Second) // the second time
		replaced := func() int { return strings.Count(p.Stdout(), "mirror pod default/"+name+" replaced") }
		before := replaced()
		// Before the fix, each housekeeping (every 2 s) replaced the mirror
		// pod with the other manifest's; three periods show whether it flaps.
		require.Never(t, func() bool { return replaced() != before }, 6*time.Second, 200*time.Millisecond)
		for _, copyName := range []string{"a.yaml", "b.yaml"} {
			require.NoError(t, os.Remove(filepath.Join(manifests, copyName)))
		}
	})

	t.Run("Ctrl-C stops it; the output is the README's", func(t *testing.T) {
		assert.Equal(t, 0, p.Stop())
		assert.NoError(t, docscheck.Match(chaptertest.ExpectedOutput(t, filepath.Join(root, "chapters/06-static-pods/README.md")), p.Stdout()))
	})

	t.Run("an unregistered node is one clear line", func(t *testing.T) {
		_, out, code := chaptertest.Run(t, bin, "--kubeconfig", c.AdminKubeconfig, "--node-name", "ghost", "--state-dir", t.TempDir())
		assert.Equal(t, 1, code)
		assert.Equal(t, "06-static-pods: error: node \"ghost\" is not registered; mirror pods need their Node: run `go run ./chapters/04-register-node --node-name ghost` first\n", out)
	})
}

// TestChapter06NoKubeconfig needs no cluster.
func TestChapter06NoKubeconfig(t *testing.T) {
	bin := testcluster.BuildChapter(t, "./chapters/06-static-pods")
	state := t.TempDir()
	_, out, code := chaptertest.Run(t, bin, "--state-dir", state)
	assert.Equal(t, 1, code)
	assert.Equal(t, "06-static-pods: error: no node kubeconfig at "+filepath.Join(state, "kubelet.kubeconfig")+
		": run `go run ./chapters/03-tls-bootstrap` first, or pass --kubeconfig to use another one\n", out)

	// A zero or negative interval is refused in one line, not a ticker's panic.
	for _, arg := range []string{"--housekeeping-interval=0", "--file-check-frequency=-1s"} {
		_, out, code := chaptertest.Run(t, bin, "--state-dir", state, arg)
		assert.Equal(t, 2, code, arg)
		assert.Equal(t, 1, strings.Count(out, "\n"), "one line: %q", out)
		assert.Contains(t, out, "must be positive", arg)
		assert.NotContains(t, out, "goroutine", arg)
	}
}

func waitForMirror(t *testing.T, cs kubernetes.Interface, name string, ok func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var got *v1.Pod
	require.Eventually(t, func() bool {
		p, err := cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || !kubetypes.IsMirrorPod(p) || !ok(p) {
			return false
		}
		got = p
		return true
	}, 30*time.Second, 100*time.Millisecond, "mirror pod %s", name)
	return got
}
