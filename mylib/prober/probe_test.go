package prober

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	grpchealth "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/prober/results"
)

// hostPort splits a test server's loopback address.
func hostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return h, n
}

func TestHTTPProbe(t *testing.T) {
	var got http.Header
	var host string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, host = r.Header.Clone(), r.Host
		switch r.URL.Path {
		case "/healthz":
			_, _ = w.Write([]byte("ok"))
		case "/broken":
			w.WriteHeader(http.StatusInternalServerError)
		case "/elsewhere":
			http.Redirect(w, r, "http://other.invalid/", http.StatusFound)
		case "/slow":
			time.Sleep(2 * time.Second)
		}
	}))
	defer srv.Close()
	ip, port := hostPort(t, srv.Listener.Addr().String())
	do := func(path string, headers ...v1.HTTPHeader) (Result, string) {
		req, err := NewHTTPRequest(context.Background(), &v1.HTTPGetAction{Path: path, HTTPHeaders: headers}, ip, port)
		require.NoError(t, err)
		r, out, err := HTTPProbe(req, NewHTTPClient(time.Second))
		require.NoError(t, err)
		return r, out
	}

	r, out := do("/healthz", v1.HTTPHeader{Name: "Custom-Header", Value: "Awesome"}, v1.HTTPHeader{Name: "Host", Value: "example.com"})
	assert.Equal(t, Success, r)
	assert.Equal(t, "ok", out)
	assert.Equal(t, "kube-probe/1.37", got.Get("User-Agent"))
	assert.Equal(t, "*/*", got.Get("Accept"))
	assert.Equal(t, "Awesome", got.Get("Custom-Header"), "the probe's httpHeaders are sent")
	assert.Equal(t, "example.com", host, "a Host header sets the request's host")

	r, out = do("broken")
	assert.Equal(t, Failure, r)
	assert.Equal(t, "HTTP probe failed with statuscode: 500", out)

	r, out = do("/elsewhere")
	assert.Equal(t, Warning, r, "a redirect to another host is not followed")
	assert.Contains(t, out, "Probe terminated redirects")

	r, out = do("/slow")
	assert.Equal(t, Failure, r, "timeoutSeconds")
	assert.Contains(t, out, "Client.Timeout exceeded")

	srv.Close()
	r, out = do("/healthz")
	assert.Equal(t, Failure, r)
	assert.Contains(t, out, "connection refused")
}

func TestTCPProbe(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ip, port := hostPort(t, lis.Addr().String())
	r, _, err := TCPProbe(context.Background(), ip, port, time.Second)
	require.NoError(t, err)
	assert.Equal(t, Success, r)
	lis.Close()
	r, out, err := TCPProbe(context.Background(), ip, port, time.Second)
	require.NoError(t, err)
	assert.Equal(t, Failure, r)
	assert.Equal(t, "dial tcp "+lis.Addr().String()+": connect: connection refused", out)
}

func TestGRPCProbe(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	hs := health.NewServer()
	grpchealth.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	ip, port := hostPort(t, lis.Addr().String())

	r, out, err := GRPCProbe(context.Background(), ip, port, "", time.Second)
	require.NoError(t, err)
	assert.Equal(t, Success, r, out)

	hs.SetServingStatus("", grpchealth.HealthCheckResponse_NOT_SERVING)
	r, out, _ = GRPCProbe(context.Background(), ip, port, "", time.Second)
	assert.Equal(t, Failure, r)
	assert.Equal(t, `service unhealthy (responded with "NOT_SERVING")`, out)

	r, out, _ = GRPCProbe(context.Background(), ip, port, "unknown-service", time.Second)
	assert.Equal(t, Failure, r)
	assert.Contains(t, out, "error: health rpc probe failed", out)

	bare := grpc.NewServer() // no health service
	lis2, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = bare.Serve(lis2) }()
	defer bare.Stop()
	ip2, port2 := hostPort(t, lis2.Addr().String())
	r, out, _ = GRPCProbe(context.Background(), ip2, port2, "", time.Second)
	assert.Equal(t, Failure, r)
	assert.Contains(t, out, "this server does not implement the grpc health protocol (grpc.health.v1.Health)")
}

// runContainer starts a container running script in a fake runtime served
// on a socket, and returns a CRI client and the container's ID.
func runContainer(t *testing.T, script string) (runtimeapi.RuntimeServiceClient, string) {
	t.Helper()
	ctx := context.Background()
	rt := fakeruntime.New(clock.RealClock{})
	sock := fakeruntimetest.Serve(t, rt)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	rs, is := runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
	sb, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "u1"}}})
	require.NoError(t, err)
	_, err = is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}})
	require.NoError(t, err)
	c, err := rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox"},
		Command: []string{"sh", "-c", script}}})
	require.NoError(t, err)
	_, err = rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId})
	require.NoError(t, err)
	return rs, c.ContainerId
}

func TestExecProbe(t *testing.T) {
	rs, id := runContainer(t, "touch /tmp/healthy; sleep 600")
	ctx := context.Background()
	require.Eventually(t, func() bool {
		r, _, err := ExecProbe(ctx, rs, id, []string{"cat", "/tmp/healthy"}, time.Second)
		return err == nil && r == Success
	}, 10*time.Second, 10*time.Millisecond, "cat /tmp/healthy succeeds once the script touched it")
	_, _, err := ExecProbe(ctx, rs, id, []string{"rm", "/tmp/healthy"}, time.Second)
	require.NoError(t, err)
	r, out, err := ExecProbe(ctx, rs, id, []string{"cat", "/tmp/healthy"}, time.Second)
	require.NoError(t, err)
	assert.Equal(t, Failure, r)
	assert.Contains(t, out, "/tmp/healthy", "the command's output is the failure's message")
	r, out, err = ExecProbe(ctx, rs, id, []string{"sleep", "5"}, time.Second)
	require.NoError(t, err)
	assert.Equal(t, Failure, r)
	assert.Equal(t, `command "sleep 5" timed out`, out)
	_, _, err = ExecProbe(ctx, rs, "no-such-container", []string{"true"}, time.Second)
	assert.Error(t, err, "a container that is not there: the probe errors")
}

// TestProbeEvents checks the events upstream writes, with its words.
func TestProbeEvents(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://other.invalid/", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	ip, port := hostPort(t, srv.Listener.Addr().String())
	rec := record.NewFakeRecorder(10)
	pb := &prober{recorder: rec}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
	c := v1.Container{Name: "c", ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromString("web")}}},
		Ports: []v1.ContainerPort{{Name: "web", ContainerPort: int32(port)}}}
	st := v1.PodStatus{PodIP: ip}
	r, err := pb.probe(context.Background(), readiness, pod, st, c, kubecontainer.ContainerID{})
	require.NoError(t, err)
	assert.Equal(t, results.Failure, r)
	assert.Equal(t, "Warning Unhealthy Readiness probe failed: HTTP probe failed with statuscode: 500", <-rec.Events)

	c.LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/redirect", Port: intstr.FromInt32(int32(port))}}}
	r, err = pb.probe(context.Background(), liveness, pod, st, c, kubecontainer.ContainerID{})
	require.NoError(t, err)
	assert.Equal(t, results.Success, r, "a warning counts as a success")
	assert.Contains(t, <-rec.Events, "Warning ProbeWarning Liveness probe warning: Probe terminated redirects")

	c.StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromString("nope")}}}
	r, err = pb.probe(context.Background(), startup, pod, st, c, kubecontainer.ContainerID{})
	assert.Error(t, err)
	assert.Equal(t, results.Failure, r)
	assert.Equal(t, `Warning Unhealthy Startup probe errored and resulted in unknown state: couldn't find port "nope" in container c`, <-rec.Events)
}

// TestGuardedDialer: a target inside the allowed networks is dialed; one
// outside is refused with the reason, and no packet leaves.
func TestGuardedDialer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer lis.Close()
	ip, port := hostPort(t, lis.Addr().String())
	dial := GuardedDialer([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, "the mock runtime has no pod network")
	r, _, err := tcpProbe(context.Background(), ip, port, time.Second, dial)
	require.NoError(t, err)
	assert.Equal(t, Success, r)
	r, out, err := tcpProbe(context.Background(), "10.88.0.5", 8080, time.Second, dial)
	require.NoError(t, err)
	assert.Equal(t, Failure, r)
	assert.Equal(t, "probe target 10.88.0.5:8080 is outside the networks this kubelet may reach (127.0.0.0/8): the mock runtime has no pod network", out)
	req, err := NewHTTPRequest(context.Background(), &v1.HTTPGetAction{Path: "/healthz"}, "10.88.0.5", 8080)
	require.NoError(t, err)
	r, out, _ = HTTPProbe(req, newHTTPClient(time.Second, dial))
	assert.Equal(t, Failure, r)
	assert.Contains(t, out, "probe target 10.88.0.5:8080 is outside the networks this kubelet may reach")
	r, out, _ = grpcProbe(context.Background(), "10.88.0.5", 2379, "", time.Second, dial)
	assert.Equal(t, Failure, r)
	assert.Contains(t, out, "probe target 10.88.0.5:2379 is outside the networks this kubelet may reach")
}

// TestAllowPodIPs: a pod IP the runtime reports is dialed although it is
// outside the guard's networks; any other address is still refused by
// the guard, with its words.
func TestAllowPodIPs(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.2:0") // stands for a pod IP (tests reach loopback only)
	require.NoError(t, err)
	defer lis.Close()
	ip, port := hostPort(t, lis.Addr().String())
	podIP := netip.MustParseAddr(ip)
	guard := GuardedDialer([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, "")
	r, out, err := tcpProbe(context.Background(), ip, port, time.Second, guard)
	require.NoError(t, err)
	require.Equal(t, Failure, r, "the guard alone refuses it: %s", out)

	dial := AllowPodIPs(guard, func(a netip.Addr) bool { return a == podIP })
	r, out, err = tcpProbe(context.Background(), ip, port, time.Second, dial)
	require.NoError(t, err)
	assert.Equal(t, Success, r, out)
	r, out, err = tcpProbe(context.Background(), "10.244.7.9", 8080, time.Second, dial)
	require.NoError(t, err)
	assert.Equal(t, Failure, r)
	assert.Equal(t, "probe target 10.244.7.9:8080 is outside the networks this kubelet may reach (127.0.0.1/32)", out)
	assert.Nil(t, AllowPodIPs(nil, func(netip.Addr) bool { return true }), "no guard: nothing to widen")
}
