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

// NewHTTPClient is the client HTTP probes use: no keep-alive (each probe
// is a new connection, as upstream), any certificate accepted for https,
// and redirects followed only on the same host.
func NewHTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as upstream: a probe checks liveness, not identity
			DisableKeepAlives:  true,
			DisableCompression: true,
			Proxy:              nil, // never through a proxy: the pod is on this node
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
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
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
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUserAgent(UserAgent))
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

// resolvePort is the probe's port as a number: an int, or the name of one
// of the container's ports.
func resolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
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
