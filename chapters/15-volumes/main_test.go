package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mykubelet/scripts/docscheck"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

const node = "volumes-node"

// commandTimeout bounds each README line the test runs.
const commandTimeout = 3 * time.Minute

type fixture struct {
	*chaptertest.Fixture
	state  string
	port   int
	readme string
}

// kubectl runs a shell line as the README's reader would (admin
// kubeconfig, kubectl on PATH, in the repository's root) and returns its
// output and exit code.
// A line that has not returned after commandTimeout fails the test with
// what the cluster still holds (a kubectl delete that waits for a pod the
// kubelet never finishes would otherwise wait for go test's own timeout).
func (f *fixture) kubectl(t *testing.T, script string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = f.Root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+f.Cluster.AdminKubeconfig, "NODE_NAME="+node, "PATH="+testcluster.BinDir()+":"+os.Getenv("PATH"))
	cmd.WaitDelay = 5 * time.Second // kubectl's own children, if any, hold the pipe
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		left, _ := exec.Command(filepath.Join(testcluster.BinDir(), "kubectl"), "--kubeconfig", f.Cluster.AdminKubeconfig,
			"get", "pods,deployments,replicasets,pvc,pv", "-o", "yaml").CombinedOutput()
		t.Fatalf("%s: still running after %s; it printed:\n%s\nthe cluster holds:\n%s", script, commandTimeout, out, left)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return string(out), code
}

// ok runs a shell line that must succeed and returns its output.
func (f *fixture) ok(t *testing.T, script string) string {
	t.Helper()
	out, code := f.kubectl(t, script)
	require.Equal(t, 0, code, "%s:\n%s", script, out)
	return out
}

// transcript runs the README's commands one after the other and returns
// what they printed, each output ended by a newline (cat of a file
// without one prints none), for chaptertest.MatchSection.
func (f *fixture) transcript(t *testing.T, scripts ...string) string {
	t.Helper()
	var b strings.Builder
	for _, s := range scripts {
		out, _ := f.kubectl(t, s)
		b.WriteString(out)
		if !strings.HasSuffix(out, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

func (f *fixture) pod(t *testing.T, name string) *v1.Pod {
	t.Helper()
	p, err := f.Admin.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return p
}

func (f *fixture) waitPod(t *testing.T, name string, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var last *v1.Pod
	chaptertest.Eventually(t, 2*time.Minute, 500*time.Millisecond, "pod "+name, func() (bool, string) {
		p, err := f.Admin.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		last = p
		return cond(p), p.Status.String()
	})
	return last
}

func running(p *v1.Pod) bool {
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running != nil {
			return true
		}
	}
	return false
}

// tokenReview sends token to the API server's TokenReview.
func (f *fixture) tokenReview(t *testing.T, token string) *authenticationv1.TokenReview {
	t.Helper()
	tr, err := f.Admin.AuthenticationV1().TokenReviews().Create(context.Background(),
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return tr
}

// tree lists what is under dir, one path a line, for a failure's message.
func tree(dir string) string {
	var b strings.Builder
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		b.WriteString("\n  " + rel)
		return nil
	})
	return b.String()
}

// volumeDir is a pod's volume on disk: <state>/pods/<uid>/volumes/<plugin>/<name>.
func (f *fixture) volumeDir(uid, plugin, name string) string {
	return filepath.Join(f.state, "pods", uid, "volumes", plugin, name)
}

func TestChapter15EndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	f := &fixture{Fixture: chaptertest.NewFixture(t, "./chapters/15-volumes", node), state: chaptertest.ShortTempDir(t), port: chaptertest.FreePort(t)}
	f.readme = filepath.Join(f.Root, "chapters/15-volumes/README.md")
	chaptertest.WriteNodeKubeconfig(t, f.state, f.NodeConfig)
	ctx := context.Background()

	p := chaptertest.Start(t, f.Bin, "--node-name", node, "--state-dir", f.state, "--port", strconv.Itoa(f.port))
	// A fresh state directory: no serving certificate of chapter 12 to
	// reuse. Approve the CSR as the README's Run does.
	p.WaitForOutput(`csr: waiting`, time.Minute)
	f.ok(t, `kubectl get csr --field-selector spec.signerName=kubernetes.io/kubelet-serving | awk -v u="system:node:$NODE_NAME" '$4 == u && $NF == "Pending" {print $1}' | xargs -r kubectl certificate approve`)
	p.WaitForOutput(`kubelet server: listening on https://127\.0\.0\.1:`+strconv.Itoa(f.port), time.Minute)
	p.WaitForOutput(`node `+node+`: status written \(.*\): Ready=True`, time.Minute)
	n, err := f.Admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "true", n.Annotations["volumes.kubernetes.io/controller-managed-attach-detach"], "no attach or detach on the node: the README says why")

	f.ok(t, "kubectl apply -f yaml/volumes/")
	for _, name := range []string{"secret-test-pod", "test-projected-volume", "kubernetes-downwardapi-volume-example", "token-reader"} {
		f.waitPod(t, name, func(p *v1.Pod) bool { return running(p) })
	}
	f.ok(t, "kubectl rollout status deployment/configmap-volume --timeout=120s")

	t.Run("a ConfigMap volume: one file per key", func(t *testing.T) {
		f.waitPod(t, "dapi-test-pod", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
		chaptertest.MatchSection(t, f.readme, "A ConfigMap in a volume", f.transcript(t, "kubectl logs dapi-test-pod"))
		assert.Equal(t, "SPECIAL_LEVEL\nSPECIAL_TYPE\n", f.ok(t, "kubectl logs dapi-test-pod"))
	})

	t.Run("a Secret volume, read-only", func(t *testing.T) {
		chaptertest.MatchSection(t, f.readme, "A Secret", f.transcript(t,
			"kubectl exec secret-test-pod -- ls /etc/secret-volume",
			"kubectl exec secret-test-pod -- cat /etc/secret-volume/username",
			"kubectl exec secret-test-pod -- cat /etc/secret-volume/password"))
		assert.Equal(t, "39528$vdg7Jb", f.ok(t, "kubectl exec secret-test-pod -- cat /etc/secret-volume/password"))
		out, code := f.kubectl(t, "kubectl exec secret-test-pod -- touch /etc/secret-volume/x")
		assert.NotEqual(t, 0, code, "a read-only mount: %s", out)
		t.Logf("writing to the read-only Secret volume: %s", out)
		_, err := os.Stat(f.volumeDir(string(f.pod(t, "secret-test-pod").UID), "kubernetes.io~secret", "secret-volume") + "/x")
		assert.True(t, os.IsNotExist(err), "nothing written on the host")
	})

	t.Run("a projected volume of two Secrets", func(t *testing.T) {
		chaptertest.MatchSection(t, f.readme, "A projected volume", f.transcript(t,
			"kubectl exec test-projected-volume -- ls /projected-volume/",
			"kubectl exec test-projected-volume -- cat /projected-volume/username.txt"))
		assert.Equal(t, "1f2d1e2e67df", f.ok(t, "kubectl exec test-projected-volume -- cat /projected-volume/password.txt"))
	})

	t.Run("the downward API's files, and a label that changes", func(t *testing.T) {
		chaptertest.MatchSection(t, f.readme, "The downward API, and a label that changes", f.transcript(t,
			"kubectl exec kubernetes-downwardapi-volume-example -- cat /etc/podinfo/labels",
			"kubectl exec kubernetes-downwardapi-volume-example -- cat /etc/podinfo/annotations"))
		assert.Equal(t, "cluster=\"test-cluster1\"\nrack=\"rack-22\"\nzone=\"us-est-coast\"",
			f.ok(t, "kubectl exec kubernetes-downwardapi-volume-example -- cat /etc/podinfo/labels"))
		f.ok(t, "kubectl label pod kubernetes-downwardapi-volume-example rack=rack-23 --overwrite")
		took := chaptertest.Eventually(t, 60*time.Second, 500*time.Millisecond, "the labels file after kubectl label", func() (bool, string) {
			out, _ := f.kubectl(t, "kubectl exec kubernetes-downwardapi-volume-example -- cat /etc/podinfo/labels")
			return out == "cluster=\"test-cluster1\"\nrack=\"rack-23\"\nzone=\"us-est-coast\"", out
		})
		t.Logf("the labels file changed %s after kubectl label (a pod update syncs the pod)", took.Round(100*time.Millisecond))
		out := f.ok(t, "kubectl logs kubernetes-downwardapi-volume-example")
		assert.Contains(t, out, "\n\nbuild=\"two\"\nbuilder=\"john-doe\"", "the documentation's loop prints both files")
	})

	t.Run("two containers share an emptyDir", func(t *testing.T) {
		chaptertest.Eventually(t, time.Minute, 500*time.Millisecond, "index.html in the nginx container", func() (bool, string) {
			out, code := f.kubectl(t, "kubectl exec two-containers -c nginx-container -- cat /usr/share/nginx/html/index.html")
			return code == 0, out
		})
		chaptertest.MatchSection(t, f.readme, "Two containers, one emptyDir", f.transcript(t,
			"kubectl exec two-containers -c nginx-container -- cat /usr/share/nginx/html/index.html"))
		dir := f.volumeDir(string(f.pod(t, "two-containers").UID), "kubernetes.io~empty-dir", "shared-data")
		fi, err := os.Stat(dir)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o777), fi.Mode().Perm())
		b, err := os.ReadFile(filepath.Join(dir, "index.html"))
		require.NoError(t, err)
		assert.Equal(t, "Hello from the debian container\n", string(b))
	})

	t.Run("a ConfigMap's change reaches the files within the sync period, atomically", func(t *testing.T) {
		name := strings.TrimSpace(f.ok(t, `kubectl get pod -l app.kubernetes.io/name=configmap-volume -o jsonpath='{.items[0].metadata.name}'`))
		dir := f.volumeDir(string(f.pod(t, name).UID), "kubernetes.io~configmap", "config-volume")
		assert.Equal(t, "football", f.ok(t, "kubectl exec "+name+" -- cat /etc/config/sport"))
		link, err := os.Readlink(filepath.Join(dir, "sport"))
		require.NoError(t, err)
		assert.Equal(t, "..data/sport", link)
		before, err := os.Readlink(filepath.Join(dir, "..data"))
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(before, "..2"), "..data points to a timestamped directory: %s", before)

		f.ok(t, `kubectl patch configmap sport --type merge -p '{"data":{"sport":"cricket"}}'`)
		// The sync period (1 min, plus up to half of it of jitter) plus the
		// watch; the README's walk waits 150 s.
		took := chaptertest.Eventually(t, 150*time.Second, 500*time.Millisecond, "the ConfigMap's change in the container", func() (bool, string) {
			out, _ := f.kubectl(t, "kubectl exec "+name+" -- cat /etc/config/sport")
			return out == "cricket", out
		})
		t.Logf("the ConfigMap's change reached the container in %s", took.Round(time.Second))
		after, err := os.Readlink(filepath.Join(dir, "..data"))
		require.NoError(t, err)
		assert.NotEqual(t, before, after, "a new timestamped directory")
		_, err = os.Stat(filepath.Join(dir, before))
		assert.True(t, os.IsNotExist(err), "the old one is removed")
		chaptertest.Eventually(t, 30*time.Second, 500*time.Millisecond, "the Deployment's log", func() (bool, string) {
			out, _ := f.kubectl(t, "kubectl logs "+name+" --tail=1")
			return strings.HasSuffix(out, " My preferred sport is cricket\n"), out
		})
	})

	t.Run("the default token: a TokenReview names the pod and the node", func(t *testing.T) {
		chaptertest.MatchSection(t, f.readme, "The service-account token, and who it says you are", f.transcript(t,
			"kubectl exec token-reader -- ls /var/run/secrets/kubernetes.io/serviceaccount",
			"kubectl exec token-reader -- cat /var/run/secrets/kubernetes.io/serviceaccount/namespace"))
		// The README's command, as written.
		out := f.ok(t, `TOKEN=$(kubectl exec token-reader -- cat /var/run/secrets/kubernetes.io/serviceaccount/token)
printf '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"%s"}}' "$TOKEN" | kubectl create -f - -o json | jq -r '.status.authenticated, .status.user.username, .status.user.extra["authentication.kubernetes.io/pod-name"][0], .status.user.extra["authentication.kubernetes.io/node-name"][0]'`)
		assert.Equal(t, "true\nsystem:serviceaccount:default:default\ntoken-reader\n"+node+"\n", out)

		token := f.ok(t, "kubectl exec token-reader -- cat /var/run/secrets/kubernetes.io/serviceaccount/token")
		tr := f.tokenReview(t, token)
		require.True(t, tr.Status.Authenticated, tr.Status.Error)
		assert.Equal(t, authenticationv1.ExtraValue{"token-reader"}, tr.Status.User.Extra["authentication.kubernetes.io/pod-name"])
		assert.Equal(t, authenticationv1.ExtraValue{string(f.pod(t, "token-reader").UID)}, tr.Status.User.Extra["authentication.kubernetes.io/pod-uid"])
		assert.Equal(t, authenticationv1.ExtraValue{node}, tr.Status.User.Extra["authentication.kubernetes.io/node-name"])
		ca := f.ok(t, "kubectl exec token-reader -- cat /var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
		clusterCA, err := os.ReadFile(f.Cluster.CAFile())
		require.NoError(t, err)
		assert.Equal(t, string(clusterCA), ca, "ca.crt is the kube-root-ca.crt ConfigMap's: the cluster CA")

		// Bound to the pod: once it is gone, the token is refused.
		f.ok(t, "kubectl delete pod token-reader")
		chaptertest.Eventually(t, 30*time.Second, 500*time.Millisecond, "the token of a deleted pod refused", func() (bool, string) {
			tr := f.tokenReview(t, token)
			return !tr.Status.Authenticated, tr.Status.Error
		})
	})

	t.Run("a claim this node cannot mount: FailedMount, ContainerCreating", func(t *testing.T) {
		var ev *v1.Event
		chaptertest.Eventually(t, 2*time.Minute, 500*time.Millisecond, "a FailedMount event for task-pv-pod", func() (bool, string) {
			list, err := f.Admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=task-pv-pod,reason=FailedMount"})
			if err != nil || len(list.Items) == 0 {
				return false, "none"
			}
			ev = &list.Items[0]
			return true, ""
		})
		assert.Equal(t, v1.EventTypeWarning, ev.Type)
		assert.Equal(t, "kubelet", ev.Source.Component)
		assert.Equal(t, node, ev.Source.Host)
		assert.True(t, strings.HasPrefix(ev.Message, "Unable to attach or mount volumes: "), ev.Message)
		assert.Contains(t, ev.Message, "task-pv-storage")
		t.Logf("FailedMount: %s", ev.Message)
		f.waitPod(t, "task-pv-pod", func(p *v1.Pod) bool {
			return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
				p.Status.ContainerStatuses[0].State.Waiting.Reason == "ContainerCreating"
		})
		chaptertest.MatchSection(t, f.readme, "A claim this node cannot mount", f.transcript(t,
			`kubectl get pvc task-pv-claim -o jsonpath='{.status.phase} {.spec.volumeName}{"\n"}'`,
			"kubectl get pod task-pv-pod",
			"kubectl describe pod task-pv-pod | grep -m1 FailedMount"))
		out := f.ok(t, "kubectl describe pod task-pv-pod | grep -m1 FailedMount")
		assert.Regexp(t, `^\s*Warning\s+FailedMount\s+.+\s+kubelet\s+Unable to attach or mount volumes: `, out)
		assert.NotContains(t, p.Stdout(), "default/task-pv-pod: created sandbox", "no sandbox without its volumes")
	})

	t.Run("the termination message lands in the container's terminated state", func(t *testing.T) {
		pod := f.waitPod(t, "termination-demo", func(p *v1.Pod) bool {
			return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].LastTerminationState.Terminated != nil
		})
		term := pod.Status.ContainerStatuses[0].LastTerminationState.Terminated
		assert.Equal(t, "Sleep expired\n", term.Message)
		assert.Equal(t, "Completed", term.Reason)
		assert.Equal(t, int32(0), term.ExitCode)
		chaptertest.MatchSection(t, f.readme, "The termination message", f.transcript(t,
			`kubectl get pod termination-demo -o go-template="{{range .status.containerStatuses}}{{.lastState.terminated.message}}{{end}}"`,
			`kubectl get pod termination-demo -o jsonpath='{.status.containerStatuses[0].lastState.terminated.reason} {.status.containerStatuses[0].lastState.terminated.exitCode}{"\n"}'`))
	})

	t.Run("the node reads only the Secrets its pods reference", func(t *testing.T) {
		f.ok(t, "kubectl create secret generic not-for-nodes --from-literal=password=hunter2")
		nodeClient, err := kubernetes.NewForConfig(f.NodeConfig)
		require.NoError(t, err)
		_, err = nodeClient.CoreV1().Secrets("default").Get(ctx, "test-secret", metav1.GetOptions{})
		assert.NoError(t, err, "secret-test-pod references it")
		_, err = nodeClient.CoreV1().Secrets("default").Get(ctx, "not-for-nodes", metav1.GetOptions{})
		require.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.Contains(t, err.Error(), "no relationship found between node '"+node+"' and this object")
		_, err = nodeClient.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
		assert.True(t, apierrors.IsForbidden(err), "a node lists no Secrets: %v", err)
		can := func(what string) string {
			out, _ := f.kubectl(t, "kubectl auth can-i get "+what+" --as system:node:$NODE_NAME --as-group system:nodes")
			return strings.TrimSpace(out)
		}
		assert.Equal(t, "yes", can("secret/test-secret"))
		assert.Equal(t, "yes", can("configmap/sport"))
		assert.Equal(t, "no - node: no relationship found between node '"+node+"' and this object", can("secret/not-for-nodes"))
		out, _ := f.kubectl(t, "kubectl auth can-i list secrets --as system:node:$NODE_NAME --as-group system:nodes")
		assert.Equal(t, "no - node: No Object name found\n", out)
		out, code := f.kubectl(t, "kubectl --kubeconfig "+filepath.Join(f.state, "kubelet.kubeconfig")+" get secret not-for-nodes -o name")
		assert.Equal(t, 1, code)
		assert.Equal(t, `Error from server (Forbidden): secrets "not-for-nodes" is forbidden: User "system:node:`+node+`" cannot get resource "secrets" in API group "" in the namespace "default": node: no relationship found between node '`+node+`' and this object`+"\n", out)
	})

	t.Run("the pod's directory goes with the pod, and the node's access to its Secret", func(t *testing.T) {
		uid := string(f.pod(t, "secret-test-pod").UID)
		entries, err := os.ReadDir(filepath.Join(f.state, "pods", uid, "volumes"))
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		assert.Equal(t, []string{"kubernetes.io~projected", "kubernetes.io~secret"}, names)
		b, err := os.ReadFile(filepath.Join(f.volumeDir(uid, "kubernetes.io~secret", "secret-volume"), "username"))
		require.NoError(t, err)
		assert.Equal(t, "my-app", string(b))
		_, err = os.Stat(filepath.Join(f.state, "pods", uid, "etc-hosts"))
		assert.NoError(t, err, "the pod's /etc/hosts")

		f.ok(t, "kubectl delete pod secret-test-pod")
		chaptertest.Eventually(t, 30*time.Second, 500*time.Millisecond, "the pod's directory removed", func() (bool, string) {
			_, err := os.Stat(filepath.Join(f.state, "pods", uid))
			return os.IsNotExist(err), tree(filepath.Join(f.state, "pods", uid))
		})
		out, _ := f.kubectl(t, "ls "+filepath.Join(f.state, "pods", uid))
		assert.Equal(t, "ls: cannot access '"+filepath.Join(f.state, "pods", uid)+"': No such file or directory\n", out)
		chaptertest.Eventually(t, 30*time.Second, 500*time.Millisecond, "the node refused test-secret once no pod references it", func() (bool, string) {
			out, _ := f.kubectl(t, "kubectl auth can-i get secret/test-secret --as system:node:$NODE_NAME --as-group system:nodes")
			return strings.HasPrefix(out, "no - node: no relationship found"), out
		})
	})

	assert.Equal(t, 0, p.Stop())
	assert.NotContains(t, p.Stderr(), "panic")
	assert.NoError(t, docscheck.Match(chaptertest.ExpectedOutput(t, f.readme),
		strings.ReplaceAll(p.Stdout(), "127.0.0.1:"+strconv.Itoa(f.port), "127.0.0.1:10250")))

	t.Run("cleanup: the README's commands leave the pods directory empty", func(t *testing.T) {
		p := chaptertest.Start(t, f.Bin, "--node-name", node, "--state-dir", f.state, "--port", strconv.Itoa(f.port))
		p.WaitForOutput(`serving certificate: \S+ is valid until \S+ for IP:127\.0\.0\.1, DNS:`+node+`: reusing it`, time.Minute)
		p.WaitForOutput(`kubelet server: listening`, time.Minute)
		f.ok(t, "kubectl delete -f yaml/volumes/ --ignore-not-found --cascade=foreground")
		f.ok(t, "kubectl delete secret not-for-nodes --ignore-not-found")
		pods, err := f.Admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Empty(t, pods.Items)
		chaptertest.Eventually(t, 30*time.Second, 500*time.Millisecond, "the pods directory empty", func() (bool, string) {
			entries, err := os.ReadDir(filepath.Join(f.state, "pods"))
			if err != nil {
				return false, err.Error()
			}
			return len(entries) == 0, tree(filepath.Join(f.state, "pods"))
		})
		assert.Equal(t, 0, p.Stop())
	})
}
