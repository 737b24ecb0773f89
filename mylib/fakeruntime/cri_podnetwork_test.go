package fakeruntime

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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	grpchealth "google.golang.org/grpc/health/grpc_health_v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"mykubelet/mylib/fakeruntime/podnet"
)

// NetworkRuntime returns a runtime with a pod network on a range of its
// own (tests run side by side, each with its own network), or skips the
// test when the machine cannot make one (not root).
func networkRuntime(t *testing.T, clk clock.Clock) *Runtime {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the pod network needs root (a network namespace and a veth pair)")
	}
	var last error
	for i := range 64 {
		cidr := fmt.Sprintf("10.234.%d.0/24", (os.Getpid()+i)%256)
		r, err := NewRuntime(Config{Clock: clk, StateDir: t.TempDir(), PodCIDR: cidr, PodNetwork: true})
		require.NoError(t, err)
		if last = r.PodNetworkError(); last == nil {
			t.Cleanup(func() { _ = r.Close() })
			return r
		}
		_ = r.Close()
	}
	t.Fatalf("no free pod CIDR for a pod network: %v", last)
	return nil
}

// netnsNames lists the named network namespaces, as `ip netns list` does.
func netnsNames(t *testing.T) string {
	t.Helper()
	entries, err := os.ReadDir(podnet.NetnsDir)
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, "\n")
}

// serverContainer runs image with args in a new sandbox and returns the
// sandbox's IP and the container's ID.
func serverContainer(t *testing.T, r *Runtime, pod, image string, command []string, args ...string) (string, string) {
	t.Helper()
	ctx := context.Background()
	_, err := r.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	require.NoError(t, err)
	sb := runSandbox(t, r, pod, "uid-"+pod, nil)
	st, err := r.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb})
	require.NoError(t, err)
	c, err := r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: pod}, Image: &runtimeapi.ImageSpec{Image: image}, Command: command, Args: args}})
	require.NoError(t, err)
	startContainer(t, r, c.ContainerId)
	return st.Status.Network.Ip, c.ContainerId
}

// get fetches url once the server listens; it returns the code and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	var code int
	var body string
	require.Eventually(t, func() bool {
		resp, err := (&http.Client{Timeout: time.Second}).Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		code, body = resp.StatusCode, string(b)
		return true
	}, 10*time.Second, 10*time.Millisecond, "GET %s", url)
	return code, body
}

// TestPodNetworkServesTheProbeExamples: the docs' probe images serve on
// their sandbox's IP, reached from the host through the veth, and the
// control API makes them fail and recover.
func TestPodNetworkServesTheProbeExamples(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	r := networkRuntime(t, clk)
	name := r.net.Name()
	assert.Contains(t, netnsNames(t), name)

	// A second runtime on the same range: refused, with the reason; its
	// network waits for the node's pod CIDR
	// (TestPodNetworkWaitsForTheNodesPodCIDR).
	second, err := NewRuntime(Config{Clock: clk, StateDir: t.TempDir(), PodCIDR: r.PodCIDR().String(), PodNetwork: true})
	require.NoError(t, err)
	assert.ErrorIs(t, second.PodNetworkError(), ErrPodNetworkWaits)
	assert.ErrorContains(t, second.PodNetworkError(), r.PodCIDR().String()+" overlaps a route the host already has: "+r.PodCIDR().String()+" dev "+r.net.HostInterface())
	require.NoError(t, second.Close())

	t.Run("agnhost liveness: 200 for 10 s, then 500", func(t *testing.T) {
		ip, id := serverContainer(t, r, "liveness-http", "registry.k8s.io/e2e-test-images/agnhost:2.40", nil, "liveness")
		assert.True(t, r.PodCIDR().Contains(mustAddr(t, ip)))
		code, body := get(t, "http://"+ip+":8080/healthz")
		assert.Equal(t, 200, code)
		assert.Equal(t, "ok", body)
		clk.Step(11 * time.Second)
		code, body = get(t, "http://"+ip+":8080/healthz")
		assert.Equal(t, 500, code)
		assert.Equal(t, "error: 11", body)
		_, err := r.ContainerAction(id, ActionKill)
		require.NoError(t, err)
	})
	t.Run("nginx: the welcome page on :80; fail and recover", func(t *testing.T) {
		ip, id := serverContainer(t, r, "web", "nginx:1.27", nil)
		code, body := get(t, "http://"+ip+"/")
		assert.Equal(t, 200, code)
		assert.Contains(t, body, "Welcome to nginx!")
		ref, err := r.ContainerAction(id, ActionFail)
		require.NoError(t, err)
		assert.Equal(t, "web", ref.Container)
		code, _ = get(t, "http://"+ip+"/")
		assert.Equal(t, 500, code)
		_, err = r.ContainerAction(id, ActionRecover)
		require.NoError(t, err)
		code, _ = get(t, "http://"+ip+"/")
		assert.Equal(t, 200, code)
	})
	t.Run("goproxy: TCP :8080, refused while failing", func(t *testing.T) {
		ip, id := serverContainer(t, r, "goproxy", "registry.k8s.io/goproxy:0.1", nil)
		dial := func() error {
			c, err := net.DialTimeout("tcp", ip+":8080", time.Second)
			if err == nil {
				c.Close()
			}
			return err
		}
		require.Eventually(t, func() bool { return dial() == nil }, 10*time.Second, 10*time.Millisecond)
		_, err := r.ContainerAction(id, ActionFail)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			err := dial()
			return err != nil && strings.Contains(err.Error(), "connection refused")
		}, 10*time.Second, 10*time.Millisecond)
		_, err = r.ContainerAction(id, ActionRecover)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return dial() == nil }, 10*time.Second, 10*time.Millisecond)
	})
	t.Run("etcd: the gRPC health service on 2379", func(t *testing.T) {
		ip, id := serverContainer(t, r, "etcd-with-grpc", "registry.k8s.io/etcd:3.5.1-0",
			[]string{"/usr/local/bin/etcd", "--data-dir", "/var/lib/etcd", "--listen-client-urls", "http://0.0.0.0:2379"})
		conn, err := grpc.NewClient("passthrough:///"+ip+":2379", grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		defer conn.Close()
		check := func() grpchealth.HealthCheckResponse_ServingStatus {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			resp, err := grpchealth.NewHealthClient(conn).Check(ctx, &grpchealth.HealthCheckRequest{})
			if err != nil {
				return -1
			}
			return resp.GetStatus()
		}
		require.Eventually(t, func() bool { return check() == grpchealth.HealthCheckResponse_SERVING }, 10*time.Second, 10*time.Millisecond)
		_, err = r.ContainerAction(id, ActionFail)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return check() == grpchealth.HealthCheckResponse_NOT_SERVING }, 10*time.Second, 10*time.Millisecond)
	})
	t.Run("a stopped sandbox's IP answers no more", func(t *testing.T) {
		ip, _ := serverContainer(t, r, "stopped", "nginx:1.27", nil)
		get(t, "http://"+ip+"/")
		var sb string
		for _, s := range r.Snapshot().Sandboxes {
			if s.Pod == "default/stopped" {
				sb = s.ID
			}
		}
		_, err := r.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb})
		require.NoError(t, err)
		_, err = (&http.Client{Timeout: 500 * time.Millisecond}).Get("http://" + ip + "/")
		assert.Error(t, err)
	})

	require.NoError(t, r.Close())
	assert.NotContains(t, netnsNames(t), name, "Close removes the namespace")
	_, err = netlink.LinkByName(r.net.HostInterface())
	assert.Error(t, err, "and the veth pair with it")
}

// TestPodNetworkNeverRunsTheIPCommand: with a PATH that holds only a trap
// named ip (it writes down that it ran, and fails), the pod network still
// comes up, a server in a sandbox answers on the sandbox's IP, and
// stopping the sandbox and closing the runtime take it down: the trap never
// ran. A learner's `ip netns exec` (the real ip) finds the namespace, with
// the sandbox's address on eth0.
func TestPodNetworkNeverRunsTheIPCommand(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the pod network needs root (a network namespace and a veth pair)")
	}
	realIP, lookErr := exec.LookPath("ip")
	bin := t.TempDir()
	ran := filepath.Join(bin, "ran")
	require.NoError(t, os.WriteFile(filepath.Join(bin, "ip"), []byte("#!/bin/sh\necho \"ip $*\" >>"+ran+"\nexit 1\n"), 0o755))
	t.Setenv("PATH", bin)

	r := networkRuntime(t, clock.RealClock{})
	addr, _ := serverContainer(t, r, "web", "nginx:1.27", nil)
	code, body := get(t, "http://"+addr+"/")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, "Welcome to nginx!")

	if lookErr == nil {
		cmd := exec.Command(realIP, "netns", "exec", r.net.Name(), realIP, "-4", "-o", "addr", "show", "dev", "eth0")
		cmd.Env = append(os.Environ(), "PATH=/usr/sbin:/usr/bin:/sbin:/bin")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "ip netns exec %s: %s", r.net.Name(), out)
		assert.Contains(t, string(out), " "+addr+"/"+strconv.Itoa(r.PodCIDR().Bits())+" ", "the learner's ip netns exec sees the sandbox's address")
	}

	for _, s := range r.Snapshot().Sandboxes {
		_, err := r.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.ID})
		require.NoError(t, err)
	}
	name := r.net.Name()
	require.NoError(t, r.Close())
	assert.NotContains(t, netnsNames(t), name, "Close removes the namespace")
	b, err := os.ReadFile(ran)
	assert.True(t, os.IsNotExist(err), "the runtime ran: %s", b)
}

// TestStoppingASandboxKeepsTheOthersAddresses: the first sandbox's address
// is eth0's primary one, the others' its secondaries; stopping the first
// sandbox leaves the others reachable (the kernel would drop secondaries
// with their primary, but the namespace promotes them).
func TestStoppingASandboxKeepsTheOthersAddresses(t *testing.T) {
	r := networkRuntime(t, clock.RealClock{})
	serverContainer(t, r, "first", "nginx:1.27", nil)
	second, _ := serverContainer(t, r, "second", "nginx:1.27", nil)
	code, _ := get(t, "http://"+second+"/")
	require.Equal(t, 200, code)
	for _, s := range r.Snapshot().Sandboxes {
		if s.Pod == "default/first" {
			_, err := r.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.ID})
			require.NoError(t, err)
		}
	}
	code, _ = get(t, "http://"+second+"/")
	assert.Equal(t, 200, code, "the second sandbox still answers")
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	require.NoError(t, err)
	return a
}

// TestNoPodNetworkIsOneClearError: servers run but cannot listen, and say
// why; the runtime still runs pods.
func TestNoPodNetworkIsOneClearError(t *testing.T) {
	r, _ := fixture(t)
	assert.ErrorIs(t, r.PodNetworkError(), ErrNoPodNetwork)
	_, err := r.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "nginx"}})
	require.NoError(t, err)
	sb := runSandbox(t, r, "web", "uid-web", nil)
	c, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "web"}, Image: &runtimeapi.ImageSpec{Image: "nginx"}}})
	require.NoError(t, err)
	startContainer(t, r, c.ContainerId)
	assert.Eventually(t, func() bool {
		return strings.Contains(r.Snapshot().Sandboxes[0].Containers[0].Command, "nginx")
	}, 5*time.Second, 10*time.Millisecond, "no command: the image's entrypoint runs")
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, c.ContainerId).State, "runs on without a network")

	// SIGTERM: nginx exits 0 at once, as the real one does.
	_, err = r.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: c.ContainerId, Timeout: 30})
	require.NoError(t, err)
	st := containerStatus(t, r, c.ContainerId)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.State)
	assert.Equal(t, int32(0), st.ExitCode, "exits 0 on SIGTERM")
}
