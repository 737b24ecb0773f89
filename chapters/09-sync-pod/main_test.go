package main

import (
	"context"
	"net/netip"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/nodestatus"
	"mykubelet/scripts/docscheck"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
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
	chaptertest.AddStaticPod(t, f.state, "yaml/static/static-web.yaml")
	readme := filepath.Join(f.Root, "chapters/09-sync-pod/README.md")

	p := f.start(t)
	p.WaitForOutput(`node `+node+`: status written \(.*\): Ready=True, runtime mykubelet-fake://`, 30*time.Second)
	n, err := f.Admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "mykubelet-fake://"+fakeruntime.RuntimeVersion, n.Status.NodeInfo.ContainerRuntimeVersion, "from CRI Version")

	t.Run("a pod placed by the scheduler runs: ContainerCreating, then Running with an IP; events from kubelet on the node", func(t *testing.T) {
		w, err := f.Admin.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=hello"})
		require.NoError(t, err)
		defer w.Stop()
		f.Shell(t, `kubectl apply -f yaml/hello.yaml`)
		pod := f.waitPod(t, "hello", 60*time.Second, running)
		assert.Equal(t, node, pod.Spec.NodeName, "placed by the scheduler")
		assert.Equal(t, "127.0.0.1", pod.Status.HostIP)
		// From the mock's default range, or from the node's podCIDR once
		// the kubelet has handed it to the runtime (its next status update).
		n, err := f.Admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		require.NoError(t, err)
		ip := netip.MustParseAddr(pod.Status.PodIP)
		assert.True(t, netip.MustParsePrefix(fakeruntime.DefaultPodCIDR).Contains(ip) ||
			(n.Spec.PodCIDR != "" && netip.MustParsePrefix(n.Spec.PodCIDR).Contains(ip)), "%s in %s or the node's %q", ip, fakeruntime.DefaultPodCIDR, n.Spec.PodCIDR)
		p.WaitForOutput(`pod default/hello: phase Pending -> Running \(pod IP `+regexp.QuoteMeta(pod.Status.PodIP)+`\)`, 10*time.Second)
		var reasons []string
		for e := range w.ResultChan() {
			if pod := e.Object.(*v1.Pod); len(pod.Status.ContainerStatuses) > 0 {
				if st := pod.Status.ContainerStatuses[0].State; st.Waiting != nil {
					reasons = append(reasons, st.Waiting.Reason)
				} else if st.Running != nil {
					reasons = append(reasons, "Running")
					break
				}
			}
		}
		// The status manager sends a pod's newest status: when the container
		// has started before its first write, ContainerCreating is never sent.
		assert.Contains(t, [][]string{{"ContainerCreating", "Running"}, {"Running"}}, reasons, "the statuses the kubelet wrote")

		evs, err := f.Admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=hello"})
		require.NoError(t, err)
		seen := map[string]bool{}
		for _, e := range evs.Items {
			if e.Source.Component == "kubelet" {
				assert.Equal(t, node, e.Source.Host, "%s", e.Reason)
				seen[e.Reason] = true
			}
		}
		assert.Equal(t, map[string]bool{"Pulling": true, "Pulled": true, "Created": true, "Started": true}, seen)
		logs := f.Shell(t, `cat `+f.state+`/pod-logs/default_hello_`+string(pod.UID)+`/hello/0.log`)
		assert.Regexp(t, `^\S+ stdout F hello$`, logs, "the container's log, in the CRI format")
	})

	t.Run("the static pod runs and its status is on the mirror pod", func(t *testing.T) {
		mirror := f.waitPod(t, "static-web-"+node, 60*time.Second, running)
		assert.Equal(t, "127.0.0.1", mirror.Status.HostIP)
		assert.Contains(t, mirror.Annotations, "kubernetes.io/config.mirror")
	})

	t.Run("a Deployment of 3 replicas placed by the scheduler rolls out", func(t *testing.T) {
		f.Shell(t, `kubectl apply -f yaml/nginx-deployment.yaml`)
		out := f.Shell(t, `kubectl rollout status deployment/nginx-deployment --timeout=120s`)
		assert.Contains(t, out, `deployment "nginx-deployment" successfully rolled out`)
		pods, err := f.Admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=nginx"})
		require.NoError(t, err)
		require.Len(t, pods.Items, 3)
		for _, pod := range pods.Items {
			assert.True(t, running(&pod), "%s: %+v", pod.Name, pod.Status)
			assert.Equal(t, node, pod.Spec.NodeName)
		}
	})

	t.Run("a Job completes", func(t *testing.T) {
		f.Shell(t, `kubectl apply -f yaml/job.yaml`)
		out := f.Shell(t, `kubectl wait --for=condition=complete job/hello-job --timeout=120s`)
		assert.Contains(t, out, "job.batch/hello-job condition met")
		pods, err := f.Admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "job-name=hello-job"})
		require.NoError(t, err)
		require.Len(t, pods.Items, 1)
		pod := pods.Items[0]
		assert.Equal(t, v1.PodSucceeded, pod.Status.Phase)
		require.Len(t, pod.Status.ContainerStatuses, 1)
		term := pod.Status.ContainerStatuses[0].State.Terminated
		require.NotNil(t, term)
		assert.Equal(t, int32(0), term.ExitCode)
		assert.Equal(t, "Completed", term.Reason)
	})

	t.Run("a graceful delete stops the containers, writes the terminal phase, then the pod is gone", func(t *testing.T) {
		w, err := f.Admin.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=hello"})
		require.NoError(t, err)
		defer w.Stop()
		f.Shell(t, `kubectl delete pod hello --wait=true`) // sleep ignores SIGTERM: 30 s, then SIGKILL
		_, err = f.Admin.CoreV1().Pods("default").Get(ctx, "hello", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "%v", err)
		var phases []v1.PodPhase
		for e := range w.ResultChan() {
			pod := e.Object.(*v1.Pod)
			assert.NotEmpty(t, pod.Status.PodIP, "the pod keeps its IP while it terminates (%s %s)", e.Type, pod.Status.Phase)
			if len(phases) == 0 || phases[len(phases)-1] != pod.Status.Phase {
				phases = append(phases, pod.Status.Phase)
			}
			if e.Type == "DELETED" {
				break
			}
		}
		assert.Equal(t, []v1.PodPhase{v1.PodRunning, v1.PodFailed}, phases, "the terminal phase is written before the pod goes")
		p.WaitForOutput(`syncTerminatingPod default/hello: stopped 1 container\(s\) and the sandbox \(grace period 30s\)`, 10*time.Second)
		p.WaitForOutput(`syncTerminatedPod default/hello: phase Failed; the status manager deletes it once that is written`, 10*time.Second)
	})

	assert.Equal(t, 0, p.Stop())
	assert.NoError(t, docscheck.Match(chaptertest.ExpectedOutput(t, readme), p.Stdout()))
	assert.NotContains(t, p.Stderr(), "panic")
}

// TestChapter09AdoptsAndFollowsTheRuntime runs the runtime in its own
// process (chapter 05 with --pleg=false), as containerd runs beside the
// kubelet: a restarted kubelet adopts what runs, and the node's Ready
// condition follows the runtime going away and coming back.
func TestChapter09AdoptsAndFollowsTheRuntime(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	f := &fixture{Fixture: chaptertest.NewFixture(t, "./chapters/09-sync-pod", node)}
	ctx := context.Background()
	f.state = chaptertest.ShortTempDir(t)
	chaptertest.WriteNodeKubeconfig(t, f.state, f.NodeConfig)
	runtimeBin := testcluster.BuildChapter(t, "./chapters/05-pleg")
	startRuntime := func() *chaptertest.Process {
		rt := chaptertest.Start(t, runtimeBin, "--state-dir", f.state, "--pleg=false", "--control-address", "")
		rt.WaitForOutput(`fake runtime: serving until Ctrl-C`, 30*time.Second)
		return rt
	}
	rt := startRuntime()
	cri, err := kuberuntime.Connect(ctx, "unix://"+f.state+"/mykubelet.sock", clock.RealClock{})
	require.NoError(t, err)
	defer cri.Close()

	p := f.start(t, "--fake-runtime=false")
	p.WaitForOutput(`node `+node+`: status written \(.*\): Ready=True`, 30*time.Second)
	f.Shell(t, `kubectl apply -f yaml/hello.yaml`)
	before := f.waitPod(t, "hello", 60*time.Second, running)
	sandboxes, containers := criCounts(t, cri)
	require.Equal(t, 1, len(sandboxes))
	require.Equal(t, 1, len(containers))

	// A restarted kubelet adopts what runs: same sandbox, same container,
	// status not regressed. (No subtests: the processes outlive them.)
	{
		assert.Equal(t, 0, p.Stop())
		w, err := f.Admin.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=hello", ResourceVersion: before.ResourceVersion})
		require.NoError(t, err)
		defer w.Stop()
		p = f.start(t, "--fake-runtime=false")
		p.WaitForOutput(`SyncLoop ADD source=api pods=\[default/hello\]`, 30*time.Second)
		p.WaitForOutput(`node `+node+`: registered \(already existed, adopted\)`, 30*time.Second)
		time.Sleep(3 * time.Second) // a few relists and syncs: nothing may change
		s2, c2 := criCounts(t, cri)
		assert.Equal(t, sandboxes, s2, "no new sandbox")
		assert.Equal(t, containers, c2, "no new container")
		after, err := f.Admin.CoreV1().Pods("default").Get(ctx, "hello", metav1.GetOptions{})
		require.NoError(t, err)
		assert.True(t, running(after))
		assert.Equal(t, before.Status.ContainerStatuses[0].ContainerID, after.Status.ContainerStatuses[0].ContainerID)
		assert.Equal(t, int32(0), after.Status.ContainerStatuses[0].RestartCount)
		assert.Equal(t, before.Status.StartTime, after.Status.StartTime)
		w.Stop()
		for e := range w.ResultChan() {
			if pod, ok := e.Object.(*v1.Pod); ok {
				assert.Equal(t, v1.PodRunning, pod.Status.Phase, "no status regressed during the restart")
			}
		}
		assert.NotContains(t, p.Stdout(), "syncPod create default/hello:", "nothing to do for the adopted pod")
	}

	// The runtime stops: the node turns NotReady with the reason; it comes
	// back: Ready.
	{
		assert.Equal(t, 0, rt.Stop())
		p.WaitForOutput(`node `+node+`: status written \(status changed\): Ready=False KubeletNotReady: container runtime is down`, 90*time.Second)
		n, err := f.Admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		require.NoError(t, err)
		_, ready := nodestatus.GetNodeCondition(&n.Status, v1.NodeReady)
		require.NotNil(t, ready)
		assert.Equal(t, v1.ConditionFalse, ready.Status)
		assert.Contains(t, ready.Message, "container runtime is down")

		startRuntime()
		p.WaitForSubmatch(`node `+node+`: status written \(status changed\): Ready=True`, 0, 60*time.Second)
		// The new runtime process starts empty, as a runtime that lost its
		// state: the kubelet makes the pod a new sandbox and container.
		f.waitPod(t, "hello", 60*time.Second, func(pod *v1.Pod) bool {
			return running(pod) && pod.Status.ContainerStatuses[0].ContainerID != before.Status.ContainerStatuses[0].ContainerID
		})
	}
	f.Shell(t, `kubectl delete pod hello --wait=true`)
	assert.Equal(t, 0, p.Stop())
}

// criCounts lists every sandbox and container the runtime has, by ID.
func criCounts(t *testing.T, cri *kuberuntime.Manager) (sandboxes, containers []string) {
	t.Helper()
	ctx := context.Background()
	s, err := cri.RuntimeService().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	for _, x := range s.Items {
		sandboxes = append(sandboxes, x.Id)
	}
	c, err := cri.RuntimeService().ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	require.NoError(t, err)
	for _, x := range c.Containers {
		containers = append(containers, x.Id)
	}
	return sandboxes, containers
}
