package prober

// The four handlers, each answering a Result, the output a learner sees in
// the Unhealthy event, and an error only when the probe could not be run at
// all (upstream pkg/probe/{exec,http,tcp,grpc}).

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpchealth "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Result is a handler's verdict (upstream pkg/probe.Result).
type Result string

// The verdicts. Warning counts as a success, with an event.
const (
	Success Result = "success"
	Warning Result = "warning"
	Failure Result = "failure"
	Unknown Result = "unknown"
)

// UserAgent is what HTTP and gRPC probes send, "kube-probe/<major>.<minor>"
// of the kubelet's version, as upstream.
const UserAgent = "kube-probe/1.37"

// maxRespBodyLength is how much of an HTTP answer a probe reads (10 KiB).
const maxRespBodyLength = 10 * 1 << 10

// ExecProbe runs cmd in the container through CRI ExecSync, with the
// probe's timeout: exit code 0 is Success, any other Failure with the
// command's output; a command still running at the timeout is a Failure
// "command … timed out" (upstream: exec probes with ExecProbeTimeout).
func ExecProbe(ctx context.Context, rs runtimeapi.RuntimeServiceClient, containerID string, cmd []string, timeout time.Duration) (Result, string, error) {
	resp, err := rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: containerID, Cmd: cmd, Timeout: int64(timeout.Seconds())})
	if status.Code(err) == codes.DeadlineExceeded {
		return Failure, fmt.Sprintf("command %q timed out", strings.Join(cmd, " ")), nil
	}
	if err != nil {
		return Unknown, "", err
	}
	out := string(resp.GetStdout()) + string(resp.GetStderr())
	if resp.GetExitCode() != 0 {
		return Failure, out, nil
	}
	return Success, out, nil
}

// DialFunc opens a connection, as net.Dialer.DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// dialer is dial, or a plain net.Dialer with timeout.
func dialer(dial DialFunc, timeout time.Duration) DialFunc {
	if dial != nil {
		return dial
	}
	return (&net.Dialer{Timeout: timeout}).DialContext
}

// GuardedDialer dials only addresses inside allowed, and fails for any
// other with "probe target A is outside the networks this kubelet may
// reach (…)" and why: a kubelet on a machine whose network it must not
// touch (the mock runtime without its pod network) never sends a packet
// there.
func GuardedDialer(allowed []netip.Prefix, why string) DialFunc {
	var names []string
	for _, p := range allowed {
		names = append(names, p.String())
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return nil, fmt.Errorf("probe target %s: only IP addresses are probed here", addr)
		}
		for _, p := range allowed {
			if p.Contains(ip.Unmap()) {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}
		}
		msg := fmt.Sprintf("probe target %s is outside the networks this kubelet may reach (%s)", addr, strings.Join(names, ", "))
		if why != "" {
			msg += ": " + why
		}
		return nil, errors.New(msg)
	}
}

// AllowPodIPs is guarded, a dial that reaches only the networks it was
// given (GuardedDialer), that also dials the addresses isPodIP accepts:
// the IPs the runtime reports for this node's pods (on a real runtime
// they are in its CNI network, which the kubelet does not know in
// advance). Every other address is still guarded's to refuse. Nil
// guarded is a plain dialer already: it is returned as is.
func AllowPodIPs(guarded DialFunc, isPodIP func(netip.Addr) bool) DialFunc {
	if guarded == nil || isPodIP == nil {
		return guarded
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			if ip, err := netip.ParseAddr(host); err == nil && isPodIP(ip.Unmap()) {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}
		}
		return guarded(ctx, network, addr)
	}
}

// NewHTTPClient is the client HTTP probes use: no keep-alive (each probe
// is a new connection, as upstream), any certificate accepted for https,
// and redirects followed only on the same host.
func NewHTTPClient(timeout time.Duration) *http.Client { return newHTTPClient(timeout, nil) }

// NewHTTPClientWithDial is NewHTTPClient opening its connections with dial
// (nil: a plain dialer); timeout 0 is none.
func NewHTTPClientWithDial(timeout time.Duration, dial DialFunc) *http.Client {
	return newHTTPClient(timeout, dial)
}

func newHTTPClient(timeout time.Duration, dial DialFunc) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as upstream: a probe checks liveness, not identity
			DisableKeepAlives:  true,
			DisableCompression: true,
			Proxy:              nil, // never through a proxy: the pod is on this node
			DialContext:        dialer(dial, timeout),
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Hostname() != via[0].URL.Hostname() {
				return http.ErrUseLastResponse // a redirect off the host ends the probe (Warning)
			}
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			return nil
		},
	}
}

// NewHTTPRequest builds the probe's GET: scheme://host:port/path, host the
// pod's IP unless the probe names one, with upstream's headers (User-Agent
// kube-probe, Accept */*) and the probe's own, a Host header included.
func NewHTTPRequest(ctx context.Context, g *v1.HTTPGetAction, podIP string, port int) (*http.Request, error) {
	host := g.Host
	if host == "" {
		host = podIP
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	p := g.Path
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	u, err := url.Parse(scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)) + p)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set("Accept", "*/*")
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	return req, nil
}

// HTTPProbe sends req: 200–299 is Success, 300–399 (a redirect not
// followed) Warning, anything else Failure "HTTP probe failed with
// statuscode: N"; a connection that fails or times out is a Failure with
// the client's error.
func HTTPProbe(req *http.Request, client *http.Client) (Result, string, error) {
	res, err := client.Do(req)
	if err != nil {
		return Failure, err.Error(), nil
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxRespBodyLength))
	if err != nil {
		return Failure, "", err
	}
	body := string(b)
	if res.StatusCode >= http.StatusOK && res.StatusCode < http.StatusBadRequest {
		if res.StatusCode >= http.StatusMultipleChoices {
			return Warning, "Probe terminated redirects, Response body: " + body, nil
		}
		return Success, body, nil
	}
	return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", res.StatusCode), nil
}

// TCPProbe opens a TCP connection to host:port and closes it: connected is
// Success, refused or timed out a Failure with the dialer's error.
func TCPProbe(ctx context.Context, host string, port int, timeout time.Duration) (Result, string, error) {
	return tcpProbe(ctx, host, port, timeout, nil)
}

func tcpProbe(ctx context.Context, host string, port int, timeout time.Duration, dial DialFunc) (Result, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := dialer(dial, timeout)(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return Failure, err.Error(), nil
	}
	_ = conn.Close() // connected is all a TCP probe asks
	return Success, "", nil
}

// GRPCProbe asks host:port's grpc.health.v1.Health/Check about service
// ("" is the server as a whole): SERVING is Success, anything else a
// Failure with upstream's messages.
func GRPCProbe(ctx context.Context, host string, port int, service string, timeout time.Duration) (Result, string, error) {
	return grpcProbe(ctx, host, port, service, timeout, nil)
}

func grpcProbe(ctx context.Context, host string, port int, service string, timeout time.Duration, dial DialFunc) (Result, string, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	d := dialer(dial, timeout)
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUserAgent(UserAgent),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d(ctx, "tcp", a) }))
	if err != nil {
		return Failure, fmt.Sprintf("error: failed to connect service at %q: %+v", addr, err), nil
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := grpchealth.NewHealthClient(conn).Check(ctx, &grpchealth.HealthCheckRequest{Service: service})
	if err != nil {
		switch status.Code(err) {
		case codes.Unimplemented:
			return Failure, fmt.Sprintf("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", status.Convert(err).Message()), nil
		case codes.DeadlineExceeded:
			return Failure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout), nil
		}
		return Failure, fmt.Sprintf("error: health rpc probe failed: %+v", err), nil
	}
	if resp.GetStatus() != grpchealth.HealthCheckResponse_SERVING {
		return Failure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String()), nil
	}
	return Success, "service healthy", nil
}

// ResolvePort is a probe's or an httpGet hook's port as a number: an int,
// or the name of one of the container's ports (upstream's
// probe.ResolveContainerPort).
func ResolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
	if p.Type == intstr.Int {
		if p.IntVal <= 0 || p.IntVal > 65535 {
			return 0, fmt.Errorf("invalid port number: %d", p.IntVal)
		}
		return int(p.IntVal), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil && n > 0 && n <= 65535 {
		return n, nil
	}
	return 0, fmt.Errorf("couldn't find port %q in container %s", p.StrVal, c.Name)
}
