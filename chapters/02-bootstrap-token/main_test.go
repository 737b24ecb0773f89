package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"mykubelet/mylib/bootstrap"
	"mykubelet/mylib/statedir"
	"mykubelet/scripts/docscheck"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

var idLine = regexp.MustCompile(`token: \S.* id ([a-z0-9]{6})\n`)

func TestChapter02EndToEnd(t *testing.T) {
	c := testcluster.Start(t)
	cs := c.Clientset(t)
	ctx := context.Background()
	bin := testcluster.BuildChapter(t, "./chapters/02-bootstrap-token")
	readme := filepath.Join(testcluster.RepoRoot(t), "chapters/02-bootstrap-token/README.md")
	state := t.TempDir()
	args := []string{"--kubeconfig", c.AdminKubeconfig, "--state-dir", state}

	var id string
	t.Run("prints the README's expected output", func(t *testing.T) {
		out, errOut := chaptertest.RunOK(t, bin, args...)
		t.Log("\n" + out)
		require.NoError(t, docscheck.Match(chaptertest.ExpectedOutput(t, readme), out))

		m := idLine.FindStringSubmatch(out)
		require.NotNil(t, m, out)
		id = m[1]
		assert.Contains(t, out, "whoami: username system:bootstrap:"+id+"\n")
		s, err := cs.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-"+id, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "bootstrap.kubernetes.io/token", string(s.Type))
		assert.NotContains(t, out+errOut, string(s.Data["token-secret"]), "the secret part is never printed")

		fi, err := os.Stat(statedir.Path(state, statedir.BootstrapKubeconfig))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	})

	t.Run("running it again reuses the token and changes no binding", func(t *testing.T) {
		out, _ := chaptertest.RunOK(t, bin, args...)
		assert.Contains(t, out, "token: reusing the bootstrap token in "+statedir.Path(state, statedir.BootstrapKubeconfig)+", id "+id)
		// updated: the expiration moved; unchanged when run within the same second.
		assert.Regexp(t, "secret: (updated|unchanged) kube-system/bootstrap-token-"+id, out)
		assert.Equal(t, 3, strings.Count(out, "rbac: unchanged clusterrolebinding"), out)
	})

	t.Run("a malformed --token is refused and nothing is created", func(t *testing.T) {
		out, errOut, code := chaptertest.Run(t, bin, append(args, "--token", "zzzzzz.NOT-A-SECRET")...)
		assert.Equal(t, 1, code)
		assert.Empty(t, out)
		assert.Equal(t, "02-bootstrap-token: error: --token: malformed bootstrap token zzzzzz.<secret>: the secret after the dot must be 16 characters from [a-z0-9], got 12 characters\n", errOut)
		_, err := cs.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-zzzzzz", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "%v", err)
	})

	t.Run("a given --token is used as is", func(t *testing.T) {
		out, _ := chaptertest.RunOK(t, bin, "--kubeconfig", c.AdminKubeconfig, "--state-dir", t.TempDir(), "--token", "given0.0123456789abcdef", "--ttl", "1h")
		assert.Contains(t, out, "token: using the given bootstrap token, id given0\n")
		assert.Contains(t, out, "whoami: username system:bootstrap:given0\n")
		s, err := cs.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-given0", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "0123456789abcdef", string(s.Data["token-secret"]))
	})

	t.Run("--auto-approve=false uses the manual-approval group", func(t *testing.T) {
		out, _ := chaptertest.RunOK(t, bin, "--kubeconfig", c.AdminKubeconfig, "--state-dir", t.TempDir(), "--auto-approve=false")
		assert.Contains(t, out, "rbac: created clusterrolebinding mykubelet:manual-approval-bootstrap (Group system:bootstrappers:mykubelet:manual-approval -> ClusterRole system:node-bootstrapper)\n")
		assert.Regexp(t, `rbac: node client CSRs of system:bootstrap:[a-z0-9]{6} are approved automatically: no\n`, out)
		assert.Contains(t, out, "whoami: groups system:bootstrappers system:bootstrappers:mykubelet:manual-approval system:authenticated\n")
	})

	t.Run("an expired token is refused and not reused", func(t *testing.T) {
		short := t.TempDir()
		sargs := []string{"--kubeconfig", c.AdminKubeconfig, "--state-dir", short, "--ttl", "2s"}
		out, _ := chaptertest.RunOK(t, bin, sargs...)
		old := idLine.FindStringSubmatch(out)[1]
		time.Sleep(3 * time.Second)

		cfg, err := clientcmd.BuildConfigFromFlags("", statedir.Path(short, statedir.BootstrapKubeconfig))
		require.NoError(t, err)
		// The API server caches a successful token check for up to 10 s.
		require.Eventually(t, func() bool {
			_, err := bootstrap.WhoAmI(ctx, cfg)
			return apierrors.IsUnauthorized(err)
		}, 20*time.Second, 500*time.Millisecond, "the expired token is refused")

		// The tokencleaner controller deletes the expired token's Secret.
		require.Eventually(t, func() bool {
			_, err := cs.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-"+old, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, 30*time.Second, 500*time.Millisecond, "the tokencleaner deletes bootstrap-token-%s", old)

		out, _ = chaptertest.RunOK(t, bin, sargs...)
		assert.Contains(t, out, "token: not reusing the token in "+statedir.Path(short, statedir.BootstrapKubeconfig))
		assert.NotContains(t, out, "id "+old+"\n")
		assert.Contains(t, out, "token: generated a new bootstrap token")
	})

	t.Run("without a kubeconfig it says where one comes from", func(t *testing.T) {
		out, errOut, code := chaptertest.Run(t, bin, "--state-dir", t.TempDir())
		assert.Equal(t, 1, code)
		assert.Empty(t, out)
		assert.Contains(t, errOut, "02-bootstrap-token: error: no kubeconfig found: pass --kubeconfig, set KUBECONFIG, or start the local cluster")
	})
}
