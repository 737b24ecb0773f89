package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"mykubelet/mylib/bootstrap"
	"mykubelet/mylib/statedir"
	"mykubelet/scripts/docscheck"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/localcluster"
	"mykubelet/scripts/testkit/testcluster"
)

const node = "server-node"

type fixture struct {
	*chaptertest.Fixture
	state string
	port  int
}

func (f *fixture) start(t *testing.T) *chaptertest.Process {
	t.Helper()
	return chaptertest.Start(t, f.Bin, "--node-name", node, "--state-dir", f.state, "--port", strconv.Itoa(f.port))
}

// kubectl runs a shell line as the README's reader would (admin
// kubeconfig, kubectl on PATH) and returns its output and exit code.
func (f *fixture) kubectl(t *testing.T, script string) (string, int) {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = f.Root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+f.Cluster.AdminKubeconfig, "NODE_NAME="+node, "PATH="+testcluster.BinDir()+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return string(out), code
}

func (f *fixture) waitPod(t *testing.T, name string, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var last *v1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := f.Admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		return cond(p), nil
	})
	require.NoError(t, err, "pod %s: last seen %+v", name, last)
	return last
}

func running(p *v1.Pod) bool {
	return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil
}

// approve waits for the chapter's serving CSR and approves it as the README does.
func (f *fixture) approve(t *testing.T, p *chaptertest.Process) string {
	t.Helper()
	m := p.WaitForSubmatch(`csr: waiting up to \S+ for approval: nothing approves serving certificates by itself; run: kubectl certificate approve (\S+)`, 0, time.Minute)
	out, code := f.kubectl(t, "kubectl certificate approve "+m[1])
	require.Equal(t, 0, code, out)
	return m[1]
}

func TestChapter12EndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	f := &fixture{Fixture: chaptertest.NewFixture(t, "./chapters/12-kubelet-server", node), state: chaptertest.ShortTempDir(t), port: chaptertest.FreePort(t)}
	chaptertest.WriteNodeKubeconfig(t, f.state, f.NodeConfig)
	ctx := context.Background()
	readme := filepath.Join(f.Root, "chapters/12-kubelet-server/README.md")

	p := f.start(t)
	csrName := f.approve(t, p)
	p.WaitForOutput(`kubelet server: listening on https://127\.0\.0\.1:`+strconv.Itoa(f.port), time.Minute)
	p.WaitForOutput(`node `+node+`: status written \(.*\): Ready=True`, time.Minute)

	t.Run("the serving CSR asks for what upstream's does, and the certificate is stored 0600", func(t *testing.T) {
		csr, err := f.Admin.CertificatesV1().CertificateSigningRequests().Get(ctx, csrName, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "kubernetes.io/kubelet-serving", csr.Spec.SignerName)
		assert.Equal(t, "system:node:"+node, csr.Spec.Username, "sent with the node's own credentials")
		assert.ElementsMatch(t, []string{"digital signature", "server auth"}, []string{string(csr.Spec.Usages[0]), string(csr.Spec.Usages[1])})
		file := filepath.Join(f.state, "pki", "kubelet-server-current.pem")
		fi, err := os.Stat(file)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		pair, err := tls.X509KeyPair(b, b)
		require.NoError(t, err)
		assert.Equal(t, "system:node:"+node, pair.Leaf.Subject.CommonName)
		assert.Equal(t, []string{"system:nodes"}, pair.Leaf.Subject.Organization)
		assert.Equal(t, []string{node}, pair.Leaf.DNSNames)
		require.Len(t, pair.Leaf.IPAddresses, 1)
		assert.Equal(t, "127.0.0.1", pair.Leaf.IPAddresses[0].String())
		_, err = pair.Leaf.Verify(x509.VerifyOptions{Roots: f.Cluster.CAPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		assert.NoError(t, err, "signed by the cluster CA for serving")
	})

	t.Run("the node reports its address and port", func(t *testing.T) {
		n, err := f.Admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, int32(f.port), n.Status.DaemonEndpoints.KubeletEndpoint.Port)
		assert.Contains(t, n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: "127.0.0.1"})
	})

	t.Run("the API server does not proxy /api/v1/nodes/<node>/proxy to a loopback address", func(t *testing.T) {
		out, code := f.kubectl(t, `kubectl get --raw "/api/v1/nodes/$NODE_NAME/proxy/healthz"`)
		assert.Equal(t, 1, code)
		assert.Equal(t, "Error from server (BadRequest): address not allowed\n", out)
	})

	out, code := f.kubectl(t, "kubectl apply -f yaml/kubelet-server-pods.yaml")
	require.Equal(t, 0, code, out)
	f.waitPod(t, "chatty", running)
	f.waitPod(t, "countdown", running)

	t.Run("kubectl logs with each option", func(t *testing.T) {
		for cmd, want := range map[string]string{
			"kubectl logs chatty":                                   "one\ntwo\nthree\n",
			"kubectl logs chatty --tail=1":                          "three\n",
			"kubectl logs chatty --tail=2":                          "two\nthree\n",
			"kubectl logs chatty --limit-bytes=6":                   "one\ntw",
			"kubectl logs chatty --since=1h --limit-bytes=6":        "one\ntw",
			"kubectl logs chatty --since=1h":                        "one\ntwo\nthree\n",
			"kubectl logs chatty --since-time=2999-01-01T00:00:00Z": "",
		} {
			out, code := f.kubectl(t, cmd)
			assert.Equal(t, 0, code, "%s: %s", cmd, out)
			assert.Equal(t, want, out, cmd)
		}
		out, code := f.kubectl(t, "kubectl logs chatty --timestamps")
		assert.Equal(t, 0, code, out)
		assert.Regexp(t, `^\d{4}-\d\d-\d\dT\S+Z one\n\S+Z two\n\S+Z three\n$`, out)
	})

	t.Run("kubectl logs -f ends when the container ends", func(t *testing.T) {
		out, code := f.kubectl(t, "kubectl logs -f countdown")
		assert.Equal(t, 0, code, out)
		assert.Equal(t, "3\n2\n1\nliftoff\n", out)
	})

	t.Run("kubectl logs --previous after a crash", func(t *testing.T) {
		f.waitPod(t, "crasher", func(p *v1.Pod) bool {
			return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].LastTerminationState.Terminated != nil
		})
		out, code := f.kubectl(t, "kubectl logs crasher --previous")
		assert.Equal(t, 0, code, out)
		assert.Equal(t, "crashing\n", out)
		out, code = f.kubectl(t, "kubectl logs chatty --previous")
		assert.Equal(t, 1, code)
		assert.Equal(t, "Error from server (BadRequest): previous terminated container \"chatty\" in pod \"chatty\" not found\n", out)
	})

	t.Run("the API server checks the container name before it asks the kubelet", func(t *testing.T) {
		out, code := f.kubectl(t, "kubectl logs chatty -c nope")
		assert.Equal(t, 1, code)
		assert.Contains(t, out, `container nope is not valid for pod chatty`)
	})

	t.Run("kubectl exec: output, exit codes, stdin", func(t *testing.T) {
		out, code := f.kubectl(t, `kubectl exec chatty -- sh -c 'echo hi; exit 3'`)
		assert.Equal(t, 3, code)
		assert.Equal(t, "hi\ncommand terminated with exit code 3\n", out)
		out, code = f.kubectl(t, `kubectl exec chatty -- sh -c 'echo hi'`)
		assert.Equal(t, 0, code)
		assert.Equal(t, "hi\n", out)
		out, code = f.kubectl(t, `printf 'x=41\necho $((x+1)) from $(hostname)\nexit 5\n' | kubectl exec -i chatty -- sh`)
		assert.Equal(t, 5, code)
		assert.Equal(t, "42 from chatty\ncommand terminated with exit code 5\n", out)
		out, code = f.kubectl(t, `kubectl exec chatty -- nosuchcommand`)
		assert.Equal(t, 127, code, out)
		f.waitPod(t, "countdown", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
		out, code = f.kubectl(t, `kubectl exec countdown -- true`)
		assert.Equal(t, 1, code)
		assert.Equal(t, "error: cannot exec into a container in a completed pod; current phase is Succeeded\n", out, "kubectl checks first")
		out, _ = f.kubectl(t, `kubectl get --raw "/api/v1/namespaces/default/pods/crasher/exec?command=true&stdout=true" 2>&1; true`)
		t.Logf("exec without upgrade: %s", out)
	})

	t.Run("kubectl exec -it: a shell with a prompt, in a terminal (script gives kubectl one)", func(t *testing.T) {
		out, code := f.kubectl(t, `printf 'echo $((6*7))\rexit 7\r' | script -qec "kubectl exec -it chatty -- sh" /dev/null`)
		assert.Equal(t, 7, code, out)
		assert.Contains(t, out, "# ")
		// 42 starts a line of the terminal's output, or follows a prompt
		// (the echo of the lines typed ahead may all come first). What
		// follows it may be that echo of "exit 7", before the shell's
		// newline: a real terminal interleaves them the same way.
		assert.Regexp(t, `(\r\n|# )42`, out, "the shell's answer, at the start of a line or after the prompt")
	})

	t.Run("curl as the README: 401", func(t *testing.T) {
		out, code := f.kubectl(t, "curl -s --cacert "+f.Cluster.CAFile()+" https://127.0.0.1:"+strconv.Itoa(f.port)+"/pods")
		assert.Equal(t, 0, code)
		assert.Equal(t, "Unauthorized\n", out)
	})

	t.Run("curl without and with credentials: 401, 403, 200", func(t *testing.T) {
		base := "https://127.0.0.1:" + strconv.Itoa(f.port)
		roots := f.Cluster.CAPool()
		get := func(client *http.Client, path, token string) (int, string) {
			req, _ := http.NewRequest("GET", base+path, nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := client.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
		code, body := get(anon, "/pods", "")
		assert.Equal(t, 401, code)
		assert.Equal(t, "Unauthorized\n", body)

		token, c := f.kubectl(t, "kubectl create token default")
		require.Equal(t, 0, c, token)
		code, body = get(anon, "/pods", strings.TrimSpace(token))
		assert.Equal(t, 403, code)
		assert.Equal(t, "Forbidden (user=system:serviceaccount:default:default, verb=get, resource=nodes, subresource(s)=[pods proxy])\n", body)
		code, _ = get(anon, "/pods", "not-a-token")
		assert.Equal(t, 401, code)

		withCert := func(user string, groups ...string) *http.Client {
			crt, key, err := f.Cluster.CA().Issue(localcluster.CertSpec{CommonName: user, Organizations: groups, Validity: time.Hour})
			require.NoError(t, err)
			pair, err := tls.X509KeyPair(crt, key)
			require.NoError(t, err)
			return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}}}}
		}
		admin := withCert("kubernetes-admin", "system:masters")
		code, body = get(admin, "/pods", "")
		assert.Equal(t, 200, code)
		var list v1.PodList
		require.NoError(t, json.Unmarshal([]byte(body), &list))
		assert.Equal(t, "PodList", list.Kind)
		assert.Len(t, list.Items, 3)
		code, body = get(admin, "/healthz", "")
		assert.Equal(t, 200, code)
		assert.Equal(t, "ok", body)

		// Bad input, straight to the kubelet as the admin.
		for path, want := range map[string]struct {
			code int
			body string
		}{
			"/containerLogs/default/chatty/chatty?tailLines=abc": {400, `{"message": "Unable to decode query."}: tailLines="abc": want a whole number` + "\n"},
			"/containerLogs/default/chatty/chatty?tailLines=-1":  {422, `{"message": "Invalid request."}: tailLines: must be greater than or equal to 0` + "\n"},
			"/containerLogs/default/nosuchpod/c":                 {404, `pod "nosuchpod" does not exist` + "\n"},
			"/containerLogs/default/chatty/nope":                 {404, `container "nope" not found in pod "chatty"` + "\n"},
			"/containerLogs/default/chatty/chatty?previous=true": {400, `previous terminated container "chatty" in pod "chatty" not found` + "\n"},
			"/nosuchpath": {404, "404 page not found\n"},
		} {
			code, body := get(admin, path, "")
			assert.Equal(t, want.code, code, path)
			assert.Equal(t, want.body, body, path)
		}
		code, body = get(withCert("system:node:"+node, "system:nodes"), "/containerLogs/default/chatty/chatty", "")
		assert.Equal(t, 403, code, "the Node authorizer gives a node no nodes/proxy")
		assert.Equal(t, "Forbidden (user=system:node:"+node+", verb=get, resource=nodes, subresource(s)=[proxy])\n", body)

		// A client certificate of another CA is nobody.
		other, err := localcluster.NewCA("other-ca")
		require.NoError(t, err)
		crt, key, err := other.Issue(localcluster.CertSpec{CommonName: "kubernetes-admin", Organizations: []string{"system:masters"}})
		require.NoError(t, err)
		pair, err := tls.X509KeyPair(crt, key)
		require.NoError(t, err)
		code, _ = get(&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}}}}, "/pods", "")
		assert.Equal(t, 401, code)
	})

	t.Run("a second kubelet on the same port: one clear line", func(t *testing.T) {
		other := chaptertest.ShortTempDir(t)
		chaptertest.WriteNodeKubeconfig(t, other, f.NodeConfig)
		_, stderr, code := chaptertest.Run(t, f.Bin, "--node-name", node, "--state-dir", other, "--port", strconv.Itoa(f.port))
		assert.NotEqual(t, 0, code)
		assert.Equal(t, "12-kubelet-server: error: kubelet server on 127.0.0.1:"+strconv.Itoa(f.port)+": listen tcp 127.0.0.1:"+strconv.Itoa(f.port)+": bind: address already in use\n", lastLine(stderr))
	})

	assert.Equal(t, 0, p.Stop())
	assert.NotContains(t, p.Stderr(), "panic")
	assert.NoError(t, docscheck.Match(chaptertest.ExpectedOutput(t, readme),
		strings.ReplaceAll(p.Stdout(), "127.0.0.1:"+strconv.Itoa(f.port), "127.0.0.1:10250")))

	t.Run("nobody approves: the run ends at the timeout with one clear line", func(t *testing.T) {
		other := chaptertest.ShortTempDir(t)
		chaptertest.WriteNodeKubeconfig(t, other, f.NodeConfig)
		stdout, stderr, code := chaptertest.Run(t, f.Bin, "--node-name", node, "--state-dir", other, "--port", strconv.Itoa(chaptertest.FreePort(t)), "--serving-cert-timeout", "3s")
		assert.NotEqual(t, 0, code)
		m := regexp.MustCompile(`run: kubectl certificate approve (\S+)`).FindStringSubmatch(stdout)
		require.NotNil(t, m, stdout)
		assert.Equal(t, "12-kubelet-server: error: certificate signing request "+m[1]+" was not approved and signed within 3s; approve it with `kubectl certificate approve "+m[1]+"` and run again (the key is kept, so the next run waits for the same CSR)\n", lastLine(stderr))
		_, err := os.Stat(filepath.Join(other, "pki", bootstrap.TmpServingKeyFile))
		assert.NoError(t, err, "the key is kept")
	})

	t.Run("a kubelet whose serving certificate is from another CA is refused by the API server", func(t *testing.T) {
		other, err := localcluster.NewCA("other-ca")
		require.NoError(t, err)
		crt, key, err := other.Issue(localcluster.CertSpec{CommonName: "system:node:" + node, Organizations: []string{"system:nodes"},
			DNSNames: []string{node}, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Validity: time.Hour})
		require.NoError(t, err)
		file := filepath.Join(f.state, "pki", "kubelet-server-current.pem")
		require.NoError(t, os.Remove(file))
		require.NoError(t, statedir.WriteFile(file, append(crt, key...)))
		p := f.start(t)
		p.WaitForOutput(`serving certificate: \S+ is valid until \S+ for IP:127\.0\.0\.1, DNS:`+node+`: reusing it`, time.Minute)
		p.WaitForOutput(`kubelet server: listening`, time.Minute)
		f.waitPod(t, "chatty", running)
		out, code := f.kubectl(t, "kubectl logs chatty")
		assert.NotEqual(t, 0, code)
		assert.Contains(t, out, "tls: failed to verify certificate: x509: certificate signed by unknown authority")

		// The README's cleanup: the running kubelet finishes each deletion.
		out, code = f.kubectl(t, "kubectl delete -f yaml/kubelet-server-pods.yaml --ignore-not-found")
		assert.Equal(t, 0, code, out)
		pods, err := f.Admin.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		assert.Empty(t, pods.Items)
		assert.Equal(t, 0, p.Stop())
	})
}

// lastLine is the last line of s, with its newline.
func lastLine(s string) string {
	lines := strings.SplitAfter(strings.TrimRight(s, "\n")+"\n", "\n")
	return lines[len(lines)-2]
}
