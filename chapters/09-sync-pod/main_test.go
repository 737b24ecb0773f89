package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"mykubelet/scripts/docscheck"
	"mykubelet/scripts/testkit/chaptertest"
)

const node = "sync-node"

type fixture struct {
	*chaptertest.Fixture
	state string
}

// start runs the chapter with the fixture's state directory and waits for
// its first line.
func (f *fixture) start(t *testing.T, args ...string) *chaptertest.Process {
	t.Helper()
	p := chaptertest.Start(t, f.Bin, append([]string{"--node-name", node, "--state-dir", f.state, "--node-ip", "127.0.0.1"}, args...)...)
	p.WaitForOutput(`kubelet `+node+`: pods from`, 30*time.Second)
	return p
}

// waitPod waits until cond holds for the pod, read with the admin's client.
func (f *fixture) waitPod(t *testing.T, name string, timeout time.Duration, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var last *v1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
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
	if p.Status.Phase != v1.PodRunning || p.Status.PodIP == "" {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil || !cs.Ready {
			return false
		}
	}
	return len(p.Status.ContainerStatuses) == len(p.Spec.Containers)
}

func TestChapter09EndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	f := &fixture{Fixture: chaptertest.NewFixture(t, "./chapters/09-sync-pod", node)}
	ctx := context.Background()
	f.state = chaptertest.ShortTempDir(t)
	chaptertest.WriteNodeKubeconfig(t, f.state, f.NodeConfig)
	readme := filepath.Join(f.Root, "chapters/09-sync-pod/README.md")

	p := f.start(t)
	p.WaitForOutput(`node `+node+`: status written \(.*\): Ready=True, runtime mykubelet-fake://`, 30*time.Second)

	t.Run("a pod placed by the scheduler runs: Running with an IP, events from kubelet, <node>", func(t *testing.T) {
		f.Shell(t, `kubectl apply -f yaml/hello.yaml`)
		pod := f.waitPod(t, "hello", 60*time.Second, running)
		assert.Equal(t, node, pod.Spec.NodeName)
		assert.Equal(t, "127.0.0.1", pod.Status.HostIP)
		p.WaitForOutput(`pod default/hello: phase Pending -> Running \(pod IP \S+\)`, 10*time.Second)
		desc := f.Shell(t, `kubectl describe pod hello`)
		for _, reason := range []string{"Scheduled", "Pulling", "Pulled", "Created", "Started"} {
			assert.Regexp(t, `Normal\s+`+reason+`\s+`, desc)
		}
		evs, err := f.Admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=hello"})
		require.NoError(t, err)
		fromKubelet := 0
		for _, e := range evs.Items {
			if e.Source.Component == "kubelet" {
				assert.Equal(t, node, e.Source.Host, "%s", e.Reason)
				fromKubelet++
			}
		}
		assert.GreaterOrEqual(t, fromKubelet, 4, "Pulling, Pulled, Created, Started")
	})

	t.Run("a graceful delete stops the containers, writes the terminal phase, then the pod is gone", func(t *testing.T) {
		f.Shell(t, `kubectl delete pod hello --wait=true`)
		_, err := f.Admin.CoreV1().Pods("default").Get(ctx, "hello", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "%v", err)
		p.WaitForOutput(`syncTerminatingPod default/hello: stopped 1 container\(s\) and the sandbox \(grace period 30s\)`, 10*time.Second)
		p.WaitForOutput(`syncTerminatedPod default/hello: phase (Succeeded|Failed); the status manager deletes it once that is written`, 10*time.Second)
	})

	assert.Equal(t, 0, p.Stop())
	assert.NoError(t, docscheck.Match(chaptertest.ExpectedOutput(t, readme), p.Stdout()))
	assert.False(t, strings.Contains(p.Stderr(), "panic"))
}
