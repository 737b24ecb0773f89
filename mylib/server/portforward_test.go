package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pfconst "k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
	"mykubelet/mylib/kubetypes"
	kubepod "mykubelet/mylib/pod"
)

// kubeletWithNginx serves the kubelet API over a mock runtime (with the
// pod network if podNetwork and the machine allows it) in which pod
// default/nginx runs nginx, in its second sandbox (the first is stopped,
// as after a sandbox was recreated). It returns the server, the ready
// sandbox's ID and IP, and whether the pod network is there.
func kubeletWithNginx(t *testing.T, podNetwork bool) (srv *httptest.Server, sandboxID, ip string, netOK bool) {
	t.Helper()
	ctx := context.Background()
	cfg := fakeruntime.Config{StateDir: t.TempDir()}
	if podNetwork {
		// A range of its own: tests run side by side, each its own network.
		cfg.PodNetwork, cfg.PodCIDR = true, fmt.Sprintf("10.237.%d.0/24", os.Getpid()%256)
	}
	rt, err := fakeruntime.NewRuntime(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close() })
	conn, err := grpc.NewClient("unix://"+fakeruntimetest.Serve(t, rt), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	cri := runtimeapi.NewRuntimeServiceClient(conn)
	_, err = runtimeapi.NewImageServiceClient(conn).PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "nginx:1.27"}})
	require.NoError(t, err)
	labels := map[string]string{kubetypes.KubernetesPodUIDLabel: "uid-nginx"}
	for attempt := range uint32(2) {
		sb, err := cri.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "nginx", Namespace: "default", Uid: "uid-nginx", Attempt: attempt}, Labels: labels}})
		require.NoError(t, err)
		sandboxID = sb.PodSandboxId
		if attempt == 0 {
			_, err = cri.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sandboxID})
			require.NoError(t, err)
		}
	}
	st, err := cri.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sandboxID})
	require.NoError(t, err)
	ip = st.Status.Network.Ip
	c, err := cri.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "nginx"}, Image: &runtimeapi.ImageSpec{Image: "nginx:1.27"}}})
	require.NoError(t, err)
	_, err = cri.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId})
	require.NoError(t, err)

	pods := kubepod.NewBasicPodManager()
	pods.SetPods([]*v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: "default", UID: "uid-nginx"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "nginx"}}}}, {ObjectMeta: metav1.ObjectMeta{Name: "nosandbox", Namespace: "default", UID: "uid-none"}}})
	s, err := NewServer(Config{NodeName: "n1", Pods: pods, Runtime: cri, Authenticator: allowAll{}, Authorizer: allowAll{}})
	require.NoError(t, err)
	srv = httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, sandboxID, ip, rt.PodNetworkError() == nil
}

func spdyDialer(t *testing.T, rawURL string) (*url.URL, *http.Client, spdy.Upgrader) {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	rt, upgrader, err := spdy.RoundTripperFor(&rest.Config{})
	require.NoError(t, err)
	return u, &http.Client{Transport: rt}, upgrader
}

// TestPortForwardThroughTheKubeletReachesNginx: kubectl's forwarder on
// the kubelet's /portForward reaches nginx in the pod network, through
// the runtime's streaming server (needs root for the pod network).
func TestPortForwardThroughTheKubeletReachesNginx(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the pod network needs root (a network namespace and a veth pair)")
	}
	srv, _, _, ok := kubeletWithNginx(t, true)
	if !ok {
		t.Skip("no pod network on this machine")
	}
	u, client, upgrader := spdyDialer(t, srv.URL+"/portForward/default/nginx")
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(spdy.NewDialer(upgrader, client, "POST", u), []string{"127.0.0.1"}, []string{"0:80"}, stop, ready, io.Discard, io.Discard)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	defer func() { close(stop); <-done }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("port-forward ended before it was ready: %v", err)
	}
	ports, err := pf.GetPorts()
	require.NoError(t, err)
	var body string
	require.Eventually(t, func() bool { // nginx listens once its container has started
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
		resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/", ports[0].Local))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == 200
	}, 20*time.Second, 50*time.Millisecond)
	assert.Contains(t, body, "<title>Welcome to nginx!</title>")
}

// TestPortForwardThroughTheKubeletToTheNewestReadySandbox: without the pod
// network the runtime refuses every port; the refusal, from the ready
// sandbox (not the stopped one), reaches the client on the error stream
// through the kubelet's proxy. And the kubelet's own refusals.
func TestPortForwardThroughTheKubeletToTheNewestReadySandbox(t *testing.T) {
	srv, sandboxID, ip, _ := kubeletWithNginx(t, false)
	u, client, upgrader := spdyDialer(t, srv.URL+"/portForward/default/nginx/uid-nginx")
	conn, proto, err := spdy.NewDialer(upgrader, client, "POST", u).Dial(pfconst.PortForwardV1Name)
	require.NoError(t, err)
	defer conn.Close()
	assert.Equal(t, pfconst.PortForwardV1Name, proto)
	h := http.Header{}
	h.Set(v1.StreamType, v1.StreamTypeError)
	h.Set(v1.PortHeader, "80")
	h.Set(v1.PortForwardRequestIDHeader, "0")
	errStream, err := conn.CreateStream(h)
	require.NoError(t, err)
	require.NoError(t, errStream.Close())
	h.Set(v1.StreamType, v1.StreamTypeData)
	_, err = conn.CreateStream(h)
	require.NoError(t, err)
	msg, _ := io.ReadAll(errStream) // the runtime resets the streams after its message, as containerd's server does
	assert.True(t, strings.HasPrefix(string(msg), fmt.Sprintf("error forwarding port 80 to pod %s, uid : failed to connect to %s:80 inside namespace %q: ", sandboxID, ip, sandboxID)), "%s", msg)

	for path, want := range map[string]struct {
		code int
		body string
	}{
		"/portForward/default/nginx/uid-other": {404, "pod not found\n"},
		"/portForward/default/nobody":          {404, "pod does not exist\n"},
		"/portForward/default/nginx?port=http": {400, "unable to parse \"http\" as a port\n"},
		"/portForward/default/nosandbox":       {500, "failed to find sandboxID for pod nosandbox_default(uid-none): it has no ready sandbox\n"},
		"/portForward/default/nginx?port=80":   {500, "Upgrade request required\n"}, // as upstream's responder
	} {
		resp, err := http.Post(srv.URL+path, "", nil)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, want.code, resp.StatusCode, path)
		assert.Equal(t, want.body, string(b), path)
	}
}
