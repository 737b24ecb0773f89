package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

// The README's walk proves what works (the sidecar Job, port-forward,
// attach, debug, the pod CIDRs, the node status) and that cp, without a
// tar in the image, fails with kubectl's words; these tests prove what
// must fail, and fail well, which a walk of the happy path never shows.

const node = "kubectl-node"

type fixture struct {
	bin, root, state string
	port             int
	cluster          *testcluster.Cluster
	admin            *kubernetes.Clientset
}

// sh runs a shell line as the README's reader would (admin kubeconfig,
// kubectl on PATH, $NODE_NAME set, in the repository's root) with stdin,
// and returns its output and exit code.
func (f *fixture) sh(t *testing.T, stdin []byte, script string) (string, int) {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = f.root
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+f.cluster.AdminKubeconfig, "NODE_NAME="+node,
		"PATH="+testcluster.BinDir()+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	require.NoError(t, err)
	return string(out), 0
}

func (f *fixture) ok(t *testing.T, script string) string {
	t.Helper()
	out, code := f.sh(t, nil, script)
	require.Equal(t, 0, code, "%s:\n%s", script, out)
	return out
}

func (f *fixture) pod(t *testing.T, name string) *v1.Pod {
	t.Helper()
	p, err := f.admin.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return p
}

func TestChapter18FailurePaths(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	f := &fixture{bin: testcluster.BuildChapter(t, "./chapters/18-what-kubectl-expects"), root: testcluster.RepoRoot(t),
		state: chaptertest.ShortTempDir(t), port: chaptertest.FreePort(t)}
	f.cluster = testcluster.Start(t)
	f.admin = f.cluster.Clientset(t)
	chaptertest.WriteNodeKubeconfig(t, f.state, chaptertest.RegisterNode(t, f.cluster, node))

	p := chaptertest.Start(t, f.bin, "--node-name", node, "--state-dir", f.state, "--port", strconv.Itoa(f.port))
	p.WaitForOutput(`csr: waiting`, time.Minute)
	f.ok(t, `kubectl get csr --field-selector spec.signerName=kubernetes.io/kubelet-serving | awk -v u="system:node:$NODE_NAME" '$4 == u && $NF == "Pending" {print $1}' | xargs -r kubectl certificate approve`)
	p.WaitForOutput(`node `+node+`: status written \(.*\): Ready=True`, time.Minute)
	f.ok(t, `kubectl run nginx --image=nginx --port=80 --overrides="{\"spec\":{\"nodeName\":\"$NODE_NAME\"}}"`)
	f.ok(t, `kubectl wait --for=condition=Ready pod/nginx --timeout=120s`)

	t.Run("port-forward to a port nothing listens on: the connection fails, kubectl says why, the forward goes on", func(t *testing.T) {
		local := chaptertest.FreePort(t)
		cmd := exec.Command("kubectl", "port-forward", "pod/nginx", strconv.Itoa(local)+":81")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+f.cluster.AdminKubeconfig, "PATH="+testcluster.BinDir()+":"+os.Getenv("PATH"))
		var out syncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		chaptertest.Eventually(t, 30*time.Second, time.Second, "kubectl port-forward listening", func() (bool, string) {
			return strings.Contains(out.String(), "Forwarding from 127.0.0.1:"+strconv.Itoa(local)), out.String()
		})
		curl, code := f.sh(t, nil, "curl -s --max-time 10 http://127.0.0.1:"+strconv.Itoa(local)+"/")
		assert.NotEqual(t, 0, code, "curl through a forward to a closed port must fail; it printed %q", curl)
		chaptertest.Eventually(t, 30*time.Second, time.Second, "kubectl reports the failed forward", func() (bool, string) {
			return strings.Contains(out.String(), "error forwarding port 81"), out.String()
		})
		// The forward to port 80 of the same pod still works: one failed
		// stream does not break the pod's streaming server.
		f.ok(t, "kubectl exec nginx -- ls /")
	})

	t.Run("an ephemeral container that fails is not restarted", func(t *testing.T) {
		f.ok(t, `kubectl debug nginx --image=busybox --container=failing -- sh -c 'exit 3'`)
		var cs v1.ContainerStatus
		chaptertest.Eventually(t, time.Minute, time.Second, "the ephemeral container terminated", func() (bool, string) {
			for _, s := range f.pod(t, "nginx").Status.EphemeralContainerStatuses {
				if s.Name == "failing" {
					cs = s
					return s.State.Terminated != nil, s.State.String()
				}
			}
			return false, "no status for failing"
		})
		assert.Equal(t, int32(3), cs.State.Terminated.ExitCode)
		assert.Equal(t, "Error", cs.State.Terminated.Reason)
		// Three pod syncs later (the kubelet resyncs a pod within seconds of
		// its status changing): still the same terminated container.
		id := cs.ContainerID
		time.Sleep(10 * time.Second)
		for _, s := range f.pod(t, "nginx").Status.EphemeralContainerStatuses {
			if s.Name == "failing" {
				assert.Equal(t, int32(0), s.RestartCount, "an ephemeral container is never restarted")
				assert.Equal(t, id, s.ContainerID, "an ephemeral container is started once")
				assert.NotNil(t, s.State.Terminated)
			}
		}
		assert.Equal(t, v1.PodRunning, f.pod(t, "nginx").Status.Phase, "a failed ephemeral container does not fail the pod")
	})

	t.Run("kubectl logs of an ephemeral container: the kubelet API finds it", func(t *testing.T) {
		f.ok(t, `kubectl debug nginx --image=busybox --container=debugger -- sh -c 'echo hello from the debugger'`)
		chaptertest.Eventually(t, time.Minute, time.Second, "kubectl logs nginx -c debugger", func() (bool, string) {
			out, code := f.sh(t, nil, "kubectl logs nginx -c debugger")
			return code == 0 && out == "hello from the debugger\n", out
		})
	})

	f.ok(t, "kubectl delete pod nginx --wait")
	assert.Equal(t, 0, p.Stop())
	assert.NotContains(t, p.Stderr(), "panic")
}

// syncBuffer is a bytes.Buffer that a process writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
