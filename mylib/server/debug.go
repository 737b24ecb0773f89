// The debug server: /pods shows the pod manager's pods (upstream's kubelet
// serves the same path, pkg/kubelet/server/server.go), as JSON for programs
// and as an HTML table for a browser; Handle adds more, such as
// /podcache/<uid> to push a pod status into the pod cache by hand.
//
// Bind it to 127.0.0.1 (ListenLoopback): it has no authentication. It
// answers 403 to requests that name another host or come from another site
// (LoopbackOnly), so that a web page cannot use the learner's browser to
// reach it.

package server

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"mykubelet/mylib/kubetypes"
	kubepod "mykubelet/mylib/pod"
)

// DebugServer is the http.Handler of the kubelet's read-only debug
// endpoints. Upstream's type is server.Server, which also serves the
// authenticated API on port 10250 (exec, logs, metrics); this one serves
// only what a learner reads on loopback, so it is named for that and keeps
// upstream's paths (/pods).
type DebugServer struct {
	pods kubepod.Manager
	mux  *http.ServeMux
}

// NewDebugServer serves the pods of pm.
func NewDebugServer(pm kubepod.Manager) *DebugServer {
	s := &DebugServer{pods: pm, mux: http.NewServeMux()}
	s.mux.HandleFunc("/pods", s.getPods)
	s.mux.HandleFunc("/pods/{namespace}/{name}", s.getPod)
	return s
}

// Handle adds a handler (e.g. PodCachePattern, /podcache/).
func (s *DebugServer) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// ServeHTTP answers 403 to a request for another host or from another site
// (see LoopbackOnly), 404 for unknown paths and 405 for methods other than
// GET and HEAD (except on paths registered with Handle, which decide).
func (s *DebugServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := checkLoopbackRequest(r); err != nil {
		httpError(w, http.StatusForbidden, "forbidden: "+err.Error())
		return
	}
	_, pattern := s.mux.Handler(r)
	if pattern == "" {
		httpError(w, http.StatusNotFound, fmt.Sprintf("no such page %q: try /pods or /pods/<namespace>/<name>", r.URL.Path))
		return
	}
	if strings.HasPrefix(pattern, "/pods") && r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		httpError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s: use GET", r.Method, r.URL.Path))
		return
	}
	s.mux.ServeHTTP(w, r) // the mux, not h, so that r.PathValue works
}

// row is one line of the HTML table.
type row struct {
	Namespace, Name, UID, Source, Phase, MirrorUID string
	Link                                           string
}

func (s *DebugServer) rows() []row {
	var rows []row
	for _, p := range s.pods.GetPods() {
		r := row{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), Phase: string(p.Status.Phase),
			Link: "/pods/" + p.Namespace + "/" + p.Name}
		r.Source, _ = kubetypes.GetPodSource(p)
		if m, ok := s.pods.GetMirrorPodByPod(p); ok {
			r.MirrorUID = string(m.UID)
		}
		rows = append(rows, r)
	}
	return rows
}

func (s *DebugServer) getPods(w http.ResponseWriter, r *http.Request) {
	format, err := negotiate(r)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	if format == "html" {
		writeHTML(w, podsPage, map[string]any{"Rows": s.rows()})
		return
	}
	list := v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: []v1.Pod{}}
	for _, p := range s.pods.GetPods() {
		list.Items = append(list.Items, *p)
	}
	writeJSON(w, list)
}

func (s *DebugServer) getPod(w http.ResponseWriter, r *http.Request) {
	format, err := negotiate(r)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	p, ok := s.pods.GetPodByName(ns, name)
	if !ok {
		httpError(w, http.StatusNotFound, fmt.Sprintf("pod %s/%s is not known to the pod manager", ns, name))
		return
	}
	pod := p.DeepCopy()
	pod.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	if format == "html" {
		b, _ := json.MarshalIndent(pod, "", "  ") // a Pod always marshals
		mirror := ""
		if m, ok := s.pods.GetMirrorPodByPod(p); ok {
			mirror = string(m.UID)
		}
		writeHTML(w, podPage, map[string]any{"Pod": pod, "MirrorUID": mirror, "JSON": string(b)})
		return
	}
	writeJSON(w, pod)
}

// negotiate picks "json" or "html": ?format= wins, then an Accept header
// asking for text/html (a browser), else JSON.
func negotiate(r *http.Request) (string, error) {
	switch f := r.URL.Query().Get("format"); f {
	case "json", "html":
		return f, nil
	case "":
	default:
		return "", fmt.Errorf("unknown format %q: use ?format=json or ?format=html", f)
	}
	if strings.Contains(r.Header.Get("Accept"), "text/html") {
		return "html", nil
	}
	return "json", nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		klog.V(2).InfoS("Writing a debug response failed", "err", err) // the client went away
	}
}

func writeHTML(w http.ResponseWriter, t *template.Template, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := t.Execute(w, data); err != nil {
		klog.V(2).InfoS("Writing a debug page failed", "err", err) // the client went away
	}
}

// httpError writes one line of plain text.
func httpError(w http.ResponseWriter, code int, msg string) {
	http.Error(w, msg, code)
}

var podsPage = template.Must(template.New("pods").Parse(`<!doctype html>
<html><head><title>mykubelet: pods</title>
<style>body{font-family:sans-serif} td,th{padding:2px 10px;text-align:left} tr:nth-child(even){background:#eee}</style></head>
<body><h1>Pods in the pod manager</h1>
<table><tr><th>NAMESPACE</th><th>NAME</th><th>UID</th><th>SOURCE</th><th>PHASE</th><th>MIRROR POD UID</th></tr>
{{range .Rows}}<tr><td>{{.Namespace}}</td><td><a href="{{.Link}}">{{.Name}}</a></td><td>{{.UID}}</td><td>{{.Source}}</td><td>{{.Phase}}</td><td>{{.MirrorUID}}</td></tr>
{{else}}<tr><td colspan="6">no pods</td></tr>
{{end}}</table>
<p>As JSON: <a href="/pods?format=json">/pods?format=json</a></p></body></html>
`))

var podPage = template.Must(template.New("pod").Parse(`<!doctype html>
<html><head><title>mykubelet: {{.Pod.Namespace}}/{{.Pod.Name}}</title></head>
<body><h1>{{.Pod.Namespace}}/{{.Pod.Name}}</h1>
<p>UID {{.Pod.UID}}{{if .MirrorUID}}, mirror pod UID {{.MirrorUID}}{{end}}. <a href="/pods">all pods</a></p>
<pre>{{.JSON}}</pre></body></html>
`))
