package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/bootstraptoken"
	"mykubelet/mylib/kuberuntime"
	"mykubelet/mylib/nodestatus"
	"mykubelet/scripts/testkit/chaptertest"
	"mykubelet/scripts/testkit/testcluster"
)

const (
	node = "capstone-node"
	// signing is the cluster's --cluster-signing-duration: each certificate
	// lives 9 minutes (NotBefore backdated by 5), so the kubelet asks for
	// the next one 1.3 to 3.1 minutes after it got one.
	signing = 4 * time.Minute
	grace   = 20 * time.Second // the cluster's node monitor grace period
)

type fixture struct {
	bin, state, certDir string
	cluster             *testcluster.Cluster
	admin               *kubernetes.Clientset
	cri                 *kuberuntime.Manager
	port                int
	args                []string
}

// kubectl runs a shell line as a learner would (admin kubeconfig, kubectl
// on PATH) and returns its output; it fails the test if the line fails.
func (f *fixture) kubectl(t *testing.T, script string) string {
	t.Helper()
	return chaptertest.Shell(t, f.cluster.AdminKubeconfig, node, script)
}

func (f *fixture) start(t *testing.T) *chaptertest.Process {
	t.Helper()
	return chaptertest.Start(t, f.bin, f.args...)
}

// containers is every container in the runtime, "<id> <state>", sorted: what
// `crictl ps -a` lists.
func (f *fixture) containers(t *testing.T) []string {
	t.Helper()
	resp, err := f.cri.RuntimeService().ListContainers(context.Background(), &runtimeapi.ListContainersRequest{})
	require.NoError(t, err)
	var out []string
	for _, c := range resp.Containers {
		out = append(out, c.Id+" "+c.State.String())
	}
	slices.Sort(out)
	return out
}

func (f *fixture) nodeReady(t *testing.T) v1.ConditionStatus {
	t.Helper()
	n, err := f.admin.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	require.NoError(t, err)
	if _, c := nodestatus.GetNodeCondition(&n.Status, v1.NodeReady); c != nil {
		return c.Status
	}
	return ""
}

// podsReady is the Ready condition of each of the Deployment's pods.
func (f *fixture) podsReady(t *testing.T) []v1.ConditionStatus {
	t.Helper()
	pods, err := f.admin.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=nginx"})
	require.NoError(t, err)
	var out []v1.ConditionStatus
	for _, p := range pods.Items {
		st := v1.ConditionUnknown
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady {
				st = c.Status
			}
		}
		out = append(out, st)
	}
	return out
}

// approveServingCSRs approves every kubernetes.io/kubelet-serving CSR of
// our node, as an admin (or an approver such as kubelet-csr-approver)
// would, until ctx ends; it returns how many it approved.
func approveServingCSRs(ctx context.Context, wg *sync.WaitGroup, admin kubernetes.Interface) func() int {
	var mu sync.Mutex
	approved := 0
	wg.Go(func() {
		_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
			csrs, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for _, csr := range csrs.Items {
				if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName || csr.Spec.Username != "system:node:"+node || len(csr.Status.Conditions) > 0 {
					continue
				}
				csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
					Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue, Reason: "TestApprove", Message: "approved by the test"})
				if _, err := admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, &csr, metav1.UpdateOptions{}); err == nil {
					mu.Lock()
					approved++
					mu.Unlock()
				}
			}
			return false, nil
		})
	})
	return func() int { mu.Lock(); defer mu.Unlock(); return approved }
}

func pemFiles(t *testing.T, dir, prefix string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, prefix+"-2*.pem"))
	require.NoError(t, err)
	return m
}

// TestChapter13EndToEnd: from an empty state directory and a bootstrap
// token to a Ready node running a Deployment; the --config file with flags
// over it; admission; certificates rotating without a restart; a stop
// longer than the grace period and a start that adopts the containers.
func TestChapter13EndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and waits for certificate rotations (4 to 6 minutes)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bin := testcluster.BuildChapter(t, "./chapters/13-mykubelet")
	runtimeBin := testcluster.BuildChapter(t, "./chapters/05-pleg")
	c := testcluster.Start(t, testcluster.WithNodeMonitorGracePeriod(grace), testcluster.WithClusterSigningDuration(signing))
	state := chaptertest.ShortTempDir(t)
	f := &fixture{bin: bin, state: state, certDir: filepath.Join(state, "certs"), cluster: c, admin: c.Clientset(t), port: chaptertest.FreePort(t)}

	// What the learner is handed: a bootstrap kubeconfig, nothing else.
	bootstrapKubeconfig := filepath.Join(state, "bootstrap.kubeconfig")
	_, err := bootstraptoken.Setup(ctx, f.admin, c.Config(t), bootstraptoken.SetupOptions{AutoApprove: true, Kubeconfig: bootstrapKubeconfig})
	require.NoError(t, err)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	approvedServing := approveServingCSRs(ctx, &wg, f.admin)

	// The runtime in a process of its own, so that it outlives the kubelet.
	rt := chaptertest.Start(t, runtimeBin, "--state-dir", state, "--pleg=false", "--control-address", "")
	rt.WaitForOutput(`fake runtime: serving until Ctrl-C`, time.Minute)
	endpoint := "unix://" + filepath.Join(state, "mykubelet.sock")
	f.cri, err = kuberuntime.Connect(ctx, endpoint, clock.RealClock{})
	require.NoError(t, err)
	defer f.cri.Close()

	config := filepath.Join(state, "kubelet-config.yaml")
	require.NoError(t, os.WriteFile(config, fmt.Appendf(nil, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %d
maxPods: 50
rotateCertificates: true
serverTLSBootstrap: true
containerLogMaxSize: "100" # bytes: nginx's first line is over it
containerLogMonitorInterval: 3s
`, f.port), 0o600))
	nodeKubeconfig := filepath.Join(state, "node.kubeconfig")
	f.args = []string{"--config", config, "--max-pods", "3", "--bootstrap-kubeconfig", bootstrapKubeconfig, "--kubeconfig", nodeKubeconfig,
		"--cert-dir", f.certDir, "--hostname-override", node, "--node-ip", "127.0.0.1", "--state-dir", state,
		"--fake-runtime=false", "--container-runtime-endpoint", endpoint}
	p := f.start(t)
	p.WaitForOutput(`node `+node+`: status written \(.*\): Ready=True`, 2*time.Minute)

	t.Run("from a bootstrap token to a Ready node", func(t *testing.T) {
		out := p.Stdout()
		assert.Contains(t, out, "node kubeconfig: "+nodeKubeconfig+" does not exist yet: bootstrapping with "+bootstrapKubeconfig)
		assert.Regexp(t, `csr: node-csr-\S+ approved \(AutoApproved\) and signed`, out)
		assert.Contains(t, out, "node "+node+": registered (created)")
		fi, err := os.Stat(nodeKubeconfig)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		n, err := f.admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		require.NoError(t, err)
		chaptertest.CheckReadyConditions(t, n)
		assert.Equal(t, "13-mykubelet", n.Annotations["mykubelet.dev/chapter"], "the classroom's status view reads how far along the node is")
	})

	t.Run("flags win over the config file, the file over the defaults", func(t *testing.T) {
		assert.Contains(t, p.Stdout(), fmt.Sprintf("mykubelet %s: config %s, flags over it: maxPods 3, port %d, rotateCertificates true, serverTLSBootstrap true", node, config, f.port))
		n, err := f.admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, int64(3), n.Status.Capacity.Pods().Value(), "--max-pods 3 over the file's 50")
		assert.Equal(t, int32(f.port), n.Status.DaemonEndpoints.KubeletEndpoint.Port, "the file's port over the default 10250")
	})

	t.Run("a Deployment of 3 rolls out", func(t *testing.T) {
		f.kubectl(t, "kubectl apply -f yaml/nginx-deployment.yaml && kubectl rollout status deployment/nginx-deployment --timeout=120s")
		assert.Len(t, f.containers(t), 3)
	})

	t.Run("a pod beyond maxPods, bound by hand, is rejected: Failed, OutOfpods", func(t *testing.T) {
		f.kubectl(t, `kubectl run too-many --image=nginx:1.14.2 --overrides='{"spec":{"nodeName":"`+node+`"}}'`)
		chaptertest.EventuallyTrue(t, time.Minute, 500*time.Millisecond, "too-many Failed", func() bool {
			pod, err := f.admin.CoreV1().Pods("default").Get(ctx, "too-many", metav1.GetOptions{})
			return err == nil && pod.Status.Phase == v1.PodFailed
		})
		got := f.kubectl(t, `kubectl get pod too-many -o jsonpath='{.status.phase} {.status.reason}: {.status.message}'`)
		assert.Equal(t, "Failed OutOfpods: Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3", got)
		assert.Contains(t, p.Stdout(), "pod default/too-many rejected: OutOfpods")
		assert.Regexp(t, `^too-many\s+0/1\s+OutOfpods\s`, f.kubectl(t, "kubectl get pod too-many --no-headers"))
		assert.Len(t, f.containers(t), 3, "nothing of it ran")
	})

	t.Run("node pressure: the conditions are the eviction manager's, its configuration upstream's defaults", func(t *testing.T) {
		n, err := f.admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		require.NoError(t, err)
		reasons := map[v1.NodeConditionType]string{}
		for _, c := range n.Status.Conditions {
			if c.Type != v1.NodeReady {
				assert.Equal(t, v1.ConditionFalse, c.Status, c.Type)
			}
			reasons[c.Type] = c.Reason
		}
		assert.Equal(t, map[v1.NodeConditionType]string{v1.NodeMemoryPressure: "KubeletHasSufficientMemory", v1.NodeDiskPressure: "KubeletHasNoDiskPressure",
			v1.NodePIDPressure: "KubeletHasSufficientPID", v1.NodeReady: "KubeletReady"}, reasons)
		pki := filepath.Join(f.cluster.Dir(), "pki")
		chaptertest.EventuallyTrue(t, time.Minute, 500*time.Millisecond, "a serving certificate", func() bool { return strings.Contains(p.Stdout(), "serving certificate: issued") })
		got := f.kubectl(t, fmt.Sprintf(`curl -sf --cacert %s/ca.crt --cert %s/admin.crt --key %s/admin.key https://127.0.0.1:%d/configz | jq -c '.kubeletconfig | {evictionHard, evictionPressureTransitionPeriod, imageGCHighThresholdPercent, imageGCLowThresholdPercent}'`, pki, pki, pki, f.port))
		assert.Equal(t, `{"evictionHard":{"imagefs.available":"15%","imagefs.inodesFree":"5%","memory.available":"100Mi","nodefs.available":"10%","nodefs.inodesFree":"5%"},"evictionPressureTransitionPeriod":"5m0s","imageGCHighThresholdPercent":85,"imageGCLowThresholdPercent":80}`, got)
	})

	t.Run("exec goes through the kubelet API, served with a CSR-issued certificate", func(t *testing.T) {
		chaptertest.EventuallyTrue(t, time.Minute, 500*time.Millisecond, "a serving certificate", func() bool { return strings.Contains(p.Stdout(), "serving certificate: issued") })
		assert.Equal(t, "hello", f.kubectl(t, "kubectl exec deploy/nginx-deployment -- echo hello"))
	})

	t.Run("a log over containerLogMaxSize is rotated; kubectl logs reads the live file", func(t *testing.T) {
		pattern := filepath.Join(state, "pod-logs", "default_nginx-deployment-*", "nginx", "0.log.2*")
		chaptertest.EventuallyTrue(t, time.Minute, 500*time.Millisecond, "a rotated log for each nginx container", func() bool {
			rotated, err := filepath.Glob(pattern)
			require.NoError(t, err)
			return len(rotated) == 3
		})
		rotated, err := filepath.Glob(pattern)
		require.NoError(t, err)
		b, err := os.ReadFile(rotated[0])
		require.NoError(t, err)
		assert.Contains(t, string(b), "stdout F /docker-entrypoint.sh: Configuration complete; ready for start up")
		assert.Regexp(t, `\.log\.\d{8}-\d{6}$`, rotated[0], "<path>.20060102-150405, as upstream")
		assert.Empty(t, f.kubectl(t, `kubectl logs "$(kubectl get pods -l app=nginx -o jsonpath='{.items[0].metadata.name}')"`), "only the live file, empty since the rotation, as upstream")
	})

	t.Run("both certificates rotate without a restart", func(t *testing.T) {
		chaptertest.EventuallyTrue(t, signing+time.Minute, 500*time.Millisecond, "a client and a serving rotation", func() bool {
			out := p.Stdout()
			return strings.Contains(out, "client certificate: rotated") && strings.Contains(out, "serving certificate: rotated")
		})
		assert.GreaterOrEqual(t, len(pemFiles(t, f.certDir, "kubelet-client")), 2, "a second client certificate in the cert dir")
		assert.GreaterOrEqual(t, len(pemFiles(t, f.certDir, "kubelet-server")), 2, "a second serving certificate")
		assert.GreaterOrEqual(t, approvedServing(), 2, "one serving CSR per certificate")
		b, err := os.ReadFile(filepath.Join(f.certDir, "kubelet-client-current.pem"))
		require.NoError(t, err)
		client, err := tls.X509KeyPair(b, b)
		require.NoError(t, err)
		assert.Equal(t, signing+5*time.Minute, client.Leaf.NotAfter.Sub(client.Leaf.NotBefore), "the signing duration, NotBefore backdated by 5 minutes")
		assert.Contains(t, p.Stderr(), "Certificate rotation detected, shutting down client connections to start using new credentials")
		assert.True(t, p.Running(), "the same process")

		// The server presents the newest serving certificate (read again if
		// a rotation comes between reading the file and connecting)...
		chaptertest.EventuallyTrue(t, 30*time.Second, 500*time.Millisecond, "the server presents kubelet-server-current.pem", func() bool {
			b, err := os.ReadFile(filepath.Join(f.certDir, "kubelet-server-current.pem"))
			require.NoError(t, err)
			current, err := tls.X509KeyPair(b, b)
			require.NoError(t, err)
			conn, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(f.port), &tls.Config{RootCAs: c.CAPool(), ServerName: "127.0.0.1"})
			require.NoError(t, err)
			defer conn.Close()
			return current.Leaf.SerialNumber.Cmp(conn.ConnectionState().PeerCertificates[0].SerialNumber) == 0
		})
		// ...which the API server trusts, and the Lease goes on being
		// renewed with the new client certificate.
		assert.Equal(t, "hello", f.kubectl(t, "kubectl exec deploy/nginx-deployment -- echo hello"))
		rotatedAt := time.Now()
		chaptertest.EventuallyTrue(t, time.Minute, 500*time.Millisecond, "a Lease renewal after the rotation", func() bool {
			l, err := f.admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
			return err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(rotatedAt)
		})
	})

	t.Run("stopped past the grace period, started again, it adopts the containers", func(t *testing.T) {
		before := f.containers(t)
		require.Len(t, before, 3)
		assert.Equal(t, 0, p.Stop())
		assert.Contains(t, p.Stdout(), "stopped (the containers keep running in the runtime; started again, the kubelet adopts them)")
		chaptertest.EventuallyTrue(t, 2*time.Minute, 500*time.Millisecond, "node NotReady", func() bool { return f.nodeReady(t) == v1.ConditionUnknown })
		chaptertest.EventuallyTrue(t, time.Minute, 500*time.Millisecond, "pods not ready", func() bool {
			return !slices.Contains(f.podsReady(t), v1.ConditionTrue)
		})
		assert.Equal(t, before, f.containers(t), "the containers ran on without a kubelet")

		p2 := f.start(t)
		p2.WaitForOutput(`node `+node+`: status written \(.*\): Ready=True`, 2*time.Minute)
		assert.Contains(t, p2.Stdout(), "node kubeconfig: "+nodeKubeconfig+" has a valid client certificate until")
		assert.Contains(t, p2.Stdout(), "node "+node+": registered (already existed, adopted)")
		chaptertest.EventuallyTrue(t, time.Minute, 500*time.Millisecond, "pods ready again", func() bool {
			r := f.podsReady(t)
			return len(r) == 3 && !slices.ContainsFunc(r, func(s v1.ConditionStatus) bool { return s != v1.ConditionTrue })
		})
		assert.Equal(t, before, f.containers(t), "the same containers, none killed, none created")
		assert.NotContains(t, p2.Stdout(), "syncPod create default/nginx", "nothing created again")
		assert.Equal(t, 0, p2.Stop())
	})

	t.Run("without serverTLSBootstrap it signs its own serving certificate, which the API server does not trust", func(t *testing.T) {
		p3 := chaptertest.Start(t, f.bin, append(slices.Clone(f.args), "--rotate-server-certificates=false")...)
		p3.WaitForOutput(`node `+node+`: status written \(.*\): Ready=True`, 2*time.Minute)
		out := p3.Stdout()
		assert.Contains(t, out, "flags over it: maxPods 3, port "+strconv.Itoa(f.port)+", rotateCertificates true, serverTLSBootstrap false", "the flag's false over the file's true")
		assert.Contains(t, out, "serving certificate: self-signed, created "+filepath.Join(f.certDir, "kubelet.crt"))
		for _, name := range []string{"kubelet.crt", "kubelet.key"} {
			fi, err := os.Stat(filepath.Join(f.certDir, name))
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), name)
		}
		cmd := exec.Command(filepath.Join(testcluster.BinDir(), "kubectl"), "--kubeconfig", c.AdminKubeconfig, "exec", "deploy/nginx-deployment", "--", "echo", "hello")
		b, err := cmd.CombinedOutput()
		assert.Error(t, err)
		assert.Contains(t, string(b), "x509: certificate signed by unknown authority")
		assert.Equal(t, 0, p3.Stop())
	})

	t.Run("with no --config and the mock runtime inside the kubelet (the defaults), a second node", func(t *testing.T) {
		state2 := chaptertest.ShortTempDir(t)
		const second = "capstone-second"
		p4 := chaptertest.Start(t, f.bin, "--root-dir", state2, "--bootstrap-kubeconfig", bootstrapKubeconfig, "--hostname-override", second,
			"--address", "127.0.0.1", "--port", strconv.Itoa(chaptertest.FreePort(t)), "--pod-cidr", "10.91.0.0/16")
		p4.WaitForOutput(`node `+second+`: status written \(.*\): Ready=True`, 2*time.Minute)
		out := p4.Stdout()
		assert.Contains(t, out, "mykubelet "+second+": no --config file, flags over it: maxPods 110, port ")
		assert.Contains(t, out, "node kubeconfig: "+filepath.Join(state2, "kubelet.kubeconfig")+" does not exist yet: bootstrapping with "+bootstrapKubeconfig)
		assert.Contains(t, out, "certificate: wrote "+filepath.Join(state2, "pki", "kubelet-client-current.pem"))
		assert.Contains(t, out, "runtime: mykubelet-fake 0.1.0 at unix://"+filepath.Join(state2, "mykubelet.sock"))
		assert.Contains(t, out, "serving certificate: self-signed, created "+filepath.Join(state2, "pki", "kubelet.crt"))
		assert.NotContains(t, out, "client certificate: rotation on", "rotateCertificates is off by default, as upstream")
		sandboxedPodsCannotTakeTheNodeDown(ctx, t, f.admin, second)
		assert.Equal(t, 0, p4.Stop())
		assert.Contains(t, p4.Stdout(), "stopped (the mock runtime, its containers and its pod network with it)")
	})

	t.Run("a bad field in the config file is one clear line", func(t *testing.T) {
		bad := filepath.Join(state, "bad.yaml")
		require.NoError(t, os.WriteFile(bad, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxpods: 3\n"), 0o600))
		stdout, stderr, code := chaptertest.Run(t, bin, "--config", bad, "--state-dir", state)
		assert.Equal(t, 1, code)
		assert.Empty(t, stdout)
		assert.Equal(t, "mykubelet: error: kubelet config "+bad+": strict decoding error: unknown field \"maxpods\"\n", stderr)
		empty := t.TempDir()
		_, stderr, code = chaptertest.Run(t, bin, "--state-dir", empty, "--hostname-override", "nobody")
		assert.Equal(t, 1, code)
		assert.Equal(t, "mykubelet: error: no bootstrap kubeconfig at "+empty+"/bootstrap-kubelet.kubeconfig: stat "+empty+"/bootstrap-kubelet.kubeconfig: no such file or directory\n", stderr)

		held, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer held.Close()
		heldPort := strconv.Itoa(held.Addr().(*net.TCPAddr).Port)
		_, stderr, code = chaptertest.Run(t, bin, append(slices.Clone(f.args), "--port", heldPort)...)
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, "mykubelet: error: kubelet server on 127.0.0.1:"+heldPort+": listen tcp 127.0.0.1:"+heldPort+": bind: address already in use\n")

		_, stderr, code = chaptertest.Run(t, bin, "--max-pods", "none")
		assert.Equal(t, 2, code)
		assert.Equal(t, "mykubelet: invalid value \"none\" for flag -max-pods: want a whole number of at least 1, got \"none\" (see --help)\n", stderr)
	})
}

// sandboxedPodsCannotTakeTheNodeDown: on a node whose mock runtime runs
// inside the kubelet as root, a pod whose script once panicked the shell
// interpreter (and took the runtime, the kubelet and every pod with it)
// ends Completed; the node stays Ready; a bystander pod keeps its
// container and restartCount 0.
func sandboxedPodsCannotTakeTheNodeDown(ctx context.Context, t *testing.T, admin kubernetes.Interface, nodeName string) {
	t.Helper()
	pod := func(name, restart string, cmd ...string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{NodeName: nodeName, RestartPolicy: v1.RestartPolicy(restart),
			Containers: []v1.Container{{Name: name, Image: "busybox:1.36", Command: cmd}}}}
	}
	_, err := admin.CoreV1().Pods("default").Create(ctx, pod("bystander", "Always", "sh", "-c", "while true; do sleep 1; done"), metav1.CreateOptions{})
	require.NoError(t, err)
	var before v1.ContainerStatus
	chaptertest.EventuallyTrue(t, 2*time.Minute, 500*time.Millisecond, "bystander Running", func() bool {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "bystander", metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
			return false
		}
		before = p.Status.ContainerStatuses[0]
		return true
	})
	for _, name := range []string{"nested-sh", "tmpdir"} {
		cmd := []string{"sh", "-c", "echo hi; sh -c true"}
		if name == "tmpdir" {
			cmd = []string{"sh", "-c", "TMPDIR=/etc sh -c 'echo pwned > $TMPDIR/sh-interp-cron; cat < $TMPDIR/sh-interp-x'; true"}
		}
		_, err = admin.CoreV1().Pods("default").Create(ctx, pod(name, "Never", cmd...), metav1.CreateOptions{})
		require.NoError(t, err)
		chaptertest.EventuallyTrue(t, 2*time.Minute, 500*time.Millisecond, name+" Succeeded", func() bool {
			p, err := admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			return err == nil && p.Status.Phase == v1.PodSucceeded
		})
	}
	_, err = os.Stat("/etc/sh-interp-cron")
	assert.True(t, os.IsNotExist(err), "no file made on the host: %v", err)
	n, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	require.NoError(t, err)
	_, ready := nodestatus.GetNodeCondition(&n.Status, v1.NodeReady)
	require.NotNil(t, ready)
	assert.Equal(t, v1.ConditionTrue, ready.Status)
	p, err := admin.CoreV1().Pods("default").Get(ctx, "bystander", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, p.Status.ContainerStatuses, 1)
	after := p.Status.ContainerStatuses[0]
	assert.Equal(t, before.ContainerID, after.ContainerID, "the bystander's container is the same")
	assert.EqualValues(t, 0, after.RestartCount)
	assert.NotNil(t, after.State.Running)
	podObservesItsGeneration(ctx, t, admin, p)
	for _, name := range []string{"bystander", "nested-sh", "tmpdir"} {
		require.NoError(t, admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	}
}

// podObservesItsGeneration: running pod p's status says which generation
// of its spec it describes, 1 since its creation, on the status and on
// each of the kubelet's conditions; a change of its spec (here
// activeDeadlineSeconds, 1 h) makes the generation 2, and the kubelet's
// next status observes it, the container left as it is.
func podObservesItsGeneration(ctx context.Context, t *testing.T, admin kubernetes.Interface, p *v1.Pod) {
	t.Helper()
	observed := func(p *v1.Pod, gen int64) (bool, string) {
		got := fmt.Sprintf("generation %d, observedGeneration %d", p.Generation, p.Status.ObservedGeneration)
		ok := p.Generation == gen && p.Status.ObservedGeneration == gen
		for _, c := range p.Status.Conditions {
			got += fmt.Sprintf(", %s %d", c.Type, c.ObservedGeneration)
			ok = ok && c.ObservedGeneration == gen
		}
		return ok, got
	}
	ok, got := observed(p, 1)
	assert.True(t, ok, got)
	_, err := admin.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, []byte(`{"spec":{"activeDeadlineSeconds":3600}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	chaptertest.Eventually(t, time.Minute, 200*time.Millisecond, p.Name+" observes generation 2", func() (bool, string) {
		p, err := admin.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return observed(p, 2)
	})
	after, err := admin.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, p.Status.ContainerStatuses[0].ContainerID, after.Status.ContainerStatuses[0].ContainerID, "the same container")
}
