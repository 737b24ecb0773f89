package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
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
	"k8s.io/client-go/kubernetes"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"mykubelet/scripts/docscheck"
	"mykubelet/scripts/readmewalk"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/localcluster"
	"mykubelet/scripts/testkit/testcluster"
)

const node = "stats-node"

type fixture struct {
	bin, root, state, readmePath string
	port                         int
	cluster                      *testcluster.Cluster
	admin                        *kubernetes.Clientset
	token                        string // stats-reader's, the README's $TOKEN
	// commands are the README's transcripts: each "$ command" and the
	// lines it prints, once for each time the README runs it.
	commands map[string][][]string
}

// newFixture builds the chapter, starts a control plane with metrics-server
// (scraping every 10 s) and registers the node with its own credentials.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{bin: testcluster.BuildChapter(t, "./chapters/16-stats-metrics"), root: testcluster.RepoRoot(t),
		state: chaptertest.ShortTempDir(t), port: chaptertest.FreePort(t)}
	f.readmePath = filepath.Join(f.root, "chapters/16-stats-metrics/README.md")
	f.commands = chaptertest.ReadTranscripts(t, f.readmePath).Commands
	f.cluster = testcluster.Start(t, localcluster.WithMetricsServer())
	f.admin = f.cluster.Clientset(t)
	chaptertest.WriteNodeKubeconfig(t, f.state, chaptertest.RegisterNode(t, f.cluster, node))
	return f
}

// local turns a README line into this test's: its cluster's pki, its
// kubelet's port.
func (f *fixture) local(s string) string {
	s = strings.ReplaceAll(s, ".state/cluster/pki/", filepath.Join(f.cluster.Dir(), "pki")+"/")
	s = strings.ReplaceAll(s, `"port":10250`, `"port":`+strconv.Itoa(f.port))
	return strings.ReplaceAll(s, "127.0.0.1:10250", "127.0.0.1:"+strconv.Itoa(f.port))
}

// sh runs a shell line as the README's reader would (admin kubeconfig,
// kubectl on PATH, $NODE_NAME and $TOKEN set, in the repository's root)
// and returns its output and exit code.
func (f *fixture) sh(t *testing.T, script string) (string, int) {
	t.Helper()
	cmd := exec.Command("bash", "-c", f.local(script))
	cmd.Dir = f.root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+f.cluster.AdminKubeconfig, "NODE_NAME="+node, "TOKEN="+f.token,
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

// readme runs a "$ command" of the README's transcripts and checks what it
// prints against them as the walk does (readmewalk.Matcher), retrying
// every 2 s for at most within; it returns the output.
func (f *fixture) readme(t *testing.T, command string, within time.Duration) string {
	t.Helper()
	return f.readmeN(t, command, 0, within)
}

// readmeN is readme for the README's n-th transcript of command (from 0).
func (f *fixture) readmeN(t *testing.T, command string, n int, within time.Duration) string {
	t.Helper()
	all := f.commands[command]
	require.Greater(t, len(all), n, "the README has no transcript %d of %q", n, command)
	var want []string
	for _, l := range all[n] {
		want = append(want, f.local(l))
	}
	var out string
	var merr error
	chaptertest.Eventually(t, within, 2*time.Second, command, func() (bool, string) {
		out, _ = f.sh(t, command)
		merr = readmewalk.Matcher{NodeName: node}.Match(want, out, true)
		return merr == nil, fmt.Sprint(merr)
	})
	return out
}

// get asks the kubelet for path with a bearer token, checking its
// certificate against the cluster CA.
func (f *fixture) get(t *testing.T, path, token string) (int, []byte) {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.cluster.CAPool()}}}
	req, err := http.NewRequest(http.MethodGet, "https://127.0.0.1:"+strconv.Itoa(f.port)+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

func (f *fixture) summary(t *testing.T) *statsapi.Summary {
	t.Helper()
	code, b := f.get(t, "/stats/summary", f.token)
	require.Equal(t, http.StatusOK, code, string(b))
	var s statsapi.Summary
	require.NoError(t, json.Unmarshal(b, &s))
	return &s
}

func getPod(t *testing.T, f *fixture, name string) *v1.Pod {
	t.Helper()
	p, err := f.admin.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return p
}

func podStats(s *statsapi.Summary, name string) *statsapi.PodStats {
	for i := range s.Pods {
		if s.Pods[i].PodRef.Name == name && s.Pods[i].PodRef.Namespace == "default" {
			return &s.Pods[i]
		}
	}
	return nil
}

var millicoresRe = regexp.MustCompile(`(?m)^\S+\s+(\d+)m\s`)

// topCPU is the CPU column of `kubectl top node|pod NAME`, in millicores.
func (f *fixture) topCPU(t *testing.T, what string) (int, bool) {
	t.Helper()
	out, code := f.sh(t, "kubectl top "+what+" --no-headers")
	m := millicoresRe.FindStringSubmatch(out)
	if code != 0 || m == nil {
		return 0, false
	}
	n, _ := strconv.Atoi(m[1])
	return n, true
}

// metricValue is the value of the sample line that starts with series
// (name and labels, as printed) in a Prometheus text exposition.
func metricValue(exposition, series string) (float64, bool) {
	for _, l := range strings.Split(exposition, "\n") {
		if rest, ok := strings.CutPrefix(l, series+" "); ok {
			v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			return v, err == nil
		}
	}
	return 0, false
}

func TestChapter16EndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and metrics-server")
	}
	f := newFixture(t)
	ctx := context.Background()

	// The metrics API first: the README checks it before the kubelet runs.
	f.readme(t, "kubectl get apiservice v1beta1.metrics.k8s.io", 2*time.Minute)

	p := chaptertest.Start(t, f.bin, "--node-name", node, "--state-dir", f.state, "--port", strconv.Itoa(f.port))
	p.WaitForOutput(`csr: waiting`, time.Minute)
	f.ok(t, `kubectl get csr --field-selector spec.signerName=kubernetes.io/kubelet-serving | awk -v u="system:node:$NODE_NAME" '$4 == u && $NF == "Pending" {print $1}' | xargs -r kubectl certificate approve`)
	p.WaitForOutput(`kubelet server: listening on https://127\.0\.0\.1:`+strconv.Itoa(f.port), time.Minute)
	p.WaitForOutput(`(?m)^stats: /stats/summary`, time.Minute)
	p.WaitForOutput(`node `+node+`: status written \(.*\): Ready=True`, time.Minute)

	var idle int
	t.Run("kubectl top node: figures after two scrapes", func(t *testing.T) {
		took := chaptertest.Eventually(t, 2*time.Minute, 2*time.Second, "kubectl top node", func() (bool, string) {
			out, code := f.sh(t, `kubectl top node "$NODE_NAME"`)
			return code == 0, out
		})
		t.Logf("kubectl top node answered %s after the node was Ready (the README says about 30 s)", took.Round(time.Second))
		f.readme(t, `kubectl top node "$NODE_NAME"`, 30*time.Second)
		var ok bool
		idle, ok = f.topCPU(t, "node "+node)
		require.True(t, ok)
		t.Logf("the idle node: %dm", idle)
	})

	t.Run("a busy loop burns a core, a sleep does not", func(t *testing.T) {
		f.ok(t, "kubectl apply -f yaml/metrics/burner.yaml")
		f.ok(t, `kubectl run sleeper --image=busybox --restart=Never --command -- sleep 3600`)
		f.ok(t, "kubectl wait --for=condition=Ready pod/burner pod/sleeper --timeout=120s")
		var burner int
		chaptertest.Eventually(t, 2*time.Minute, 2*time.Second, "kubectl top pod burner", func() (bool, string) {
			var ok bool
			burner, ok = f.topCPU(t, "pod burner")
			return ok && burner >= 200, fmt.Sprintf("burner %dm", burner)
		})
		t.Logf("kubectl top pod burner: %dm", burner)
		f.readme(t, "kubectl top pod burner", 30*time.Second)
		chaptertest.Eventually(t, time.Minute, 2*time.Second, "the node's CPU with the burner", func() (bool, string) {
			n, ok := f.topCPU(t, "node "+node)
			return ok && n >= idle+150, fmt.Sprintf("%dm (idle %dm)", n, idle)
		})
	})

	t.Run("/stats/summary: allowed with nodes/stats, refused without", func(t *testing.T) {
		f.ok(t, "kubectl apply -f yaml/metrics/stats-reader.yaml")
		f.readme(t, "kubectl auth can-i get nodes --subresource=stats --all-namespaces --as=system:serviceaccount:default:stats-reader", 30*time.Second)
		f.readme(t, "kubectl auth can-i get nodes --subresource=proxy --all-namespaces --as=system:serviceaccount:default:stats-reader", 30*time.Second)
		f.readme(t, "kubectl auth can-i get nodes --subresource=stats --all-namespaces --as=system:serviceaccount:default:default", 30*time.Second)
		f.token = strings.TrimSpace(f.ok(t, "kubectl create token stats-reader"))
		f.readme(t, `curl -s --cacert .state/cluster/pki/ca.crt -H "Authorization: Bearer $TOKEN" https://127.0.0.1:10250/stats/summary | jq -r '.node.nodeName'`, 30*time.Second)
		f.readme(t, `curl -s --cacert .state/cluster/pki/ca.crt -H "Authorization: Bearer $TOKEN" https://127.0.0.1:10250/stats/summary | jq -c '.pods[] | select(.podRef.name == "burner") | .containers[] | {name, usageNanoCores: .cpu.usageNanoCores, workingSetBytes: .memory.workingSetBytes}'`, 30*time.Second)

		var s *statsapi.Summary
		chaptertest.Eventually(t, 30*time.Second, 2*time.Second, "the burner's usageNanoCores in the summary", func() (bool, string) {
			s = f.summary(t)
			ps := podStats(s, "burner")
			if ps == nil || len(ps.Containers) != 1 || ps.Containers[0].CPU == nil || ps.Containers[0].CPU.UsageNanoCores == nil {
				return false, fmt.Sprintf("%+v", ps)
			}
			return *ps.Containers[0].CPU.UsageNanoCores >= 200_000_000, fmt.Sprint(*ps.Containers[0].CPU.UsageNanoCores)
		})
		assert.Equal(t, node, s.Node.NodeName)
		// The sleeper's container, read the same way, took next to no
		// CPU (metrics-server would drop a container at exactly 0: the
		// summary says it as the runtime measured it).
		chaptertest.Eventually(t, 30*time.Second, 2*time.Second, "the sleeper's usageNanoCores in the summary", func() (bool, string) {
			ps := podStats(f.summary(t), "sleeper")
			if ps == nil || len(ps.Containers) != 1 || ps.Containers[0].CPU == nil || ps.Containers[0].CPU.UsageNanoCores == nil {
				return false, fmt.Sprintf("%+v", ps)
			}
			n := *ps.Containers[0].CPU.UsageNanoCores
			assert.Less(t, n, uint64(50_000_000), "a sleep burns nothing")
			return true, ""
		})
		f.ok(t, "kubectl delete pod sleeper --wait=false")
		require.NotNil(t, s.Node.CPU)
		require.NotNil(t, s.Node.CPU.UsageCoreNanoSeconds)
		burner := podStats(s, "burner")
		c := burner.Containers[0]
		assert.Equal(t, "burner", c.Name)
		require.NotNil(t, c.CPU.UsageCoreNanoSeconds)
		assert.Greater(t, *c.CPU.UsageCoreNanoSeconds, uint64(0))
		assert.GreaterOrEqual(t, *s.Node.CPU.UsageCoreNanoSeconds, *c.CPU.UsageCoreNanoSeconds, "the node's CPU counts its pods'")
		require.NotNil(t, s.Node.Memory)
		require.NotNil(t, s.Node.Memory.WorkingSetBytes)
		require.NotNil(t, s.Node.Memory.AvailableBytes)
		assert.Greater(t, *s.Node.Memory.AvailableBytes, uint64(0))
		require.NotNil(t, s.Node.Fs, "the state directory's filesystem")
		require.NotNil(t, s.Node.Fs.CapacityBytes)
		assert.Greater(t, *s.Node.Fs.CapacityBytes, uint64(0))
		var system []string
		for _, sc := range s.Node.SystemContainers {
			system = append(system, sc.Name)
		}
		assert.Subset(t, system, []string{"kubelet", "pods"})
		require.NotNil(t, c.Memory)
		require.NotNil(t, c.Memory.WorkingSetBytes)
		require.NotNil(t, c.Rootfs, "the writable layer")
		assert.NotNil(t, burner.EphemeralStorage)
		// The service-account token's projected volume, which admission
		// gave the pod, is measured like any mounted volume.
		var token string
		for _, vol := range getPod(t, f, "burner").Spec.Volumes {
			if strings.HasPrefix(vol.Name, "kube-api-access-") {
				token = vol.Name
			}
		}
		require.NotEmpty(t, token)
		var names []string
		for _, v := range burner.VolumeStats {
			names = append(names, v.Name)
		}
		assert.Contains(t, names, token, "the pod's volumes in the summary")

		out := f.readme(t, `curl -s --cacert .state/cluster/pki/ca.crt -H "Authorization: Bearer $(kubectl create token default)" https://127.0.0.1:10250/stats/summary`, 10*time.Second)
		t.Logf("as default: %s", out)
		def := strings.TrimSpace(f.ok(t, "kubectl create token default"))
		code, body := f.get(t, "/stats/summary", def)
		assert.Equal(t, http.StatusForbidden, code)
		assert.Equal(t, "Forbidden (user=system:serviceaccount:default:default, verb=get, resource=nodes, subresource(s)=[stats])\n", string(body))
		code, _ = f.get(t, "/pods", f.token)
		assert.Equal(t, http.StatusForbidden, code, "nodes/stats opens no other path")
	})

	t.Run("/metrics/resource: the burner's series, as metrics-server reads them", func(t *testing.T) {
		f.readme(t, `curl -s --cacert .state/cluster/pki/ca.crt -H "Authorization: Bearer $TOKEN" https://127.0.0.1:10250/metrics/resource | grep -E '^node_cpu_usage|cpu_usage_seconds_total\{.*pod="burner"'`, 30*time.Second)
		code, b := f.get(t, "/metrics/resource", f.token)
		require.Equal(t, http.StatusOK, code, string(b))
		text := string(b)
		for _, series := range []string{`container_cpu_usage_seconds_total{container="burner",namespace="default",pod="burner"}`,
			`container_memory_working_set_bytes{container="burner",namespace="default",pod="burner"}`,
			`container_start_time_seconds{container="burner",namespace="default",pod="burner"}`,
			`pod_cpu_usage_seconds_total{namespace="default",pod="burner"}`,
			`pod_memory_working_set_bytes{namespace="default",pod="burner"}`,
			`node_cpu_usage_seconds_total`, `node_memory_working_set_bytes`} {
			v, ok := metricValue(text, series)
			assert.True(t, ok, "no %s in:\n%s", series, text)
			assert.Greater(t, v, 0.0, series)
		}
		v, ok := metricValue(text, "scrape_error")
		assert.True(t, ok && v == 0, "scrape_error 0: the summary was read")
	})

	t.Run("an HPA scales hpa-demo up while its pod burns, down when it stops", func(t *testing.T) {
		f.ok(t, "kubectl delete pod burner")
		f.ok(t, "kubectl apply -f yaml/metrics/hpa.yaml")
		f.ok(t, "kubectl rollout status deployment/hpa-demo --timeout=120s")
		f.readme(t, "kubectl get hpa hpa-demo", 90*time.Second)
		f.ok(t, "kubectl annotate pods -l app=hpa-demo burn=yes --overwrite")
		start := time.Now()
		f.ok(t, "kubectl wait --for=jsonpath='{.status.desiredReplicas}'=4 hpa/hpa-demo --timeout=4m")
		t.Logf("the HPA wanted 4 pods %s after the annotation", time.Since(start).Round(time.Second))
		f.ok(t, "kubectl rollout status deployment/hpa-demo --timeout=2m")
		pods, err := f.admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=hpa-demo"})
		require.NoError(t, err)
		assert.Len(t, pods.Items, 4)
		for _, pod := range pods.Items {
			assert.Equal(t, node, pod.Spec.NodeName)
		}
		// The README's second transcript of `kubectl get hpa hpa-demo`:
		// 4 replicas.
		f.readmeN(t, "kubectl get hpa hpa-demo", 1, time.Minute)
		up := f.readme(t, "kubectl describe hpa hpa-demo | grep SuccessfulRescale", 30*time.Second)
		assert.Contains(t, up, "New size: 4; reason: cpu resource utilization (percentage of request) above target")

		f.ok(t, "kubectl annotate pods -l app=hpa-demo burn=no --overwrite")
		start = time.Now()
		f.ok(t, "kubectl wait --for=jsonpath='{.status.desiredReplicas}'=1 hpa/hpa-demo --timeout=4m")
		t.Logf("the HPA wanted 1 pod %s after the burning stopped", time.Since(start).Round(time.Second))
		f.readmeN(t, "kubectl describe hpa hpa-demo | grep SuccessfulRescale", 1, time.Minute)
		chaptertest.Eventually(t, 2*time.Minute, 2*time.Second, "hpa-demo down to one pod", func() (bool, string) {
			pods, err := f.admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=hpa-demo"})
			if err != nil {
				return false, err.Error()
			}
			return len(pods.Items) == 1 && pods.Items[0].Status.Phase == v1.PodRunning, fmt.Sprint(len(pods.Items), " pods")
		})
	})

	t.Run("/metrics: the pod start SLI counts the pods started, running pods what runs", func(t *testing.T) {
		f.readme(t, `curl -s --cacert .state/cluster/pki/ca.crt -H "Authorization: Bearer $TOKEN" https://127.0.0.1:10250/metrics | grep -E '^kubelet_(pod_start_sli_duration_seconds_(count|sum)|running_pods) '`, 30*time.Second)
		var text string
		chaptertest.Eventually(t, time.Minute, 2*time.Second, "kubelet_running_pods 1 (hpa-demo's last pod)", func() (bool, string) {
			code, b := f.get(t, "/metrics", f.token)
			text = string(b)
			v, ok := metricValue(text, "kubelet_running_pods")
			return code == http.StatusOK && ok && v == 1, fmt.Sprint(code, " ", v)
		})
		// burner, sleeper, and hpa-demo's four.
		n, ok := metricValue(text, "kubelet_pod_start_sli_duration_seconds_count")
		assert.True(t, ok)
		assert.GreaterOrEqual(t, n, 6.0, "one observation per pod started")
		sum, _ := metricValue(text, "kubelet_pod_start_sli_duration_seconds_sum")
		t.Logf("pod start SLI: %v pods, %.2f s in all", n, sum)
		for _, name := range []string{"kubelet_pleg_relist_duration_seconds_count", `kubelet_runtime_operations_total{operation_type="run_podsandbox"}`} {
			v, ok := metricValue(text, name)
			assert.True(t, ok && v > 0, "%s moves", name)
		}
		code, _ := f.get(t, "/metrics/probes", f.token)
		assert.Equal(t, http.StatusOK, code, "nodes/metrics opens /metrics/probes")
	})

	t.Run("/healthz and /configz, as the admin", func(t *testing.T) {
		f.readme(t, `curl -s --cacert .state/cluster/pki/ca.crt --cert .state/cluster/pki/admin.crt --key .state/cluster/pki/admin.key "https://127.0.0.1:10250/healthz?verbose"`, 30*time.Second)
		f.readme(t, `curl -s --cacert .state/cluster/pki/ca.crt --cert .state/cluster/pki/admin.crt --key .state/cluster/pki/admin.key https://127.0.0.1:10250/configz | jq -c '.kubeletconfig | {syncFrequency, maxPods, port}'`, 30*time.Second)
		code, body := f.get(t, "/healthz", f.token)
		assert.Equal(t, http.StatusForbidden, code, "stats-reader has no nodes/healthz: %s", body)
	})

	assert.Equal(t, 0, p.Stop())
	assert.NotContains(t, p.Stderr(), "panic")
	assert.NoError(t, docscheck.Match(chaptertest.ExpectedOutput(t, f.readmePath),
		strings.ReplaceAll(p.Stdout(), "127.0.0.1:"+strconv.Itoa(f.port), "127.0.0.1:10250")))

	t.Run("cleanup: the README's commands leave no pod", func(t *testing.T) {
		p := chaptertest.Start(t, f.bin, "--node-name", node, "--state-dir", f.state, "--port", strconv.Itoa(f.port))
		p.WaitForOutput(`kubelet server: listening`, time.Minute)
		f.ok(t, "kubectl delete -f yaml/metrics/ --ignore-not-found --cascade=foreground")
		f.readme(t, "kubectl get pods -l app=hpa-demo", 30*time.Second)
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
