package fakeruntime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ControlUsage lists the control API's requests.
const ControlUsage = `Control API (answers are text; errors are 4xx with the reason; no authentication, loopback only):
  GET  /                                                       this listing
  POST /pods/{namespace}/{name}/{kill|remove}                  the pod's newest sandbox and its containers
  POST /pods/{namespace}/{name}/containers/{container}/{kill|stop|remove|exec|fail|recover}
  POST /containers/{id}/{kill|stop|remove|exec|fail|recover}   id: full ID or a unique prefix
  POST /sandboxes/{id}/{kill|remove}
  kill: SIGKILL (exit 137); stop?timeout=10: SIGTERM, then SIGKILL after the timeout (seconds);
  exec?cmd=SCRIPT: run a shell command in the container (as ExecSync) and print its output;
  fail, recover: its servers' probe targets fail (HTTP 500, TCP refused, gRPC NOT_SERVING), then answer again
`

// NewControlHandler returns the HTTP control API of r: it lists the
// runtime's state and kills, stops, removes or execs in containers and
// sandboxes by ID or by pod name (see ControlUsage).
//
// It has no authentication: serve it on loopback only (ListenControl). As
// a defence against web pages the user visits (a cross-site form POST, DNS
// rebinding), it refuses (403) a request whose Host is not a loopback
// name or address, or that carries an Origin other than a loopback one.
func NewControlHandler(r *Runtime) http.Handler {
	h := &controlHandler{rt: r}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.list)
	mux.HandleFunc("POST /containers/{id}/{action}", func(w http.ResponseWriter, req *http.Request) {
		h.container(w, req, req.PathValue("id"))
	})
	mux.HandleFunc("POST /pods/{namespace}/{name}/containers/{container}/{action}", func(w http.ResponseWriter, req *http.Request) {
		id, err := r.FindContainer(req.PathValue("namespace"), req.PathValue("name"), req.PathValue("container"))
		if err != nil {
			writeError(w, err)
			return
		}
		h.container(w, req, id)
	})
	mux.HandleFunc("POST /sandboxes/{id}/{action}", func(w http.ResponseWriter, req *http.Request) {
		if !noQuery(w, req) {
			return
		}
		ref, err := r.SandboxAction(req.PathValue("id"), Action(req.PathValue("action")))
		h.answer(w, req, ref, err)
	})
	mux.HandleFunc("POST /pods/{namespace}/{name}/{action}", func(w http.ResponseWriter, req *http.Request) {
		if !noQuery(w, req) {
			return
		}
		ref, err := r.PodAction(req.PathValue("namespace"), req.PathValue("name"), Action(req.PathValue("action")))
		h.answer(w, req, ref, err)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost && req.URL.Path != "/" {
			http.Error(w, fmt.Sprintf("%s %s: use POST to act on containers, sandboxes and pods\n\n%s", req.Method, req.URL.Path, ControlUsage), http.StatusMethodNotAllowed)
			return
		}
		http.Error(w, fmt.Sprintf("%s %s: no such request\n\n%s", req.Method, req.URL.Path, ControlUsage), http.StatusNotFound)
	})
	return loopbackOnly(mux)
}

// loopbackOnly refuses requests that a browser sends on behalf of another
// site: a Host that is not loopback (DNS rebinding), an Origin that is not
// loopback (a cross-site POST), a Sec-Fetch-Site of cross-site.
func loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !isLoopbackHost(req.Host) {
			http.Error(w, fmt.Sprintf("forbidden: Host %q is not a loopback address; the control API answers only requests to localhost or 127.0.0.1", req.Host), http.StatusForbidden)
			return
		}
		if origin := req.Header.Get("Origin"); origin != "" {
			u, err := url.Parse(origin)
			if err != nil || !isLoopbackHost(u.Host) {
				http.Error(w, fmt.Sprintf("forbidden: cross-site request from Origin %q", origin), http.StatusForbidden)
				return
			}
		}
		if req.Header.Get("Sec-Fetch-Site") == "cross-site" {
			http.Error(w, "forbidden: cross-site request", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// isLoopbackHost reports whether host (with or without a port) is
// "localhost" or a loopback IP address.
func isLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ListenControl listens for the control API on addr, which must be a
// loopback address ("127.0.0.1:10355", "localhost:0", "[::1]:0"): the API
// has no authentication.
func ListenControl(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("address %q: want host:port, such as 127.0.0.1:10355", addr)
	}
	if !isLoopbackHost(host) {
		return nil, fmt.Errorf("address %q is not on loopback: the control API has no authentication, so it listens only on 127.0.0.1, ::1 or localhost", addr)
	}
	return net.Listen("tcp", addr)
}

type controlHandler struct{ rt *Runtime }

func noQuery(w http.ResponseWriter, req *http.Request) bool {
	if len(req.URL.Query()) > 0 {
		writeError(w, fmt.Errorf("%w: %s takes no query parameters", ErrBadRequest, req.PathValue("action")))
		return false
	}
	return true
}

// queryTimeout reads the query parameter timeout (seconds), def if absent.
func queryTimeout(q url.Values, def int64) (int64, error) {
	if !q.Has("timeout") {
		return def, nil
	}
	n, err := strconv.ParseInt(q.Get("timeout"), 10, 64)
	if err != nil || n < 0 || n > MaxControlTimeout {
		return 0, fmt.Errorf("%w: timeout %q: want whole seconds from 0 to %d", ErrBadRequest, q.Get("timeout"), MaxControlTimeout)
	}
	return n, nil
}

// onlyParams refuses query parameters other than allowed.
func onlyParams(q url.Values, action string, allowed ...string) error {
	for k := range q {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			if len(allowed) == 0 {
				return fmt.Errorf("%w: %s takes no query parameters", ErrBadRequest, action)
			}
			return fmt.Errorf("%w: unknown parameter %q for %s: want %s", ErrBadRequest, k, action, strings.Join(allowed, ", "))
		}
	}
	return nil
}

func (h *controlHandler) container(w http.ResponseWriter, req *http.Request, id string) {
	action := Action(req.PathValue("action"))
	q := req.URL.Query()
	switch action {
	case ActionStop:
		if err := onlyParams(q, string(action), "timeout"); err != nil {
			writeError(w, err)
			return
		}
		timeout, err := queryTimeout(q, DefaultStopTimeout)
		if err != nil {
			writeError(w, err)
			return
		}
		ref, err := h.rt.LookupContainer(id)
		if err != nil {
			writeError(w, err)
			return
		}
		ctx, cancel := context.WithTimeout(req.Context(), time.Duration(timeout+5)*time.Second)
		defer cancel()
		if _, err := h.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: ref.ID, Timeout: timeout}); err != nil {
			writeError(w, err)
			return
		}
		fmt.Fprintf(w, "stopped %s\n", ref)
	case ActionExec:
		if err := onlyParams(q, string(action), "cmd", "timeout"); err != nil {
			writeError(w, err)
			return
		}
		timeout, err := queryTimeout(q, DefaultStopTimeout)
		if err != nil {
			writeError(w, err)
			return
		}
		if q.Get("cmd") == "" {
			writeError(w, fmt.Errorf("%w: exec needs cmd=SCRIPT, for example cmd=ls%%20/tmp", ErrBadRequest))
			return
		}
		ref, err := h.rt.LookupContainer(id)
		if err != nil {
			writeError(w, err)
			return
		}
		resp, err := h.rt.ExecSync(req.Context(), &runtimeapi.ExecSyncRequest{ContainerId: ref.ID, Cmd: []string{"sh", "-c", q.Get("cmd")}, Timeout: timeout})
		if err != nil {
			writeError(w, err)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write(resp.GetStdout()) // a failed write to the client has no one to report to
		_, _ = w.Write(resp.GetStderr())
		fmt.Fprintf(w, "exec in %s: exit code %d\n", ref, resp.GetExitCode())
	default:
		if err := onlyParams(q, string(action)); err != nil {
			writeError(w, err)
			return
		}
		ref, err := h.rt.ContainerAction(id, action)
		h.answer(w, req, ref, err)
	}
}

// past is the past tense of the actions, for answers.
var past = map[string]string{"kill": "killed", "remove": "removed", "fail": "failing:", "recover": "recovered:"}

func (h *controlHandler) answer(w http.ResponseWriter, req *http.Request, ref Ref, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	fmt.Fprintf(w, "%s %s\n", past[req.PathValue("action")], ref)
}

func writeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, ErrAmbiguous):
		code = http.StatusConflict
	case errors.Is(err, ErrBadRequest):
		code = http.StatusBadRequest
	default:
		// A CRI error (a container not running, a timeout): the request
		// cannot be done now.
		if err2 := controlErr(err); errors.Is(err2, ErrNotFound) || errors.Is(err2, ErrAmbiguous) {
			writeError(w, err2)
			return
		}
		if _, ok := grpcStatus(err); ok {
			code = http.StatusConflict
		}
	}
	http.Error(w, err.Error(), code)
}

func (h *controlHandler) list(w http.ResponseWriter, _ *http.Request) {
	snap := h.rt.Snapshot()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tSANDBOX\tSTATE\tCONTAINER\tATTEMPT\tID\tSTATE\tEXIT\tCOMMAND")
	for _, s := range snap.Sandboxes {
		if len(s.Containers) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t\t\t\t\t\n", s.Pod, short(s.ID), s.State)
		}
		for _, c := range s.Containers {
			exit := "-"
			if c.State == "EXITED" {
				exit = fmt.Sprintf("%d/%s", c.ExitCode, c.Reason)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", s.Pod, short(s.ID), s.State, c.Name, c.Attempt, short(c.ID), c.State, exit, c.Command)
		}
	}
	_ = tw.Flush() // a failed write to the client has no one to report to
	fmt.Fprintf(w, "\n%s", ControlUsage)
}
