// Package server is the kubelet's HTTP servers, after upstream's
// pkg/kubelet/server:
//
//   - Server (server.go, auth.go) is the kubelet API on port 10250, the one
//     the API server calls for `kubectl logs`, `kubectl exec` and
//     /api/v1/nodes/<node>/proxy/…: HTTPS with the node's serving
//     certificate; every request authenticated (a client certificate of
//     the cluster CA, or a bearer token through a TokenReview) and
//     authorized (a SubjectAccessReview for the verb on nodes/<subresource>,
//     see GetRequestAttributes); /healthz, /pods, /containerLogs, /exec,
//     /attach and /portForward; and, when Config gives what they serve,
//     /stats/summary (the summary API metrics-server scrapes), /metrics,
//     /metrics/resource, /metrics/probes and /configz (stats.go).
//   - /healthz (healthz.go) is upstream's healthz format: "ok", or a line
//     per check, the failing ones' reasons withheld, and a 500; each check
//     alone at /healthz/<name> with its reason.
//   - DebugServer (debug.go) is a read-only page of the pod manager's pods
//     for a learner's browser, on loopback without authentication.
//   - Server and DebugServer are served with upstream's limits (serve.go,
//     DefaultLimits): 4 h read and write timeouts, 90 s idle keep-alive,
//     1 MiB of headers.
//
// Where Server departs from upstream, and why: plain net/http instead of
// go-restful; no /run, /checkpoint, /runningpods, /logs, /debug/pprof,
// /statusz, /flagz, and no /metrics/cadvisor (this kubelet runs no
// cAdvisor); /healthz checks "ping" and Config.HealthChecks, without
// upstream's "log" (that klog's flush daemon still runs); an endpoint
// that serves figures is there only when its Config field is set (nil:
// 404, rather than empty figures); no caching of TokenReview and SubjectAccessReview answers
// (upstream keeps them 2 min and 5 min/30 s: fewer API calls, slower to
// notice a revoked permission); a container's log is read by polling its
// file rather than with fsnotify; no WebSocket upgrade of its own
// (ExtendWebSocketsToKubelet: the node does not declare it, so the API
// server translates kubectl's WebSocket streams into SPDY before they reach
// the kubelet); a 10 s ReadHeaderTimeout, which upstream does not set
// (without it a client may dribble its headers for 4 h).
package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/kubetypes"
	"mykubelet/mylib/linger"
	kubepod "mykubelet/mylib/pod"
)

// DefaultPort is the kubelet's --port.
const DefaultPort = 10250

// LogPollPeriod is how often a followed log is checked for more output.
const LogPollPeriod = 100 * time.Millisecond

// Config is what NewServer needs.
type Config struct {
	// NodeName is the node this kubelet is: the name in every
	// SubjectAccessReview. Required.
	NodeName string
	// Pods is the pod manager: /pods lists it, and the other endpoints look
	// pods up in it by namespace and name. Required.
	Pods kubepod.Manager
	// Runtime answers ContainerStatus (a log's path) and Exec/Attach/
	// PortForward (a URL of the runtime's streaming server). Required.
	Runtime runtimeapi.RuntimeServiceClient
	// Authenticator and Authorizer guard every request. Required.
	Authenticator Authenticator
	Authorizer    Authorizer
	// Clock: nil is the real clock.
	Clock clock.Clock

	// The optional endpoints (stats.go); each nil one answers 404.
	// Summary serves /stats/summary (stats.Provider); Metrics,
	// ResourceMetrics and ProbeMetrics serve /metrics, /metrics/resource
	// and /metrics/probes; Configz is the KubeletConfiguration /configz
	// shows.
	Summary         SummaryProvider
	Metrics         http.Handler
	ResourceMetrics http.Handler
	ProbeMetrics    http.Handler
	Configz         func() any
	// HealthChecks are /healthz's checks after "ping" (upstream's
	// syncloop, say), in order; each also answers at /healthz/<name>.
	// Names are unique, without '/'.
	HealthChecks []HealthCheck
}

// SummaryProvider is what /stats/summary reads (stats.Provider).
type SummaryProvider interface {
	Get(ctx context.Context, updateStats bool) (*statsapi.Summary, error)
}

// HealthCheck is one named /healthz check: nil from Check is healthy.
type HealthCheck struct {
	Name  string
	Check func(r *http.Request) error
}

// Server is the kubelet API's http.Handler (upstream's server.Server).
type Server struct {
	cfg Config
	mux *http.ServeMux
	h   http.Handler
}

// NewServer checks cfg and builds the handler.
func NewServer(cfg Config) (*Server, error) {
	if cfg.NodeName == "" || cfg.Pods == nil || cfg.Runtime == nil || cfg.Authenticator == nil || cfg.Authorizer == nil {
		return nil, errors.New("server: Config needs NodeName, Pods, Runtime, Authenticator and Authorizer")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if err := checkHealthChecks(cfg.HealthChecks); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux()}
	installHealthz(s.mux, cfg.HealthChecks)
	s.installOptional()
	s.mux.HandleFunc("GET /pods", s.getPods)
	s.mux.HandleFunc("GET /pods/{$}", s.getPods)
	s.mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.getContainerLogs)
	for _, m := range []string{"GET", "POST"} {
		s.mux.HandleFunc(m+" /exec/{namespace}/{pod}/{container}", s.getExec)
		s.mux.HandleFunc(m+" /exec/{namespace}/{pod}/{uid}/{container}", s.getExec)
		s.mux.HandleFunc(m+" /attach/{namespace}/{pod}/{container}", s.getAttach)
		s.mux.HandleFunc(m+" /attach/{namespace}/{pod}/{uid}/{container}", s.getAttach)
		s.mux.HandleFunc(m+" /portForward/{namespace}/{pod}", s.getPortForward)
		s.mux.HandleFunc(m+" /portForward/{namespace}/{pod}/{uid}", s.getPortForward)
	}
	s.h = WithAuth(cfg.NodeName, cfg.Authenticator, cfg.Authorizer, s.mux)
	return s, nil
}

// ServeHTTP authenticates and authorizes, then serves.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.h.ServeHTTP(w, r) }

// TLSConfig is the server's TLS: the serving certificate, TLS 1.2 or
// later, and client certificates asked for but checked by
// X509Authenticator (so that a wrong one is a 401, as upstream's).
func TLSConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert}
}

// ListenAndServe serves s with TLS on lis in a goroutine wg waits for,
// until ctx ends.
func ListenAndServe(ctx context.Context, wg *sync.WaitGroup, lis net.Listener, s http.Handler, cert tls.Certificate) {
	ListenAndServeTLS(ctx, wg, lis, s, TLSConfig(cert))
}

// ListenAndServeTLS is ListenAndServe with a TLS configuration of one's
// own (bootstrap.ServingTLSConfig: a rotated certificate), with
// DefaultLimits, as upstream's ListenAndServeKubeletServer.
func ListenAndServeTLS(ctx context.Context, wg *sync.WaitGroup, lis net.Listener, s http.Handler, tlsConfig *tls.Config) {
	serve(ctx, wg, lis, NewHTTPServer(s, DefaultLimits()), tlsConfig)
}

// NewWebhookAuth returns the authenticator and authorizer of a kubelet
// configured as kubeadm configures it (authentication.anonymous off,
// x509 with the cluster CA, webhook on; authorization mode Webhook):
// client certificates of clientCA, bearer tokens through TokenReviews, and
// SubjectAccessReviews, both asked with client, the node's credentials.
func NewWebhookAuth(client kubernetes.Interface, clientCA []byte) (Authenticator, Authorizer, error) {
	roots, err := CertPool(clientCA)
	if err != nil {
		return nil, nil, err
	}
	return UnionAuthenticator{X509Authenticator{Roots: roots}, TokenReviewAuthenticator{Client: client}},
		SubjectAccessReviewAuthorizer{Client: client}, nil
}

// getPods answers the pod manager's pods as a v1 PodList.
func (s *Server) getPods(w http.ResponseWriter, _ *http.Request) {
	list := v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: []v1.Pod{}}
	for _, p := range s.cfg.Pods.GetPods() {
		list.Items = append(list.Items, *p)
	}
	writeJSON(w, list)
}

// podAndStatus finds a pod and the status to read container IDs from: a
// static pod's is on its mirror pod.
func (s *Server) podAndStatus(ns, name string) (*v1.Pod, *v1.PodStatus, bool) {
	pod, ok := s.cfg.Pods.GetPodByName(ns, name)
	if !ok {
		return nil, nil, false
	}
	st := &pod.Status
	if m, ok := s.cfg.Pods.GetMirrorPodByPod(pod); ok {
		st = &m.Status
	}
	return pod, st, true
}

// hasContainer: the pod's spec has a container of that name, of any kind:
// init, regular or ephemeral (upstream's kubecontainer.GetContainerSpec,
// which visits all three).
func hasContainer(pod *v1.Pod, name string) bool {
	for _, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range cs {
			if c.Name == name {
				return true
			}
		}
	}
	for _, ec := range pod.Spec.EphemeralContainers {
		if ec.Name == name {
			return true
		}
	}
	return false
}

// getContainerLogs is upstream's getContainerLogs with
// GetKubeletContainerLogs: the query decoded and validated, the pod and
// container looked up, the container ID from the pod's status
// (validateContainerLogStatus), its log path from the runtime, then
// ReadLogs.
func (s *Server) getContainerLogs(w http.ResponseWriter, r *http.Request) {
	ns, podName, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, err := ParseLogOptions(r.URL.Query(), s.cfg.Clock.Now())
	if err != nil {
		var bq *BadQueryError
		if errors.As(err, &bq) && bq.Invalid {
			http.Error(w, `{"message": "Invalid request."}: `+err.Error(), http.StatusUnprocessableEntity)
			return
		}
		http.Error(w, `{"message": "Unable to decode query."}: `+err.Error(), http.StatusBadRequest)
		return
	}
	pod, podStatus, ok := s.podAndStatus(ns, podName)
	if !ok {
		http.Error(w, fmt.Sprintf("pod %q does not exist", podName), http.StatusNotFound)
		return
	}
	if !hasContainer(pod, container) {
		http.Error(w, fmt.Sprintf("container %q not found in pod %q", container, podName), http.StatusNotFound)
		return
	}
	id, err := ValidateContainerLogStatus(pod.Name, podStatus, container, opts.Previous)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := s.cfg.Runtime.ContainerStatus(r.Context(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		http.Error(w, fmt.Sprintf("failed to get container status %q: %v", id, err), http.StatusBadRequest)
		return
	}
	path := resp.GetStatus().GetLogPath()
	if path == "" {
		http.Error(w, fmt.Sprintf("container %q in pod %q has no log path", container, podName), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	fw := &flushWriter{w: w}
	if f, ok := w.(http.Flusher); ok {
		fw.f = f
	}
	running := func(ctx context.Context) (bool, error) {
		st, err := s.cfg.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		if status.Code(err) == codes.Unavailable {
			return true, nil // as upstream: the runtime is away, the container may well run on
		}
		if err != nil {
			return false, err
		}
		return st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING, nil
	}
	if err := ReadLogs(r.Context(), path, opts, running, s.cfg.Clock, LogPollPeriod, fw, fw); err != nil && r.Context().Err() == nil {
		if !fw.wrote {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		klog.ErrorS(err, "Reading a container's log failed", "pod", klog.KRef(ns, podName), "container", container)
	}
}

// flushWriter flushes after every write, so that `kubectl logs -f` sees
// each line when it is written.
type flushWriter struct {
	mu    sync.Mutex
	w     io.Writer
	f     http.Flusher
	wrote bool
}

func (fw *flushWriter) Write(p []byte) (int, error) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	n, err := fw.w.Write(p)
	fw.wrote = true
	if fw.f != nil {
		fw.f.Flush()
	}
	return n, err
}

// ValidateContainerLogStatus picks the container whose log to read from
// the pod's status, with upstream's messages: the running one; a
// terminated one; with previous, the last terminated one; none while it
// waits to start.
func ValidateContainerLogStatus(podName string, ps *v1.PodStatus, containerName string, previous bool) (string, error) {
	var cs *v1.ContainerStatus
	for _, list := range [][]v1.ContainerStatus{ps.ContainerStatuses, ps.InitContainerStatuses, ps.EphemeralContainerStatuses} {
		for i := range list {
			if list[i].Name == containerName {
				cs = &list[i]
			}
		}
	}
	if cs == nil {
		return "", fmt.Errorf("container %q in pod %q is not available", containerName, podName)
	}
	last := cs.LastTerminationState
	waiting, running, terminated := cs.State.Waiting, cs.State.Running, cs.State.Terminated
	var id string
	switch {
	case previous:
		if last.Terminated == nil || last.Terminated.ContainerID == "" {
			return "", fmt.Errorf("previous terminated container %q in pod %q not found", containerName, podName)
		}
		id = last.Terminated.ContainerID
	case running != nil:
		id = cs.ContainerID
	case terminated != nil:
		id = terminated.ContainerID
		if id == "" && last.Terminated != nil {
			id = last.Terminated.ContainerID
		}
		if id == "" {
			return "", fmt.Errorf("container %q in pod %q is terminated", containerName, podName)
		}
	case last.Terminated != nil:
		if last.Terminated.ContainerID == "" {
			return "", fmt.Errorf("container %q in pod %q is terminated", containerName, podName)
		}
		id = last.Terminated.ContainerID
	case waiting != nil:
		switch waiting.Reason {
		case "ErrImagePull":
			return "", fmt.Errorf("container %q in pod %q is waiting to start: image can't be pulled", containerName, podName)
		case "ImagePullBackOff":
			return "", fmt.Errorf("container %q in pod %q is waiting to start: trying and failing to pull image", containerName, podName)
		default:
			return "", fmt.Errorf("container %q in pod %q is waiting to start: %v", containerName, podName, waiting.Reason)
		}
	default:
		return "", fmt.Errorf("container %q in pod %q is waiting to start - no logs yet", containerName, podName)
	}
	_, raw, ok := strings.Cut(id, "://")
	if !ok {
		return "", fmt.Errorf("container %q in pod %q: bad container ID %q", containerName, podName, id)
	}
	return raw, nil
}

// runningContainerID is the ID of the pod's running container of that
// name (regular, init or ephemeral: `kubectl debug -it` attaches to its
// ephemeral container), for exec and attach (upstream's findContainer, which reads the
// runtime; this reads the status the kubelet wrote).
func (s *Server) runningContainerID(ns, podName, container string) (*v1.Pod, string, int, error) {
	pod, ps, ok := s.podAndStatus(ns, podName)
	if !ok {
		return nil, "", http.StatusNotFound, errors.New("pod does not exist")
	}
	for _, list := range [][]v1.ContainerStatus{ps.ContainerStatuses, ps.InitContainerStatuses, ps.EphemeralContainerStatuses} {
		for _, cs := range list {
			if cs.Name == container && cs.State.Running != nil {
				if _, raw, ok := strings.Cut(cs.ContainerID, "://"); ok {
					return pod, raw, 0, nil
				}
			}
		}
	}
	return pod, "", http.StatusInternalServerError, fmt.Errorf("container not found (%q)", container)
}

// StreamOptions are the query of /exec and /attach (upstream's
// remotecommand.NewOptions): stdin, stdout, stderr, tty; at least one
// stream, and no stderr with a TTY (it goes to stdout).
type StreamOptions struct {
	Stdin, Stdout, Stderr, TTY bool
}

// ParseStreamOptions reads StreamOptions from a query as upstream's
// remotecommand.NewOptions: the parameters the API server sends (input,
// output, error, tty: v1.ExecStdinParam…) are on when "1"; stderr is
// dropped with a TTY (it goes to stdout); at least one stream.
func ParseStreamOptions(q url.Values) (StreamOptions, error) {
	o := StreamOptions{Stdin: q.Get(v1.ExecStdinParam) == "1", Stdout: q.Get(v1.ExecStdoutParam) == "1",
		Stderr: q.Get(v1.ExecStderrParam) == "1", TTY: q.Get(v1.ExecTTYParam) == "1"}
	if o.TTY && o.Stderr {
		o.Stderr = false // upstream logs "Access to exec with tty and stderr is not supported, bypassing stderr"
	}
	if !o.Stdin && !o.Stdout && !o.Stderr {
		return o, errors.New("you must specify at least 1 of stdin, stdout, stderr")
	}
	return o, nil
}

func (s *Server) getExec(w http.ResponseWriter, r *http.Request) {
	opts, err := ParseStreamOptions(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cmd := r.URL.Query()["command"]
	if len(cmd) == 0 {
		http.Error(w, "you must specify a command (the query parameter command, once per argument)", http.StatusBadRequest)
		return
	}
	_, id, code, err := s.runningContainerID(r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container"))
	if err != nil {
		http.Error(w, err.Error(), code)
		return
	}
	resp, err := s.cfg.Runtime.Exec(r.Context(), &runtimeapi.ExecRequest{ContainerId: id, Cmd: cmd,
		Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, Tty: opts.TTY})
	s.proxyStream(w, r, resp.GetUrl(), err)
}

func (s *Server) getAttach(w http.ResponseWriter, r *http.Request) {
	opts, err := ParseStreamOptions(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_, id, code, err := s.runningContainerID(r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container"))
	if err != nil {
		http.Error(w, err.Error(), code)
		return
	}
	resp, err := s.cfg.Runtime.Attach(r.Context(), &runtimeapi.AttachRequest{ContainerId: id,
		Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, Tty: opts.TTY})
	s.proxyStream(w, r, resp.GetUrl(), err)
}

// getPortForward asks the runtime for a port-forward URL to the pod's
// sandbox, the newest ready one (upstream's GetPortForward takes the newest
// sandbox of the pod's UID), and proxies the connection there. The ports
// in the query (port=…, what a WebSocket client names) go along in the
// request; an SPDY client names each port on its streams.
func (s *Server) getPortForward(w http.ResponseWriter, r *http.Request) {
	pod, _, ok := s.podAndStatus(r.PathValue("namespace"), r.PathValue("pod"))
	if !ok {
		http.Error(w, "pod does not exist", http.StatusNotFound)
		return
	}
	if uid := r.PathValue("uid"); uid != "" && string(pod.UID) != uid {
		http.Error(w, "pod not found", http.StatusNotFound)
		return
	}
	var ports []int32
	for _, p := range r.URL.Query()["port"] {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			http.Error(w, fmt.Sprintf("unable to parse %q as a port", p), http.StatusBadRequest)
			return
		}
		ports = append(ports, int32(n))
	}
	sandboxes, err := s.cfg.Runtime.ListPodSandbox(r.Context(), &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{kubetypes.KubernetesPodUIDLabel: string(pod.UID)}}})
	if err != nil {
		http.Error(w, fmt.Sprintf("failed to find sandboxID for pod %s_%s(%s): %v", pod.Name, pod.Namespace, pod.UID, err), http.StatusInternalServerError)
		return
	}
	if len(sandboxes.GetItems()) == 0 {
		http.Error(w, fmt.Sprintf("failed to find sandboxID for pod %s_%s(%s): it has no ready sandbox", pod.Name, pod.Namespace, pod.UID), http.StatusInternalServerError)
		return
	}
	newest := slices.MaxFunc(sandboxes.GetItems(), func(a, b *runtimeapi.PodSandbox) int { return cmp.Compare(a.GetCreatedAt(), b.GetCreatedAt()) })
	resp, err := s.cfg.Runtime.PortForward(r.Context(), &runtimeapi.PortForwardRequest{PodSandboxId: newest.GetId(), Port: ports})
	s.proxyStream(w, r, resp.GetUrl(), err)
}

// proxyStream hands the upgraded connection to the runtime's streaming
// server at rawURL, as upstream does with an UpgradeAwareHandler, whose
// end of the client's connection closes as package linger says (upstream's
// closes at once, and a proxy on the way may then lose the exit code); errors
// of the runtime are written as upstream's streaming.WriteError does
// (404 for NotFound, 429 for ResourceExhausted, else 500).
func (s *Server) proxyStream(w http.ResponseWriter, r *http.Request, rawURL string, err error) {
	if err != nil {
		code := http.StatusInternalServerError
		switch status.Code(err) {
		case codes.NotFound:
			code = http.StatusNotFound
		case codes.ResourceExhausted:
			code = http.StatusTooManyRequests
		}
		http.Error(w, err.Error(), code)
		return
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		http.Error(w, fmt.Sprintf("the runtime's streaming URL %q: %v", rawURL, err), http.StatusInternalServerError)
		return
	}
	proxy.NewUpgradeAwareHandler(u, nil, false, true, responder{}).ServeHTTP(linger.Writer{ResponseWriter: w}, r)
}

type responder struct{}

func (responder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	klog.ErrorS(err, "Error while proxying request")
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// CertPool reads a PEM bundle of CA certificates (the cluster CA).
func CertPool(pemBytes []byte) (*x509.CertPool, error) {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemBytes) {
		return nil, errors.New("no PEM certificate in the CA bundle")
	}
	return p, nil
}
