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
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"mykubelet/mylib/statedir"
	"mykubelet/scripts/docscheck"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

func csrNames(t *testing.T, cs kubernetes.Interface) []string {
	t.Helper()
	l, err := cs.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, c := range l.Items {
		names = append(names, c.Name)
	}
	return names
}

func approval(t *testing.T, cs kubernetes.Interface, name string) string {
	t.Helper()
	c, err := cs.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	for _, cond := range c.Status.Conditions {
		if cond.Type == certificatesv1.CertificateApproved {
			return cond.Reason
		}
	}
	return ""
}

var csrLine = regexp.MustCompile(`csr: (?:created|found) (node-csr-\S+) for`)

func TestChapter03EndToEnd(t *testing.T) {
	c := testcluster.Start(t)
	cs := c.Clientset(t)
	ch02 := testcluster.BuildChapter(t, "./chapters/02-bootstrap-token")
	ch03 := testcluster.BuildChapter(t, "./chapters/03-tls-bootstrap")
	readme := filepath.Join(testcluster.RepoRoot(t), "chapters/03-tls-bootstrap/README.md")

	// setup runs chapter 02 into a new state dir.
	setup := func(t *testing.T, extra ...string) string {
		state := t.TempDir()
		chaptertest.RunOK(t, ch02, append([]string{"--kubeconfig", c.AdminKubeconfig, "--state-dir", state}, extra...)...)
		return state
	}
	kubectlApprove := func(t *testing.T, name string) {
		out := chaptertest.Kubectl(t, c.AdminKubeconfig, "certificate", "approve", name)
		assert.Equal(t, "certificatesigningrequest.certificates.k8s.io/"+name+" approved\n", out)
	}

	state := setup(t)
	args := []string{"--state-dir", state, "--node-name", "e2e-node"}
	var csrName string
	t.Run("prints the README's expected output", func(t *testing.T) {
		out, _ := chaptertest.RunOK(t, ch03, args...)
		t.Log("\n" + out)
		require.NoError(t, docscheck.Match(chaptertest.ExpectedOutput(t, readme), out))

		m := csrLine.FindStringSubmatch(out)
		require.NotNil(t, m)
		csrName = m[1]
		assert.Equal(t, "AutoApproved", approval(t, cs, csrName))
		for _, f := range []string{statedir.NodeKubeconfig, statedir.ClientCertCurrent} {
			fi, err := os.Stat(statedir.Path(state, f))
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
		}
		// The node kubeconfig works for kubectl too.
		who := chaptertest.Kubectl(t, statedir.Path(state, statedir.NodeKubeconfig), "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
		assert.Equal(t, "system:node:e2e-node", who)
	})

	t.Run("running it again reuses the certificate and creates no CSR", func(t *testing.T) {
		before := csrNames(t, cs)
		out, _ := chaptertest.RunOK(t, ch03, args...)
		assert.Regexp(t, `^node kubeconfig: \S+/kubelet.kubeconfig has a valid client certificate until \S+: reusing it, no new CSR\n`, out)
		assert.NotContains(t, out, "csr:")
		assert.Contains(t, out, "whoami: username system:node:e2e-node\n")
		assert.ElementsMatch(t, before, csrNames(t, cs))
	})

	manual := setup(t, "--auto-approve=false")
	t.Run("the timeout names the CSR; approving it by hand and running again finishes", func(t *testing.T) {
		margs := []string{"--state-dir", manual, "--node-name", "manual-node"}
		out, errOut, code := chaptertest.Run(t, ch03, append(margs, "--timeout", "5s")...)
		require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
		m := csrLine.FindStringSubmatch(out)
		require.NotNil(t, m, out)
		name := m[1]
		assert.Equal(t, "03-tls-bootstrap: error: certificate signing request "+name+" was not approved and signed within 5s; approve it with `kubectl certificate approve "+name+"` and run again (the key is kept, so the next run waits for the same CSR)\n", lastLine(errOut))
		assert.Equal(t, "", approval(t, cs, name), "the controller manager did not approve it")

		kubectlApprove(t, name)
		out, _ = chaptertest.RunOK(t, ch03, margs...)
		assert.Contains(t, out, "csr: found "+name+" for system:node:manual-node")
		assert.Contains(t, out, "csr: "+name+" approved (KubectlApprove) and signed\n")
		assert.Contains(t, out, "whoami: username system:node:manual-node\n")
	})

	t.Run("approving by hand while it waits", func(t *testing.T) {
		waiting := setup(t, "--auto-approve=false")
		p := chaptertest.Start(t, ch03, "--state-dir", waiting, "--node-name", "waiting-node", "--timeout", "1m")

		// Wait until the program says, on the line after its CSR's, that it
		// waits; approve; let it finish.
		name := p.WaitForSubmatch(csrLine.String(), 0, time.Minute)[1]
		p.WaitForOutput(`csr: (?:created|found) `+regexp.QuoteMeta(name)+` for.*\n.*`+regexp.QuoteMeta("csr: waiting up to 1m0s for approval and signing (to approve by hand: kubectl certificate approve "+name+")"), time.Minute)
		kubectlApprove(t, name)
		require.Equal(t, 0, p.Wait(time.Minute))
		assert.Contains(t, p.Stdout(), "csr: "+name+" approved (KubectlApprove) and signed\n")
		assert.Contains(t, p.Stdout(), "whoami: username system:node:waiting-node\n")
	})

	t.Run("Ctrl-C while waiting names the CSR", func(t *testing.T) {
		waiting := setup(t, "--auto-approve=false")
		p := chaptertest.Start(t, ch03, "--state-dir", waiting, "--node-name", "interrupted-node")
		name := p.WaitForSubmatch(`(?m)^csr: waiting .* approve (node-csr-\S+)\)$`, 0, time.Minute)[1]
		require.Equal(t, 1, p.Stop())
		assert.Equal(t, "03-tls-bootstrap: error: interrupted while waiting for certificate signing request "+name+" (it stays; run again to keep waiting for it): context canceled\n", lastLine(p.Stderr()))
	})

	t.Run("without a bootstrap kubeconfig it says which chapter writes it", func(t *testing.T) {
		empty := t.TempDir()
		_, errOut, code := chaptertest.Run(t, ch03, "--state-dir", empty, "--node-name", "n")
		assert.Equal(t, 1, code)
		assert.Equal(t, "03-tls-bootstrap: error: no bootstrap kubeconfig at "+statedir.Path(empty, statedir.BootstrapKubeconfig)+
			" (run `go run ./chapters/02-bootstrap-token` first): stat "+statedir.Path(empty, statedir.BootstrapKubeconfig)+": no such file or directory\n", lastLine(errOut))
	})

	t.Run("an unknown token is Unauthorized", func(t *testing.T) {
		kc, err := clientcmd.LoadFromFile(statedir.Path(state, statedir.BootstrapKubeconfig))
		require.NoError(t, err)
		for _, u := range kc.AuthInfos {
			u.Token = "zzzzzz.0123456789abcdef"
		}
		path := filepath.Join(t.TempDir(), "unknown.kubeconfig")
		require.NoError(t, clientcmd.WriteToFile(*kc, path))
		_, errOut, code := chaptertest.Run(t, ch03, "--state-dir", t.TempDir(), "--node-name", "n", "--bootstrap-kubeconfig", path)
		assert.Equal(t, 1, code)
		assert.Regexp(t, `^03-tls-bootstrap: error: certificate signing request node-csr-\S+: cannot create certificate signing request: Unauthorized\n$`, lastLine(errOut))
	})

	t.Run("--kubeconfig is refused", func(t *testing.T) {
		_, errOut, code := chaptertest.Run(t, ch03, "--state-dir", t.TempDir(), "--kubeconfig", c.AdminKubeconfig)
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "03-tls-bootstrap: error: this chapter does not use --kubeconfig: it authenticates only with --bootstrap-kubeconfig")
	})
}

// lastLine returns the last line of s, with its newline (klog may log above it).
func lastLine(s string) string {
	lines := strings.SplitAfter(strings.TrimRight(s, "\n")+"\n", "\n")
	return lines[len(lines)-2]
}
