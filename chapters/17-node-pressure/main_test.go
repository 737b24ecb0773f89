package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"mykubelet/scripts/docscheck"
	"mykubelet/scripts/readmewalk"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

const node = "pressure-node"

type fixture struct {
	bin, root, state, readmePath string
	port                         int
	cluster                      *testcluster.Cluster
	admin                        *kubernetes.Clientset
	// commands are the README's transcripts: each "$ command" and the
	// lines it prints, once for each time the README runs it.
	commands map[string][][]string
	// starts are the README's commands that start the kubelet, in order.
	starts []string
}

// newFixture builds the chapter, reads its README, starts a control plane
// (its controller manager taints nodes by condition) and registers the
// node with its own credentials.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{bin: testcluster.BuildChapter(t, "./chapters/17-node-pressure"), root: testcluster.RepoRoot(t),
		state: chaptertest.ShortTempDir(t), port: chaptertest.FreePort(t)}
	f.readmePath = filepath.Join(f.root, "chapters/17-node-pressure/README.md")
	tr := chaptertest.ReadTranscripts(t, f.readmePath)
	f.commands, f.starts = tr.Commands, tr.Starts
	f.cluster = testcluster.Start(t)
	f.admin = f.cluster.Clientset(t)
	chaptertest.WriteNodeKubeconfig(t, f.state, chaptertest.RegisterNode(t, f.cluster, node))
	return f
}

// kubeletArgs are the flags of the README's n-th command that starts the
// kubelet, with this test's node, state directory and port.
func (f *fixture) kubeletArgs(t *testing.T, n int) []string {
	t.Helper()
	require.Greater(t, len(f.starts), n, "the README starts the kubelet fewer than %d times", n+1)
	fields := strings.Fields(f.starts[n])
	require.Equal(t, []string{"go", "run", "./chapters/17-node-pressure", "--node-name", `"$NODE_NAME"`}, fields[:5], f.starts[n])
	return append([]string{"--node-name", node, "--state-dir", f.state, "--port", strconv.Itoa(f.port)}, fields[5:]...)
}

// local turns a README line into this test's: its cluster's pki, its
// kubelet's port.
func (f *fixture) local(s string) string {
	s = strings.ReplaceAll(s, ".state/cluster/pki/", filepath.Join(f.cluster.Dir(), "pki")+"/")
	return strings.ReplaceAll(s, "127.0.0.1:10250", "127.0.0.1:"+strconv.Itoa(f.port))
}

// sh runs a shell line as the README's reader would (admin kubeconfig,
// kubectl on PATH, $NODE_NAME set, in the repository's root) and returns
// its output and exit code.
func (f *fixture) sh(t *testing.T, script string) (string, int) {
	t.Helper()
	cmd := exec.Command("bash", "-c", f.local(script))
	cmd.Dir = f.root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+f.cluster.AdminKubeconfig, "NODE_NAME="+node,
		"PATH="+testcluster.BinDir()+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
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
	out, code := f.sh(t, script)
	require.Equal(t, 0, code, "%s:\n%s", script, out)
	return out
}

// readme runs the README's n-th transcript of command (from 0) and checks
// what it prints against it as the walk does (readmewalk.Matcher),
// retrying every 2 s for at most within; it returns the output.
func (f *fixture) readme(t *testing.T, command string, n int, within time.Duration) string {
	t.Helper()
	all := f.commands[command]
	require.Greater(t, len(all), n, "the README has no transcript %d of %q", n, command)
	var want []string
	for _, l := range all[n] {
		want = append(want, f.local(l))
	}
	var out string
	chaptertest.Eventually(t, within, 2*time.Second, command, func() (bool, string) {
		out, _ = f.sh(t, command)
		err := readmewalk.Matcher{NodeName: node}.Match(want, out, true)
		return err == nil, fmt.Sprint(err)
	})
	return out
}

func (f *fixture) node(t *testing.T) *v1.Node {
	t.Helper()
	n, err := f.admin.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	require.NoError(t, err)
	return n
}

func (f *fixture) pod(t *testing.T, name string) *v1.Pod {
	t.Helper()
	p, err := f.admin.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return p
}

func condition(n *v1.Node, typ v1.NodeConditionType) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func hasTaint(n *v1.Node, key string) bool {
	for _, tn := range n.Spec.Taints {
		if tn.Key == key {
			return true
		}
	}
	return false
}

// memoryPressure is the node's MemoryPressure status ("" when it has none).
func (f *fixture) memoryPressure(t *testing.T) v1.ConditionStatus {
	t.Helper()
	if c := condition(f.node(t), v1.NodeMemoryPressure); c != nil {
		return c.Status
	}
	return ""
}

// summary reads /stats/summary with the admin's client certificate.
func (f *fixture) summary(t *testing.T) *statsapi.Summary {
	t.Helper()
	pki := filepath.Join(f.cluster.Dir(), "pki")
	out := f.ok(t, fmt.Sprintf("curl -sf --cacert %s/ca.crt --cert %s/admin.crt --key %s/admin.key https://127.0.0.1:%d/stats/summary", pki, pki, pki, f.port))
	var s statsapi.Summary
	require.NoError(t, json.Unmarshal([]byte(out), &s), out)
	return &s
}

func (f *fixture) events(t *testing.T, selector fields.Set) []v1.Event {
	t.Helper()
	l, err := f.admin.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: selector.AsSelector().String()})
	require.NoError(t, err)
	return l.Items
}

const evictedMessage = "The node was low on resource: memory. Threshold quantity: 100Mi, available: "

func TestChapter17EndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	f := newFixture(t)
	ctx := context.Background()

	p := chaptertest.Start(t, f.bin, f.kubeletArgs(t, 0)...)
	p.WaitForOutput(`csr: waiting`, time.Minute)
	f.ok(t, `kubectl get csr --field-selector spec.signerName=kubernetes.io/kubelet-serving | awk -v u="system:node:$NODE_NAME" '$4 == u && $NF == "Pending" {print $1}' | xargs -r kubectl certificate approve`)
	p.WaitForOutput(`kubelet server: listening on https://127\.0\.0\.1:`+strconv.Itoa(f.port), time.Minute)
	p.WaitForOutput(`(?m)^node pressure: memory 1Gi`, time.Minute)
	p.WaitForOutput(`node `+node+`: status written \(.*\): Ready=True`, time.Minute)

	t.Run("the node has the mock machine's 1Gi, and no pressure", func(t *testing.T) {
		f.readme(t, `kubectl get node "$NODE_NAME" -o jsonpath='{.status.capacity.memory}{"\n"}'`, 0, 30*time.Second)
		f.readme(t, `kubectl get node "$NODE_NAME" -o jsonpath='{range .status.conditions[?(@.type=="MemoryPressure")]}{.type} {.status} {.reason}: {.message}{"\n"}{end}'`, 0, 30*time.Second)
		f.readme(t, `curl -s --cacert .state/cluster/pki/ca.crt --cert .state/cluster/pki/admin.crt --key .state/cluster/pki/admin.key https://127.0.0.1:10250/stats/summary | jq -r '.node.memory | "available \(.availableBytes / 1048576 | floor)Mi of \((.availableBytes + .workingSetBytes) / 1048576 | floor)Mi"'`, 0, 30*time.Second)
		n := f.node(t)
		mem := n.Status.Capacity[v1.ResourceMemory]
		assert.Equal(t, int64(1<<30), mem.Value(), "the node's memory is --fake-memory-capacity")
		for _, typ := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
			c := condition(n, typ)
			require.NotNil(t, c, typ)
			assert.Equal(t, v1.ConditionFalse, c.Status, typ)
		}
	})

	var evictedSeen time.Time
	t.Run("the BestEffort pod grows until it is evicted; the Guaranteed pod runs on", func(t *testing.T) {
		f.ok(t, "kubectl apply -f yaml/pressure/steady.yaml")
		f.ok(t, "kubectl wait --for=condition=Ready pod/steady --timeout=120s")
		f.ok(t, "kubectl apply -f yaml/pressure/grower.yaml")
		took := chaptertest.Eventually(t, 3*time.Minute, 2*time.Second, "MemoryPressure True", func() (bool, string) {
			s := f.memoryPressure(t)
			return s == v1.ConditionTrue, string(s)
		})
		t.Logf("MemoryPressure True %s after the grower was applied (the README says within a minute)", took.Round(time.Second))

		// The controller manager taints the node; admission refuses a
		// BestEffort pod bound to it, while the pressure lasts.
		f.readme(t, `kubectl describe node "$NODE_NAME" | grep -E '^Taints:|MemoryPressure'`, 0, 30*time.Second)
		assert.True(t, hasTaint(f.node(t), v1.TaintNodeMemoryPressure), "the node lifecycle controller's taint")
		f.ok(t, `kubectl run refused --image=busybox --restart=Never --overrides="{\"spec\":{\"nodeName\":\"$NODE_NAME\"}}" -- sleep 3600`)
		f.readme(t, `kubectl get pod refused -o jsonpath='{.status.phase} {.status.reason}: {.status.message}{"\n"}'`, 0, 30*time.Second)
		refused := f.pod(t, "refused")
		assert.Equal(t, v1.PodFailed, refused.Status.Phase)
		assert.Equal(t, "Evicted", refused.Status.Reason)
		assert.Equal(t, "Pod was rejected: The node had condition: [MemoryPressure]. ", refused.Status.Message)
		for _, cs := range refused.Status.ContainerStatuses {
			assert.Empty(t, cs.ContainerID, "a refused pod never runs")
		}

		f.ok(t, "kubectl wait --for=jsonpath='{.status.reason}'=Evicted pod/grower --timeout=60s")
		evictedSeen = time.Now()
		assert.Equal(t, v1.ConditionTrue, f.memoryPressure(t), "the condition holds after the eviction, for the transition period")
		f.readme(t, `kubectl get pod steady grower -o custom-columns=NAME:.metadata.name,PHASE:.status.phase,REASON:.status.reason,QOS:.status.qosClass`, 0, 30*time.Second)
		f.readme(t, `kubectl get pod grower -o jsonpath='{.status.message}{"\n"}'`, 0, 10*time.Second)
		f.readme(t, `kubectl get pod grower -o jsonpath='{range .status.conditions[?(@.type=="DisruptionTarget")]}{.type} {.status} {.reason}: {.message}{"\n"}{end}'`, 0, 10*time.Second)
		f.readme(t, `kubectl get events --field-selector involvedObject.name=grower,reason=Evicted`, 0, 30*time.Second)

		grower := f.pod(t, "grower")
		assert.Equal(t, v1.PodFailed, grower.Status.Phase)
		assert.True(t, strings.HasPrefix(grower.Status.Message, evictedMessage), grower.Status.Message)
		assert.Contains(t, grower.Status.Message, "Container grower was using ")
		var disruption *v1.PodCondition
		for i := range grower.Status.Conditions {
			if grower.Status.Conditions[i].Type == v1.DisruptionTarget {
				disruption = &grower.Status.Conditions[i]
			}
		}
		require.NotNil(t, disruption, "the DisruptionTarget condition")
		assert.Equal(t, v1.ConditionTrue, disruption.Status)
		assert.Equal(t, "TerminationByKubelet", disruption.Reason)
		assert.Equal(t, grower.Status.Message, disruption.Message)
		evs := f.events(t, fields.Set{"involvedObject.name": "grower", "reason": "Evicted"})
		require.Len(t, evs, 1, "one Evicted event")
		assert.Equal(t, v1.EventTypeWarning, evs[0].Type)
		assert.Equal(t, grower.Status.Message, evs[0].Message)

		steady := f.pod(t, "steady")
		assert.Equal(t, v1.PodRunning, steady.Status.Phase, "the Guaranteed pod runs on")
		assert.Equal(t, int32(0), steady.Status.ContainerStatuses[0].RestartCount)
		assert.Empty(t, steady.Status.Reason)

		stderr := p.Stderr()
		for _, line := range []string{"Eviction manager: attempting to reclaim", "Eviction manager: pods ranked for eviction"} {
			assert.Contains(t, stderr, line)
		}
	})

	t.Run("after the transition period: no pressure, no taint; the evicted pod is not restarted", func(t *testing.T) {
		require.False(t, evictedSeen.IsZero())
		chaptertest.Eventually(t, 150*time.Second, 2*time.Second, "MemoryPressure False", func() (bool, string) {
			s := f.memoryPressure(t)
			return s == v1.ConditionFalse, string(s)
		})
		after := time.Since(evictedSeen)
		t.Logf("MemoryPressure False %s after the grower was seen evicted (transition period 1m)", after.Round(time.Second))
		// The last pass that saw the threshold met came before the
		// grower was seen Failed; the condition may go no sooner than a
		// minute after that pass (a generous margin for the time
		// between that pass and the status we saw).
		assert.GreaterOrEqual(t, after, 40*time.Second, "the condition held for the transition period")
		chaptertest.Eventually(t, 30*time.Second, 2*time.Second, "the memory-pressure taint removed", func() (bool, string) {
			n := f.node(t)
			return !hasTaint(n, v1.TaintNodeMemoryPressure), fmt.Sprint(n.Spec.Taints)
		})
		f.readme(t, `kubectl describe node "$NODE_NAME" | grep -E '^Taints:|MemoryPressure'`, 1, 30*time.Second)
		assert.Empty(t, f.node(t).Spec.Taints)

		grower := f.pod(t, "grower")
		assert.Equal(t, v1.PodFailed, grower.Status.Phase, "an evicted pod stays failed")
		require.Len(t, grower.Status.ContainerStatuses, 1)
		cs := grower.Status.ContainerStatuses[0]
		assert.Equal(t, int32(0), cs.RestartCount, "an evicted pod is not restarted")
		assert.Nil(t, cs.State.Running, "its container does not run")
		assert.Equal(t, v1.PodFailed, f.pod(t, "refused").Status.Phase, "a refused pod is not admitted later")
		assert.Equal(t, v1.PodRunning, f.pod(t, "steady").Status.Phase)

		f.ok(t, "kubectl delete pod steady grower refused")
	})

	assert.Equal(t, 0, p.Stop())
	assert.NotContains(t, p.Stderr(), "panic")
	assert.NoError(t, docscheck.Match(chaptertest.ExpectedOutput(t, f.readmePath),
		strings.ReplaceAll(p.Stdout(), "127.0.0.1:"+strconv.Itoa(f.port), "127.0.0.1:10250")))

	t.Run("a full image filesystem: nothing to free while the images are in use, down to the low threshold once unused", func(t *testing.T) {
		p := chaptertest.Start(t, f.bin, f.kubeletArgs(t, 1)...)
		p.WaitForOutput(`node `+node+`: status written \(.*\): Ready=True`, time.Minute)
		f.ok(t, "kubectl apply -f yaml/pressure/images.yaml")
		f.ok(t, "kubectl wait --for=condition=Ready pod/several-images --timeout=120s")
		out := f.readme(t, `curl -s --cacert .state/cluster/pki/ca.crt --cert .state/cluster/pki/admin.crt --key .state/cluster/pki/admin.key https://127.0.0.1:10250/stats/summary | jq -r '.node.runtime.imageFs | "images: \(.usedBytes / 1048576 | floor)Mi of \(.capacityBytes / 1048576 | floor)Mi"'`, 0, 30*time.Second)
		t.Logf("with the pod: %s", strings.TrimSpace(out))
		fs := f.summary(t).Node.Runtime.ImageFs
		require.NotNil(t, fs)
		require.NotNil(t, fs.CapacityBytes)
		require.NotNil(t, fs.UsedBytes)
		assert.Equal(t, uint64(300<<20), *fs.CapacityBytes, "--fake-imagefs-capacity")
		assert.Greater(t, *fs.UsedBytes*100, *fs.CapacityBytes*50, "the pod's images fill more than the high threshold")
		assert.Less(t, *fs.UsedBytes*100, *fs.CapacityBytes*85, "and less than the eviction manager's imagefs.available<15%")

		f.readme(t, `kubectl get events --field-selector involvedObject.kind=Node,involvedObject.name="$NODE_NAME",reason=FreeDiskSpaceFailed -o custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message | head -2`, 0, time.Minute)
		assert.Equal(t, v1.PodRunning, f.pod(t, "several-images").Status.Phase, "the GC deletes no image in use")
		assert.Equal(t, v1.ConditionFalse, condition(f.node(t), v1.NodeDiskPressure).Status, "below the eviction threshold: no DiskPressure")

		f.ok(t, "kubectl delete pod several-images")
		p.WaitForLog(`Removing image to free bytes`, 3*time.Minute)
		f.readme(t, `curl -s --cacert .state/cluster/pki/ca.crt --cert .state/cluster/pki/admin.crt --key .state/cluster/pki/admin.key https://127.0.0.1:10250/stats/summary | jq -r '.node.runtime.imageFs | if .usedBytes * 100 <= .capacityBytes * 40 then "at most 40% used" else "\(.usedBytes * 100 / .capacityBytes | floor)% used" end'`, 0, time.Minute)
		fs = f.summary(t).Node.Runtime.ImageFs
		t.Logf("after the GC: %d of %d bytes", *fs.UsedBytes, *fs.CapacityBytes)
		assert.LessOrEqual(t, *fs.UsedBytes*100, *fs.CapacityBytes*40)
		assert.Equal(t, 0, p.Stop())
		assert.NotContains(t, p.Stderr(), "panic")
	})

	t.Run("cleanup: the README's commands leave no pod", func(t *testing.T) {
		p := chaptertest.Start(t, f.bin, f.kubeletArgs(t, 2)...)
		p.WaitForOutput(`kubelet server: listening`, time.Minute)
		f.ok(t, "kubectl delete -f yaml/pressure/ --ignore-not-found")
		f.ok(t, "kubectl delete pod refused --ignore-not-found")
		f.readme(t, "kubectl get pods", 0, 30*time.Second)
		chaptertest.Eventually(t, time.Minute, 2*time.Second, "no pod left", func() (bool, string) {
			pods, err := f.admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			return len(pods.Items) == 0, fmt.Sprint(len(pods.Items), " pods")
		})
		assert.Equal(t, 0, p.Stop())
	})
}
