package fakeruntime

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/api/core/v1"
	pfconst "k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pfserver "k8s.io/cri-streaming/pkg/streaming/portforward"
	clocktesting "k8s.io/utils/clock/testing"
)

// forward runs client-go's port forwarder (kubectl port-forward's) from a
// free port of 127.0.0.1 to remotePort at the streaming URL; it returns
// the local address.
func forward(t *testing.T, rawURL string, remotePort int) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	rt, upgrader, err := spdy.RoundTripperFor(&rest.Config{})
	require.NoError(t, err)
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, "POST", u)
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", remotePort)}, stop, ready, io.Discard, io.Discard)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("port-forward ended before it was ready: %v", err)
	}
	t.Cleanup(func() { close(stop); <-done })
	ports, err := pf.GetPorts()
	require.NoError(t, err)
	return fmt.Sprintf("127.0.0.1:%d", ports[0].Local)
}

// rawSession opens a portforward.k8s.io connection to rawURL, as the
// client does, for the tests that look at the streams themselves.
func rawSession(t *testing.T, rawURL string) interface {
	CreateStream(http.Header) (io.ReadWriteCloser, error)
} {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	rt, upgrader, err := spdy.RoundTripperFor(&rest.Config{})
	require.NoError(t, err)
	conn, proto, err := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, "POST", u).Dial(pfconst.PortForwardV1Name)
	require.NoError(t, err)
	require.Equal(t, pfconst.PortForwardV1Name, proto)
	t.Cleanup(func() { _ = conn.Close() })
	return sessionFunc(func(h http.Header) (io.ReadWriteCloser, error) { return conn.CreateStream(h) })
}

type sessionFunc func(http.Header) (io.ReadWriteCloser, error)

func (f sessionFunc) CreateStream(h http.Header) (io.ReadWriteCloser, error) { return f(h) }

// pair opens the error and data streams of one forwarded connection.
func pair(t *testing.T, s interface {
	CreateStream(http.Header) (io.ReadWriteCloser, error)
}, port int, requestID string) (errStream, data io.ReadWriteCloser) {
	t.Helper()
	h := http.Header{}
	h.Set(v1.StreamType, v1.StreamTypeError)
	h.Set(v1.PortHeader, fmt.Sprint(port))
	h.Set(v1.PortForwardRequestIDHeader, requestID)
	errStream, err := s.CreateStream(h)
	require.NoError(t, err)
	require.NoError(t, errStream.Close()) // the client writes nothing there
	h.Set(v1.StreamType, v1.StreamTypeData)
	data, err = s.CreateStream(h)
	require.NoError(t, err)
	return errStream, data
}

// loopbackSession serves upstream's port-forward server (the streaming
// server's, k8s.io/cri-streaming) on a test server whose forwarder
// connects every port to target (a server on 127.0.0.1), copying as the
// runtime does, and records the ports asked for.
func loopbackSession(t *testing.T, target string) (string, func() []int32) {
	t.Helper()
	var mu sync.Mutex
	var ports []int32
	fwd := forwarderFunc(func(ctx context.Context, _, _ string, port int32, stream io.ReadWriteCloser) error {
		mu.Lock()
		ports = append(ports, port)
		mu.Unlock()
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", target)
		if err != nil {
			return err
		}
		defer c.Close()
		copyBothWays(ctx, stream, c)
		return nil
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		pfserver.ServePortForward(w, req, fwd, "sandbox-1", "", nil, time.Hour, time.Minute, pfserver.SupportedProtocols)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []int32 {
		mu.Lock()
		defer mu.Unlock()
		return append([]int32(nil), ports...)
	}
}

type forwarderFunc func(ctx context.Context, name, uid string, port int32, stream io.ReadWriteCloser) error

func (f forwarderFunc) PortForward(ctx context.Context, name, uid string, port int32, stream io.ReadWriteCloser) error {
	return f(ctx, name, uid, port, stream)
}

// TestPortForwardCarriesHTTPBothWays: kubectl's forwarder, through the
// session, reaches the server its port is connected to, for several
// connections of one session, each dialled with the remote port.
func TestPortForwardCarriesHTTPBothWays(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "page %s", r.URL.Path)
	}))
	defer web.Close()
	u, ports := loopbackSession(t, strings.TrimPrefix(web.URL, "http://"))
	local := forward(t, u, 80)

	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
			resp, err := c.Get(fmt.Sprintf("http://%s/%d", local, i))
			if !assert.NoError(t, err) {
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			assert.Equal(t, fmt.Sprintf("page /%d", i), string(b))
		})
	}
	wg.Wait()
	assert.Equal(t, []int32{80, 80, 80}, ports(), "one dial per forwarded connection, to the remote port")
}

// TestPortForwardHalfClose: a client that has sent everything (its data
// stream closed) still gets the server's whole answer, which the server
// writes only once its input has ended.
func TestPortForwardHalfClose(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c) // until the client's end of input
		_, _ = c.Write(bytes.ToUpper(b))
	}()
	u, _ := loopbackSession(t, l.Addr().String())
	errStream, data := pair(t, rawSession(t, u), 7000, "0")
	_, err = io.WriteString(data, "hello, ")
	require.NoError(t, err)
	_, err = io.WriteString(data, "server")
	require.NoError(t, err)
	require.NoError(t, data.Close()) // half-close: the server sees EOF
	got, err := io.ReadAll(data)
	require.NoError(t, err)
	assert.Equal(t, "HELLO, SERVER", string(got))
	msg, err := io.ReadAll(errStream)
	require.NoError(t, err)
	assert.Empty(t, string(msg), "no error")
}

// TestPortForwardRefusedPortOnTheErrorStream: without the pod network
// nothing listens; the error stream says so as upstream's kubelet does,
// and a second connection of the same session is served too.
func TestPortForwardRefusedPortOnTheErrorStream(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-web", nil)
	resp, err := r.PortForward(context.Background(), &runtimeapi.PortForwardRequest{PodSandboxId: sb[:12], Port: []int32{80}})
	require.NoError(t, err, "a unique prefix of the ID is enough, as for crictl")
	require.True(t, strings.HasPrefix(resp.Url, "http://127.0.0.1:"), resp.Url)
	assert.Contains(t, resp.Url, "/portforward/")
	st, err := r.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb})
	require.NoError(t, err)
	ip := st.Status.Network.Ip

	s := rawSession(t, resp.Url)
	for i, port := range []int{80, 8080} {
		errStream, data := pair(t, s, port, fmt.Sprint(i))
		msg, _ := io.ReadAll(errStream) // the server resets the streams after its message
		assert.Equal(t, fmt.Sprintf("error forwarding port %d to pod %s, uid : failed to connect to %s:%d inside namespace %q: %v",
			port, sb, ip, port, sb, ErrNoPodNetwork), string(msg))
		b, _ := io.ReadAll(data)
		assert.Empty(t, b)
	}

	// The URL was for one connection.
	c := &http.Client{Timeout: 10 * time.Second}
	again, err := c.Post(resp.Url, "text/plain", nil)
	require.NoError(t, err)
	again.Body.Close()
	assert.Equal(t, http.StatusNotFound, again.StatusCode)
	// An exec URL is not a port-forward one, nor the reverse.
	id := createContainer(t, r, sb, "c")
	startContainer(t, r, id)
	ex := execURL(t, r, id, false, false, "true")
	pfURL := strings.Replace(ex, "/exec/", "/portforward/", 1)
	notPF, err := c.Post(pfURL, "text/plain", nil)
	require.NoError(t, err)
	notPF.Body.Close()
	assert.Equal(t, http.StatusNotFound, notPF.StatusCode)
}

// TestPortForwardRefusesWhatItCannotServe: an unknown sandbox and a
// stopped one. (Streams without a valid port or type are the server's to
// refuse: upstream's, tested there.)
func TestPortForwardRefusesWhatItCannotServe(t *testing.T) {
	r, _ := fixture(t)
	_, err := r.PortForward(context.Background(), &runtimeapi.PortForwardRequest{PodSandboxId: "nope"})
	assert.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	sb := runSandbox(t, r, "gone", "uid-gone", nil)
	_, err = r.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb})
	require.NoError(t, err)
	_, err = r.PortForward(context.Background(), &runtimeapi.PortForwardRequest{PodSandboxId: sb})
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	assert.ErrorContains(t, err, "is not running")

}

// TestPortForwardToNginxInThePodNetwork: with the pod network, kubectl's
// forwarder reaches nginx's welcome page in its sandbox, and a port
// nothing listens on is the kernel's refusal, from inside the namespace.
func TestPortForwardToNginxInThePodNetwork(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	r := networkRuntime(t, clk)
	ip, _ := serverContainer(t, r, "nginx", "nginx:1.27", nil)
	st, err := r.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	require.Len(t, st.Items, 1)
	sb := st.Items[0].Id

	resp, err := r.PortForward(context.Background(), &runtimeapi.PortForwardRequest{PodSandboxId: sb})
	require.NoError(t, err)
	local := forward(t, resp.Url, 80)
	var body string
	require.Eventually(t, func() bool { // nginx listens once its container has started
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
		resp, err := c.Get("http://" + local + "/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == 200
	}, 20*time.Second, 50*time.Millisecond)
	assert.Contains(t, body, "<title>Welcome to nginx!</title>")

	resp, err = r.PortForward(context.Background(), &runtimeapi.PortForwardRequest{PodSandboxId: sb})
	require.NoError(t, err)
	errStream, _ := pair(t, rawSession(t, resp.Url), 81, "0")
	raw, _ := io.ReadAll(errStream)
	msg := string(raw)
	assert.Contains(t, msg, fmt.Sprintf("error forwarding port 81 to pod %s, uid : failed to execute portforward in network namespace %q: failed to connect to %s:81 inside namespace %q: ",
		sb, "/run/netns/"+r.net.Name(), ip, sb))
	assert.Contains(t, msg, "connection refused")
}
