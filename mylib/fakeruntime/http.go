package fakeruntime

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"text/tabwriter"
)

// ControlUsage lists the control API's requests.
const ControlUsage = `Control API (answers are one line of text; errors are 4xx with the reason):
  GET  /                                                       this listing
  POST /pods/{namespace}/{name}/{kill|start|remove}            the pod's newest sandbox and its containers
  POST /pods/{namespace}/{name}/containers/{container}/{kill|start|remove|script}
  POST /containers/{id}/{kill|start|remove|script}             id: full ID or a unique prefix
  POST /sandboxes/{id}/{kill|start|remove}
  script takes query parameters exit-after=5s, exit-code=1, restart-after=2s, ignore-sigterm=true
`

// NewControlHandler returns the HTTP control API of r: it lists the
// runtime's state and kills, starts, removes or scripts containers and
// sandboxes by ID or by pod name (see ControlUsage). Serve it on a loopback
// address: it has no authentication.
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
		ref, err := r.SandboxAction(req.PathValue("id"), Action(req.PathValue("action")))
		h.answer(w, req, ref, err)
	})
	mux.HandleFunc("POST /pods/{namespace}/{name}/{action}", func(w http.ResponseWriter, req *http.Request) {
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
	return mux
}

type controlHandler struct{ rt *Runtime }

func (h *controlHandler) container(w http.ResponseWriter, req *http.Request, id string) {
	action := req.PathValue("action")
	if action == "script" {
		s, err := ScriptFromQuery(req.URL.Query())
		if err != nil {
			writeError(w, err)
			return
		}
		ref, err := h.rt.SetScript(id, s)
		if err == nil {
			fmt.Fprintf(w, "scripted %s: %s\n", ref, s)
			return
		}
		writeError(w, err)
		return
	}
	if len(req.URL.Query()) > 0 {
		writeError(w, fmt.Errorf("%w: %s takes no query parameters", ErrBadRequest, action))
		return
	}
	ref, err := h.rt.ContainerAction(id, Action(action))
	h.answer(w, req, ref, err)
}

// past is the past tense of the actions, for answers.
var past = map[string]string{"kill": "killed", "start": "started", "remove": "removed"}

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
	}
	http.Error(w, err.Error(), code)
}

func (h *controlHandler) list(w http.ResponseWriter, _ *http.Request) {
	snap := h.rt.Snapshot()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tSANDBOX\tSTATE\tCONTAINER\tID\tSTATE\tEXIT\tRESTARTS\tSCRIPT")
	for _, s := range snap.Sandboxes {
		if len(s.Containers) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t\t\t\t\t\n", s.Pod, short(s.ID), s.State)
		}
		for _, c := range s.Containers {
			exit := "-"
			if c.State == "EXITED" {
				exit = fmt.Sprintf("%d %s", c.ExitCode, c.Reason)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", s.Pod, short(s.ID), s.State, c.Name, short(c.ID), c.State, strings.ReplaceAll(exit, " ", "/"), c.Restarts, c.Script)
		}
	}
	_ = tw.Flush() // a failed write to the client has no one to report to
	fmt.Fprintf(w, "\n%s", ControlUsage)
}
