package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mykubelet/mylib/statedir"
	"mykubelet/scripts/docscheck"
	"mykubelet/scripts/readmewalk"
	"mykubelet/scripts/testkit/chaptertest"
)

const node = "probe-node"

type fixture struct {
	*chaptertest.Fixture
	state string
}

func (f *fixture) pod(t *testing.T, name string) *v1.Pod {
	t.Helper()
	p, err := f.Admin.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return p
}

func container(p *v1.Pod) v1.ContainerStatus {
	if len(p.Status.ContainerStatuses) == 0 {
		return v1.ContainerStatus{}
	}
	return p.Status.ContainerStatuses[0]
}

func podCondition(p *v1.Pod, c v1.PodConditionType) v1.ConditionStatus {
	for _, x := range p.Status.Conditions {
		if x.Type == c {
			return x.Status
		}
	}
	return ""
}

// endpointReady is the ready condition of the Service's one endpoint, as
// the EndpointSlice controller wrote it ("" while there is none).
func (f *fixture) endpointReady(t testing.TB, service string) string {
	t.Helper()
	list, err := f.Admin.DiscoveryV1().EndpointSlices("default").List(context.Background(),
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	require.NoError(t, err)
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil {
				return fmt.Sprint(*e.Conditions.Ready)
			}
		}
	}
	return ""
}

// messages are the kubelet's events on the pod with reason, by message.
func (f *fixture) messages(t *testing.T, pod, reason string) []string {
	t.Helper()
	evs, err := f.Admin.CoreV1().Events("default").List(context.Background(),
		metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod + ",reason=" + reason})
	require.NoError(t, err)
	var out []string
	for _, e := range evs.Items {
		if e.Source.Component == "kubelet" && e.Source.Host == node {
			out = append(out, e.Message)
		}
	}
	return out
}

// post POSTs to path of the control API on the unix socket sock, as
// curl -s -X POST --unix-socket SOCK http://localhost/PATH does.
func post(t testing.TB, sock, path string) string {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	defer client.CloseIdleConnections()
	resp, err := client.Post("http://localhost"+path, "", nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	return string(b)
}

// readmeCommand runs the README's console command number n (0: the first)
// among those that contain what, with the control API's socket for the
// README's, until its output matches the README's, as the README walk does
// with retry=timeout.
func (f *fixture) readmeCommand(t *testing.T, what string, n int, control string, timeout time.Duration) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.Root, "chapters/11-probes/README.md"))
	require.NoError(t, err)
	steps, err := readmewalk.Parse(string(b))
	require.NoError(t, err)
	var found []readmewalk.ConsoleCommand
	for _, st := range steps {
		if st.Action == readmewalk.Run && readmewalk.IsConsole(st.Block) {
			for _, c := range readmewalk.Console(st.Block) {
				if strings.Contains(c.Command, what) {
					found = append(found, c)
				}
			}
		}
	}
	require.Greater(t, len(found), n, "the README runs %q", what)
	c := found[n]
	cmd := strings.ReplaceAll(c.Command, ".state/"+statedir.RuntimeControlSocket, control)
	m := readmewalk.Matcher{NodeName: node}
	var last error
	chaptertest.EventuallyTrue(t, timeout, 200*time.Millisecond, "the README's "+c.Command, func() bool {
		last = m.Match(c.Output, f.Shell(t, cmd), true)
		return last == nil
	})
	require.NoError(t, last)
}

// TestChapter11Probes checks the README's claims against a real control
// plane: readiness flips the pod's Ready and its EndpointSlice endpoint
// both ways, with an Unhealthy event; the control API's exec mends it; an
// HTTP liveness failure restarts the container (Killing, upstream's
// message); a TCP target made to fail from outside takes the pod out of
// service and has it restarted; a startup probe holds a slow starter.
func TestChapter11Probes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	if os.Geteuid() != 0 {
		t.Skip("the mock runtime's pod network needs root (a network namespace and a veth pair)")
	}
	f := &fixture{Fixture: chaptertest.NewFixture(t, "./chapters/11-probes", node)}
	ctx := context.Background()
	f.state = chaptertest.ShortTempDir(t)
	chaptertest.WriteNodeKubeconfig(t, f.state, f.NodeConfig)
	readme := filepath.Join(f.Root, "chapters/11-probes/README.md")

	// A pod range of its own: other tests may run a pod network too.
	cidr := fmt.Sprintf("10.%d.0.0/16", 100+os.Getpid()%100)
	p := chaptertest.Start(t, f.Bin, "--node-name", node, "--state-dir", f.state, "--node-ip", "127.0.0.1",
		"--pod-cidr", cidr)
	netns := p.WaitForSubmatch(`(?m)^pod network: \S+ in network namespace (mykubelet-\d+-0), reached through mkl\d+-0`, 0, 60*time.Second)[1]
	control := p.WaitForSubmatch(`(?m)^control API: unix://(\S+) \(curl it for help\)`, 0, 10*time.Second)[1]
	require.Equal(t, filepath.Join(f.state, statedir.RuntimeControlSocket), control, "in the state directory")
	p.WaitForOutput(`(?m)^node `+node+`: status written`, 60*time.Second)
	// The pods' IPs: from the node's podCIDR once the kubelet has handed
	// it to the runtime, else (another pod network routes it) from cidr.
	inPodRange := func(t *testing.T, ip string) bool {
		n, err := f.Admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		require.NoError(t, err)
		a := netip.MustParseAddr(ip)
		return netip.MustParsePrefix(cidr).Contains(a) || (n.Spec.PodCIDR != "" && netip.MustParsePrefix(n.Spec.PodCIDR).Contains(a))
	}

	t.Run("readiness: 0/1, 1/1, then 0/1 and the endpoint not ready; mended from outside", func(t *testing.T) {
		w, err := f.Admin.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=readiness-exec"})
		require.NoError(t, err)
		defer w.Stop()
		var readies []bool // the READY column's history, from the watch
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			for e := range w.ResultChan() {
				if pod, ok := e.Object.(*v1.Pod); ok && container(pod).State.Running != nil {
					if r := container(pod).Ready; len(readies) == 0 || readies[len(readies)-1] != r {
						readies = append(readies, r)
					}
				}
			}
		}()
		f.Shell(t, `kubectl apply -f yaml/probes/exec-readiness.yaml -f yaml/probes/readiness-service.yaml`)
		chaptertest.EventuallyTrue(t, 60*time.Second, 200*time.Millisecond, "ready", func() bool {
			pod := f.pod(t, "readiness-exec")
			return container(pod).Ready && podCondition(pod, v1.PodReady) == v1.ConditionTrue && podCondition(pod, v1.ContainersReady) == v1.ConditionTrue
		})
		ip := f.pod(t, "readiness-exec").Status.PodIP
		assert.True(t, inPodRange(t, ip), "%s in %s or the node's podCIDR", ip, cidr)
		chaptertest.EventuallyTrue(t, 30*time.Second, 200*time.Millisecond, "endpoint ready", func() bool { return f.endpointReady(t, "readiness-exec") == "true" })
		f.readmeCommand(t, "kubectl get pod readiness-exec", 0, control, 30*time.Second)
		f.readmeCommand(t, "service-name=readiness-exec", 0, control, 30*time.Second)

		chaptertest.EventuallyTrue(t, 90*time.Second, 200*time.Millisecond, "not ready after the file goes (30 s + 3 failures)", func() bool {
			pod := f.pod(t, "readiness-exec")
			return !container(pod).Ready && podCondition(pod, v1.PodReady) == v1.ConditionFalse
		})
		chaptertest.EventuallyTrue(t, 30*time.Second, 200*time.Millisecond, "endpoint not ready", func() bool { return f.endpointReady(t, "readiness-exec") == "false" })
		pod := f.pod(t, "readiness-exec")
		assert.Equal(t, v1.PodRunning, pod.Status.Phase)
		assert.Equal(t, int32(0), container(pod).RestartCount, "readiness restarts nothing")
		f.readmeCommand(t, "kubectl get pod readiness-exec", 1, control, 30*time.Second)
		f.readmeCommand(t, "service-name=readiness-exec", 1, control, 30*time.Second)
		f.readmeCommand(t, "involvedObject.name=readiness-exec,reason=Unhealthy", 0, control, 30*time.Second)
		assert.Equal(t, []string{"Readiness probe failed: cat: /tmp/healthy: no such file or directory\n"}, f.messages(t, "readiness-exec", "Unhealthy"))
		p.WaitForOutput(`(?m)^SyncLoop \(probe\) probe="readiness" status="" pod="default/readiness-exec"`, 10*time.Second)

		w.Stop()
		<-watched
		assert.Equal(t, []bool{false, true, false}, readies, "READY 0/1, 1/1, 0/1")

		f.readmeCommand(t, "containers/readiness/exec", 0, control, 10*time.Second) // the control API's exec mends it
		chaptertest.EventuallyTrue(t, 30*time.Second, 200*time.Millisecond, "ready again", func() bool { return container(f.pod(t, "readiness-exec")).Ready })
		chaptertest.EventuallyTrue(t, 30*time.Second, 200*time.Millisecond, "endpoint ready again", func() bool { return f.endpointReady(t, "readiness-exec") == "true" })
		f.readmeCommand(t, "service-name=readiness-exec", 2, control, 30*time.Second)
	})

	t.Run("http liveness: a 500 restarts the container", func(t *testing.T) {
		f.Shell(t, `kubectl apply -f yaml/probes/http-liveness.yaml`)
		chaptertest.EventuallyTrue(t, 60*time.Second, 200*time.Millisecond, "running", func() bool { return container(f.pod(t, "liveness-http")).State.Running != nil })
		resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + f.pod(t, "liveness-http").Status.PodIP + ":8080/healthz")
		require.NoError(t, err, "the node reaches agnhost on the pod IP")
		resp.Body.Close()
		chaptertest.EventuallyTrue(t, 90*time.Second, 200*time.Millisecond, "restarted", func() bool { return container(f.pod(t, "liveness-http")).RestartCount >= 1 })
		assert.Contains(t, f.messages(t, "liveness-http", "Killing"), "Container liveness failed liveness probe, will be restarted")
		assert.Contains(t, f.messages(t, "liveness-http", "Unhealthy"), "Liveness probe failed: HTTP probe failed with statuscode: 500")
		p.WaitForOutput(`(?m)^syncPod sync default/liveness-http: stopped liveness, started liveness`, 10*time.Second)
		f.readmeCommand(t, "involvedObject.name=liveness-http", 0, control, 30*time.Second)
	})

	t.Run("tcp: a target made to fail from outside is taken out of service and restarted", func(t *testing.T) {
		f.Shell(t, `kubectl apply -f yaml/probes/tcp-liveness-readiness.yaml`)
		chaptertest.EventuallyTrue(t, 90*time.Second, 200*time.Millisecond, "ready", func() bool { return container(f.pod(t, "goproxy")).Ready })
		f.readmeCommand(t, "containers/goproxy/fail", 0, control, 10*time.Second)
		chaptertest.EventuallyTrue(t, 150*time.Second, 200*time.Millisecond, "restarted and ready", func() bool {
			cs := container(f.pod(t, "goproxy"))
			return cs.RestartCount == 1 && cs.Ready
		})
		ip := f.pod(t, "goproxy").Status.PodIP
		for _, kind := range []string{"Liveness", "Readiness"} {
			assert.Contains(t, f.messages(t, "goproxy", "Unhealthy"), kind+" probe failed: dial tcp "+ip+":8080: connect: connection refused")
		}
		f.readmeCommand(t, "involvedObject.name=goproxy,reason=Unhealthy", 0, control, 30*time.Second)
		f.readmeCommand(t, "kubectl get pod goproxy", 0, control, 30*time.Second)
		resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + ip + ":8080/")
		require.NoError(t, err, "the node reaches goproxy on the pod IP")
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, "goproxy\n", string(body))
	})

	t.Run("grpc: etcd's health service, made NOT_SERVING, has it restarted", func(t *testing.T) {
		f.Shell(t, `kubectl apply -f yaml/probes/grpc-liveness.yaml`)
		chaptertest.EventuallyTrue(t, 60*time.Second, 200*time.Millisecond, "running and ready", func() bool { return container(f.pod(t, "etcd-with-grpc")).Ready })
		post(t, control, "/pods/default/etcd-with-grpc/containers/etcd/fail")
		chaptertest.EventuallyTrue(t, 120*time.Second, 200*time.Millisecond, "restarted", func() bool { return container(f.pod(t, "etcd-with-grpc")).RestartCount >= 1 })
		assert.Contains(t, f.messages(t, "etcd-with-grpc", "Unhealthy"), `Liveness probe failed: service unhealthy (responded with "NOT_SERVING")`)
		assert.Contains(t, f.messages(t, "etcd-with-grpc", "Killing"), "Container etcd failed liveness probe, will be restarted")
	})

	t.Run("startup: a slow starter is held, not killed", func(t *testing.T) {
		f.Shell(t, `kubectl apply -f yaml/probes/slow-start.yaml`)
		chaptertest.EventuallyTrue(t, 60*time.Second, 200*time.Millisecond, "running", func() bool { return container(f.pod(t, "slow-start")).State.Running != nil })
		cs := container(f.pod(t, "slow-start"))
		require.NotNil(t, cs.Started)
		assert.False(t, *cs.Started)
		assert.False(t, cs.Ready)
		f.readmeCommand(t, "kubectl get pod slow-start", 0, control, 15*time.Second)
		chaptertest.EventuallyTrue(t, 90*time.Second, 200*time.Millisecond, "started", func() bool {
			cs := container(f.pod(t, "slow-start"))
			return cs.Started != nil && *cs.Started && cs.Ready
		})
		assert.Equal(t, int32(0), container(f.pod(t, "slow-start")).RestartCount)
		p.WaitForOutput(`(?m)^SyncLoop \(probe\) probe="startup" status="started" pod="default/slow-start"`, 10*time.Second)
		f.readmeCommand(t, "kubectl get pod slow-start", 1, control, 15*time.Second)
	})

	assert.Equal(t, 0, p.Stop())
	assert.NoError(t, docscheck.Match(chaptertest.ExpectedOutput(t, readme), p.Stdout()))
	assert.NotContains(t, p.Stderr(), "panic")
	out, err := exec.Command("ip", "netns", "list").Output()
	require.NoError(t, err)
	assert.NotContains(t, string(out), netns+" ", "the pod network goes with the kubelet")
	assert.NotContains(t, string(out), netns+"\n")
}
