package main

import (
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
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

	"mykubelet/mylib/kuberuntime"
	"mykubelet/scripts/docscheck"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

const node = "lifecycle-node"

type fixture struct {
	*chaptertest.Fixture
	state string
	cri   *kuberuntime.Manager
}

// start runs the chapter against the runtime of chapter 05, as the README
// does, and waits until the node is Ready.
func (f *fixture) start(t *testing.T) *chaptertest.Process {
	t.Helper()
	p := chaptertest.Start(t, f.Bin, "--node-name", node, "--state-dir", f.state, "--node-ip", "127.0.0.1", "--fake-runtime=false")
	p.WaitForOutput(`node `+node+`: status written \(.*\): Ready=True`, 60*time.Second)
	return p
}

// waitPod waits until cond holds for the pod, read with the admin's client.
func (f *fixture) waitPod(t *testing.T, name string, timeout time.Duration, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var last *v1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
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

// containersOf lists the runtime's containers of a pod (all states), by
// the pod UID label the kubelet wrote.
func (f *fixture) containersOf(t *testing.T, uid string) []*runtimeapi.Container {
	t.Helper()
	resp, err := f.cri.RuntimeService().ListContainers(context.Background(), &runtimeapi.ListContainersRequest{
		Filter: &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid}}})
	require.NoError(t, err)
	return resp.Containers
}

// criCounts lists every sandbox and container the runtime has, by ID and state.
func (f *fixture) criCounts(t *testing.T) (sandboxes, containers map[string]string) {
	t.Helper()
	ctx := context.Background()
	s, err := f.cri.RuntimeService().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	sandboxes = map[string]string{}
	for _, x := range s.Items {
		sandboxes[x.Id] = x.State.String()
	}
	c, err := f.cri.RuntimeService().ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	require.NoError(t, err)
	containers = map[string]string{}
	for _, x := range c.Containers {
		containers[x.Id] = x.State.String()
	}
	return sandboxes, containers
}

func running(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
}

// TestChapter10EndToEnd runs the README's claims against a real control
// plane, the chapter's kubelet and chapter 05's runtime in its own process.
func TestChapter10EndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	f := &fixture{Fixture: chaptertest.NewFixture(t, "./chapters/10-container-lifecycle", node)}
	ctx := context.Background()
	f.state = chaptertest.ShortTempDir(t)
	chaptertest.WriteNodeKubeconfig(t, f.state, f.NodeConfig)
	runtimeBin := testcluster.BuildChapter(t, "./chapters/05-pleg")
	rt := chaptertest.Start(t, runtimeBin, "--state-dir", f.state, "--pleg=false", "--control-address", "")
	rt.WaitForOutput(`fake runtime: serving until Ctrl-C`, 30*time.Second)
	cri, err := kuberuntime.Connect(ctx, "unix://"+f.state+"/mykubelet.sock", clock.RealClock{})
	require.NoError(t, err)
	defer cri.Close()
	f.cri = cri

	p := f.start(t)
	p.WaitForOutput(`container GC every 1m0s: keep 1 dead container\(s\) per container, -1 on the node, older than 0s`, 10*time.Second)

	// Ctrl-C of the kubelet stops nothing in the runtime; started again,
	// it adopts what runs. (No subtests while processes are replaced.)
	f.Shell(t, `kubectl apply -f yaml/hello.yaml`)
	before := f.waitPod(t, "hello", 90*time.Second, running)
	sandboxes, containers := f.criCounts(t)
	require.Len(t, sandboxes, 1)
	require.Len(t, containers, 1)
	assert.Equal(t, 0, p.Stop())
	assert.Contains(t, p.Stdout(), "stopped (the containers keep running in the runtime; started again, the kubelet adopts them)")
	s1, c1 := f.criCounts(t)
	assert.Equal(t, sandboxes, s1, "Ctrl-C stopped no sandbox")
	assert.Equal(t, containers, c1, "Ctrl-C stopped no container")
	p = f.start(t)
	p.WaitForOutput(`SyncLoop ADD source=api pods=\[default/hello\]`, 30*time.Second)
	// Two housekeepings (2 s apart) are what an orphan needs to be killed,
	// and a relist and a sync are what a wrong restart needs: wait for more.
	time.Sleep(6 * time.Second)
	s2, c2 := f.criCounts(t)
	assert.Equal(t, sandboxes, s2, "no sandbox stopped or made by the restarted kubelet")
	assert.Equal(t, containers, c2, "no container stopped or made by the restarted kubelet")
	after, err := f.Admin.CoreV1().Pods("default").Get(ctx, "hello", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, running(after))
	assert.Equal(t, before.Status.ContainerStatuses[0].ContainerID, after.Status.ContainerStatuses[0].ContainerID)
	assert.Equal(t, int32(0), after.Status.ContainerStatuses[0].RestartCount)
	assert.NotContains(t, p.Stdout(), "syncPod create default/hello:")
	assert.NotContains(t, p.Stdout(), "orphaned")

	// A pod deleted for good while the kubelet is down leaves its sandbox
	// and container in the runtime: housekeeping kills them.
	assert.Equal(t, 0, p.Stop())
	f.Shell(t, `kubectl delete pod hello --force --grace-period=0`)
	p = f.start(t)
	p.WaitForOutput(`housekeeping: killing orphaned runtime pod default/hello \(uid `+string(before.UID)+`\): no pod wants it`, 60*time.Second)
	require.Eventually(t, func() bool {
		for _, c := range f.containersOf(t, string(before.UID)) {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return false
			}
		}
		return true
	}, 30*time.Second, 250*time.Millisecond, "the orphan's container stopped")

	// Everything else at once: they take their time. The init container's
	// statuses are watched from the start, as kubectl get -w would.
	initWatch, err := f.Admin.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=init-fails"})
	require.NoError(t, err)
	defer initWatch.Stop()
	f.Shell(t, `kubectl apply -f yaml/crashloop.yaml -f yaml/init-fails.yaml -f yaml/hooks.yaml -f yaml/deadline.yaml -f yaml/job-fails.yaml -f yaml/job-flaky.yaml`)

	t.Run("a crash-looping pod: restarts climb, CrashLoopBackOff with upstream's message and doubling back-off, BackOff events", func(t *testing.T) {
		w, err := f.Admin.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=crashloop"})
		require.NoError(t, err)
		defer w.Stop()
		msgRe := regexp.MustCompile(`^back-off (\d+s) restarting failed container=crashloop pod=crashloop_default\(([-0-9a-f]+)\)$`)
		var backoffs []string
		var pod *v1.Pod
		timeout := time.After(3 * time.Minute)
		for len(backoffs) < 2 {
			select {
			case e := <-w.ResultChan():
				pod = e.Object.(*v1.Pod)
				if len(pod.Status.ContainerStatuses) == 0 {
					continue
				}
				cs := pod.Status.ContainerStatuses[0]
				if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" {
					continue
				}
				m := msgRe.FindStringSubmatch(cs.State.Waiting.Message)
				require.NotNil(t, m, "message %q", cs.State.Waiting.Message)
				assert.Equal(t, string(pod.UID), m[2])
				if len(backoffs) == 0 || backoffs[len(backoffs)-1] != m[1] {
					backoffs = append(backoffs, m[1])
				}
				require.NotNil(t, cs.LastTerminationState.Terminated, "Last State")
				assert.Equal(t, int32(1), cs.LastTerminationState.Terminated.ExitCode)
				assert.Equal(t, "Error", cs.LastTerminationState.Terminated.Reason)
			case <-timeout:
				t.Fatalf("back-offs seen: %v; last status %+v", backoffs, pod.Status)
			}
		}
		assert.Equal(t, []string{"10s", "20s"}, backoffs, "the first exit restarts at once, then 10 s, doubling")
		assert.Equal(t, v1.PodRunning, pod.Status.Phase, "restartPolicy Always: Running while it restarts")
		assert.GreaterOrEqual(t, pod.Status.ContainerStatuses[0].RestartCount, int32(2))
		out := f.Shell(t, `kubectl get pod crashloop --no-headers`)
		assert.Regexp(t, `^crashloop\s+0/1\s+(CrashLoopBackOff|Error|Running|Completed)\s+\d+ \(\S+ ago\)`, out)

		evs, err := f.Admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=crashloop,reason=BackOff"})
		require.NoError(t, err)
		require.NotEmpty(t, evs.Items)
		e := evs.Items[0]
		assert.Equal(t, v1.EventTypeWarning, e.Type)
		assert.Equal(t, "kubelet", e.Source.Component)
		assert.Equal(t, "spec.containers{crashloop}", e.InvolvedObject.FieldPath)
		assert.Equal(t, "Back-off restarting failed container crashloop in pod crashloop_default("+string(pod.UID)+")", e.Message)
		describe := f.Shell(t, `kubectl describe pod crashloop`)
		assert.Regexp(t, `(?s)Last State:\s+Terminated\s+Reason:\s+Error\s+Exit Code:\s+1`, describe)
		assert.Regexp(t, `Warning\s+BackOff\s+.*Back-off restarting failed container crashloop in pod crashloop_default`, describe)
	})

	t.Run("an init container that fails: Init:Error, then Init:CrashLoopBackOff; the app never starts", func(t *testing.T) {
		// What kubectl prints for each status the kubelet wrote: Init:Error
		// for an init container that exited with an error, then
		// Init:CrashLoopBackOff while it waits out its back-off.
		var seen []string
		timeout := time.After(3 * time.Minute)
		for len(seen) == 0 || seen[len(seen)-1] != "Init:CrashLoopBackOff" {
			select {
			case e := <-initWatch.ResultChan():
				pod := e.Object.(*v1.Pod)
				if len(pod.Status.InitContainerStatuses) != 1 {
					continue
				}
				st := pod.Status.InitContainerStatuses[0].State
				shown := ""
				switch {
				case st.Terminated != nil && st.Terminated.Reason != "":
					shown = "Init:" + st.Terminated.Reason
				case st.Waiting != nil && st.Waiting.Reason != "" && st.Waiting.Reason != "PodInitializing":
					shown = "Init:" + st.Waiting.Reason
				}
				if shown != "" && (len(seen) == 0 || seen[len(seen)-1] != shown) {
					seen = append(seen, shown)
				}
			case <-timeout:
				t.Fatalf("init-fails showed %v", seen)
			}
		}
		assert.Contains(t, seen, "Init:Error", "shown %v", seen)
		assert.Less(t, slices.Index(seen, "Init:Error"), slices.Index(seen, "Init:CrashLoopBackOff"), "shown %v", seen)
		// The watch may have delivered old events: the pod is somewhere in
		// its cycle now, and for the instant of each restart (until the
		// next relist sees the exit) kubectl shows Init:0/1.
		initShown := regexp.MustCompile(`^init-fails\s+0/1\s+Init:(CrashLoopBackOff|Error)\s+`)
		chaptertest.Eventually(t, 30*time.Second, time.Second, "kubectl shows Init:CrashLoopBackOff or Init:Error", func() (bool, string) {
			out := f.Shell(t, `kubectl get pod init-fails --no-headers`)
			return initShown.MatchString(out), out
		})
		pod, err := f.Admin.CoreV1().Pods("default").Get(ctx, "init-fails", metav1.GetOptions{})
		require.NoError(t, err)
		require.Len(t, pod.Status.InitContainerStatuses, 1)
		ics := pod.Status.InitContainerStatuses[0]
		require.NotNil(t, ics.LastTerminationState.Terminated)
		assert.Equal(t, int32(1), ics.LastTerminationState.Terminated.ExitCode)
		assert.Equal(t, "Error", ics.LastTerminationState.Terminated.Reason, "what kubectl shows as Init:Error")
		assert.Equal(t, v1.PodPending, pod.Status.Phase)
		assert.Nil(t, pod.Status.ContainerStatuses[0].State.Running, "the app never starts")
		assert.Equal(t, "PodInitializing", pod.Status.ContainerStatuses[0].State.Waiting.Reason)
	})

	t.Run("a failing postStart hook: FailedPostStartHook, the container killed and restarted", func(t *testing.T) {
		pod := f.waitPod(t, "poststart-fails", 3*time.Minute, func(p *v1.Pod) bool {
			return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
		})
		evs, err := f.Admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=poststart-fails"})
		require.NoError(t, err)
		reasons := map[string]string{}
		for _, e := range evs.Items {
			reasons[e.Reason] = e.Message
		}
		assert.Equal(t, "PostStartHook failed", reasons["FailedPostStartHook"])
		assert.Equal(t, "FailedPostStartHook", reasons["Killing"], "the container is killed with the hook's reason")
		cs := pod.Status.ContainerStatuses[0]
		require.NotNil(t, cs.LastTerminationState.Terminated)
		assert.Equal(t, int32(137), cs.LastTerminationState.Terminated.ExitCode, "sleep ignores SIGTERM: killed at the end of the grace period")
	})

	t.Run("activeDeadlineSeconds: the pod fails with reason DeadlineExceeded", func(t *testing.T) {
		pod := f.waitPod(t, "deadline", 3*time.Minute, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
		assert.Equal(t, "DeadlineExceeded", pod.Status.Reason)
		assert.Equal(t, "Pod was active on the node longer than the specified deadline", pod.Status.Message)
		require.NotNil(t, pod.Status.ContainerStatuses[0].State.Terminated, "its container was stopped before the phase was written")
	})

	t.Run("a Job with backoffLimit 1 whose pods fail: two pods, then the Job fails", func(t *testing.T) {
		out := f.Shell(t, `kubectl wait --for=condition=failed job/job-fails --timeout=180s`)
		assert.Contains(t, out, "job.batch/job-fails condition met")
		j, err := f.Admin.BatchV1().Jobs("default").Get(ctx, "job-fails", metav1.GetOptions{})
		require.NoError(t, err)
		for _, c := range j.Status.Conditions {
			if c.Type == "Failed" {
				assert.Equal(t, "BackoffLimitExceeded", c.Reason)
			}
		}
		pods, err := f.Admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "job-name=job-fails"})
		require.NoError(t, err)
		require.Len(t, pods.Items, 2, "restartPolicy Never: a new pod for each try")
		for _, p := range pods.Items {
			assert.Equal(t, v1.PodFailed, p.Status.Phase)
			assert.Equal(t, int32(3), p.Status.ContainerStatuses[0].State.Terminated.ExitCode)
		}
	})

	t.Run("a Job that fails until its ConfigMap exists: restarted in place, then complete", func(t *testing.T) {
		var pod v1.Pod
		require.Eventually(t, func() bool {
			pods, err := f.Admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "job-name=job-flaky"})
			if err != nil || len(pods.Items) != 1 || len(pods.Items[0].Status.ContainerStatuses) != 1 {
				return false
			}
			pod = pods.Items[0]
			return pod.Status.ContainerStatuses[0].RestartCount >= 1
		}, 3*time.Minute, 250*time.Millisecond, "one pod, restarted in place")
		f.Shell(t, `kubectl create configmap job-flaky --from-literal=ready=yes`)
		out := f.Shell(t, `kubectl wait --for=condition=complete job/job-flaky --timeout=240s`)
		assert.Contains(t, out, "job.batch/job-flaky condition met")
		pods, err := f.Admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "job-name=job-flaky"})
		require.NoError(t, err)
		require.Len(t, pods.Items, 1, "restartPolicy OnFailure: the same pod")
		got := pods.Items[0]
		assert.Equal(t, pod.UID, got.UID)
		assert.Equal(t, v1.PodSucceeded, got.Status.Phase)
		cs := got.Status.ContainerStatuses[0]
		assert.GreaterOrEqual(t, cs.RestartCount, int32(1))
		assert.Equal(t, int32(0), cs.State.Terminated.ExitCode)
		assert.Equal(t, int32(1), cs.LastTerminationState.Terminated.ExitCode)
	})

	t.Run("container GC keeps the crash loop's dead containers bounded: one besides the newest", func(t *testing.T) {
		pod := f.waitPod(t, "crashloop", 3*time.Minute, func(p *v1.Pod) bool {
			return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 3
		})
		p.WaitForOutput(`container GC: removed \d+ dead container\(s\) and \d+ sandbox\(es\)`, 2*time.Minute)
		var attempts []uint32
		require.Eventually(t, func() bool {
			cs := f.containersOf(t, string(pod.UID))
			attempts = attempts[:0]
			for _, c := range cs {
				attempts = append(attempts, c.Metadata.Attempt)
			}
			return len(cs) == 2
		}, 2*time.Minute, 500*time.Millisecond, "4 or more containers made, 2 kept; attempts %v", attempts)
		assert.GreaterOrEqual(t, max(attempts[0], attempts[1]), uint32(3), "the newest ones are kept")
	})

	t.Run("a graceful delete: preStop, then SIGTERM ignored, 137 at the end of the grace period, then the pod goes", func(t *testing.T) {
		f.Shell(t, `kubectl apply -f yaml/graceful.yaml`)
		gpod := f.waitPod(t, "graceful", 90*time.Second, running)
		w, err := f.Admin.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=graceful"})
		require.NoError(t, err)
		defer w.Stop()
		start := time.Now()
		f.Shell(t, `kubectl delete pod graceful`)
		took := time.Since(start)
		assert.GreaterOrEqual(t, took, 10*time.Second, "the delete waits out the grace period: 3 s of preStop and 7 s of SIGTERM")
		_, err = f.Admin.CoreV1().Pods("default").Get(ctx, "graceful", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "%v", err)
		var last *v1.Pod
		for e := range w.ResultChan() {
			if e.Type == "DELETED" {
				break
			}
			last = e.Object.(*v1.Pod)
		}
		require.NotNil(t, last)
		assert.Equal(t, v1.PodFailed, last.Status.Phase, "the terminal status is written before the pod goes")
		term := last.Status.ContainerStatuses[0].State.Terminated
		require.NotNil(t, term)
		assert.Equal(t, int32(137), term.ExitCode, "killed at the end of the grace period")
		p.WaitForOutput(`syncTerminatingPod default/graceful: stopped 1 container\(s\) and the sandbox \(grace period 10s\)`, 10*time.Second)
		out := p.Stdout()
		assert.Less(t, strings.Index(out, "SyncLoop DELETE source=api pods=[default/graceful]"),
			strings.Index(out, "syncTerminatingPod default/graceful:"), "DELETE, then the termination")
		evs, err := f.Admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=graceful,reason=Killing"})
		require.NoError(t, err)
		require.Len(t, evs.Items, 1)
		assert.Equal(t, "Stopping container app", evs.Items[0].Message)

		// The next collection removes what the deleted pod left.
		require.Eventually(t, func() bool {
			s, err := f.cri.RuntimeService().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{
				Filter: &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(gpod.UID)}}})
			return err == nil && len(s.Items) == 0 && len(f.containersOf(t, string(gpod.UID))) == 0
		}, 2*time.Minute, 500*time.Millisecond, "the deleted pod's sandbox and container collected")
		p.WaitForOutput(`(?s)syncTerminatedPod default/graceful:.*container GC: removed \d+ dead container\(s\) and [1-9]\d* sandbox\(es\)`, 10*time.Second)
	})

	t.Run("a second delete with a shorter grace period cuts the running termination short", func(t *testing.T) {
		f.Shell(t, `kubectl apply -f yaml/graceful.yaml`)
		f.waitPod(t, "graceful", 90*time.Second, running)
		f.Shell(t, `kubectl delete pod graceful --wait=false`)
		f.waitPod(t, "graceful", 30*time.Second, func(p *v1.Pod) bool { return p.DeletionTimestamp != nil })
		f.Shell(t, `kubectl delete pod graceful --grace-period=1 --wait=true`)
		p.WaitForOutput(`syncTerminatingPod default/graceful: stopped 1 container\(s\) and the sandbox \(grace period 1s\)`, 60*time.Second)
		assert.NotRegexp(t, `syncTerminatingPod default/graceful: stopped 1 container\(s\) and the sandbox \(grace period 10s\)(?s:.*)syncTerminatingPod default/graceful: stopped 1 container\(s\) and the sandbox \(grace period 1s\)`,
			p.Stdout()[strings.LastIndex(p.Stdout(), "SyncLoop ADD source=api pods=[default/graceful]"):],
			"the 10 s termination did not run to its end")
	})

	f.Shell(t, `kubectl delete job job-fails job-flaky --ignore-not-found --wait=false; kubectl delete pod --all --wait=true --timeout=120s`)
	assert.Equal(t, 0, p.Stop())
	// This last run saw what the README's run shows, but for the first
	// start of hello (made by the first run here).
	assert.NoError(t, docscheck.Match(chaptertest.ExpectedOutput(t, filepath.Join(f.Root, "chapters/10-container-lifecycle/README.md")), p.Stdout()))
	assert.NotContains(t, p.Stderr(), "panic")
	assert.Equal(t, 0, rt.Stop())
}

func TestChapter10RefusesANegativeMinimumAgeInOneLine(t *testing.T) {
	bin := testcluster.BuildChapter(t, "./chapters/10-container-lifecycle")
	stdout, stderr, code := chaptertest.Run(t, bin, "--minimum-container-ttl-duration=-1s")
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "10-container-lifecycle: invalid value \"-1s\" for flag -minimum-container-ttl-duration: must not be negative (see --help)\n", stderr)
}
