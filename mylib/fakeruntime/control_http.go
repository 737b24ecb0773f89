package fakeruntime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"mykubelet/mylib/statedir"
)

// ControlUsage lists the control API's requests.
const ControlUsage = `Control API (answers are text; errors are 4xx with the reason; a unix socket only you can reach):
  GET  /                                                       this listing
  POST /pods/{namespace}/{name}/{kill|remove}                  the pod's newest sandbox and its containers
  POST /pods/{namespace}/{name}/containers/{container}/{kill|stop|remove|exec|fail|recover}
  POST /containers/{id}/{kill|stop|remove|exec|fail|recover}   id: full ID or a unique prefix
  POST /sandboxes/{id}/{kill|remove}
  kill: SIGKILL (exit 137); stop?timeout=10: SIGTERM, then SIGKILL after the timeout (seconds);
  exec?cmd=SCRIPT: run a shell command in the container (as ExecSync) and print its output;
  fail, recover: its servers' probe targets fail (HTTP 500, TCP refused, gRPC NOT_SERVING), then answer again
  curl: curl -s --unix-socket SOCKET http://localhost/ (add -X POST for the actions)
`

// NewControlHandler returns the HTTP control API of r: it lists the
// runtime's state and kills, stops, removes or execs in containers and
// sandboxes by ID or by pod name (see ControlUsage).
//
// Serve it on ListenControl's unix socket: the socket's file mode, and the
// peer credentials the kernel gives with each connection, are its
// authentication. As a defence against web pages the user visits (a
// cross-site form POST, DNS rebinding, should the socket ever be bridged
// to TCP), it also refuses (403) a request whose Host is not a loopback
// name or address, or that carries an Origin other than its own.
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
	return sameOriginOnly(mux)
}

// sameOriginOnly refuses requests that a browser sends on behalf of
// another site, as the kubelet server's guard does (mylib/server,
// LoopbackOnly): a Host that is not loopback (DNS rebinding), an Origin
// that is not this very Host (a cross-site or same-site POST: another port
// of localhost is another site's page), a Sec-Fetch-Site other than
// same-origin or none.
func sameOriginOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !isLoopbackHost(req.Host) {
			http.Error(w, fmt.Sprintf("forbidden: Host %q is not a loopback address; the control API answers only requests to localhost or 127.0.0.1", req.Host), http.StatusForbidden)
			return
		}
		if origin := req.Header.Get("Origin"); origin != "" {
			u, err := url.Parse(origin)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !strings.EqualFold(u.Host, req.Host) {
				http.Error(w, fmt.Sprintf("forbidden: cross-site request from Origin %q to %q", origin, req.Host), http.StatusForbidden)
				return
			}
		}
		switch site := req.Header.Get("Sec-Fetch-Site"); site {
		case "", "same-origin", "none":
		default:
			http.Error(w, fmt.Sprintf("forbidden: cross-site request (Sec-Fetch-Site: %s)", site), http.StatusForbidden)
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

// ListenControl listens for the control API on a unix socket at path
// (statedir.RuntimeControlSocket in the state directory, by default). Only
// the user who started the runtime may use it, as only they may read their
// ~/.ssh: the socket's directory must be mode 0700 (it is created so), the
// socket is made mode 0600, and a connection from a process of any other
// user (the kernel tells, SO_PEERCRED) is closed unanswered. curl reaches
// it with --unix-socket PATH http://localhost/.
func ListenControl(path string) (net.Listener, error) {
	if path == "" {
		return nil, errors.New("control socket: no path")
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("control socket %s: its directory %s is mode %04o, open to other users; it must be 0700 (chmod 700 %s), or choose another --control-address", path, dir, perm, dir)
	}
	lis, err := listenUnix("control socket", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		lis.Close()
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	return &sameUserListener{UnixListener: lis, uid: uint32(os.Geteuid())}, nil
}

// sameUserListener accepts only connections from processes whose
// effective user is uid.
type sameUserListener struct {
	*net.UnixListener
	uid uint32
}

// Accept returns the next connection of the listener's own user; others
// are closed (and logged) as they come.
func (l *sameUserListener) Accept() (net.Conn, error) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		uid, err := peerUID(c)
		if err == nil && uid == l.uid {
			return c, nil
		}
		c.Close()
		if err != nil {
			klog.ErrorS(err, "Control API: closed a connection whose user is unknown")
			continue
		}
		klog.InfoS("Control API: closed a connection from another user; only the user who started the runtime may use it", "uid", uid, "want", l.uid)
	}
}

// peerUID returns the effective user ID of the process that connected c,
// as the kernel recorded it at connect (SO_PEERCRED).
func peerUID(c *net.UnixConn) (uint32, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	return cred.Uid, nil
}

// ControlFlag is the --control-address flag of the programs that serve the
// mock runtime: the control API's socket path. Unset, it is the state
// directory's statedir.RuntimeControlSocket; set to "", there is none.
type ControlFlag struct {
	path string
	set  bool
}

func (f *ControlFlag) String() string     { return f.path }
func (f *ControlFlag) Set(s string) error { f.path, f.set = s, true; return nil }

// ControlFlagUsage is the flag's help text.
const ControlFlagUsage = "unix socket of the mock runtime's HTTP control API, only your user can reach it (default: <state-dir>/" + statedir.RuntimeControlSocket + `; "" for none)`

// Path returns the socket's path ("" for none) for the state directory
// stateDir.
func (f *ControlFlag) Path(stateDir string) string {
	if f.set {
		return f.path
	}
	return statedir.Path(stateDir, statedir.RuntimeControlSocket)
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
