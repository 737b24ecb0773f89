package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Paths of the optional endpoints (upstream's server.go names them the
// same; /metrics and /stats/ are in auth.go).
const (
	summaryPath         = "/stats/summary"
	resourceMetricsPath = "/metrics/resource"
	proberMetricsPath   = "/metrics/probes"
)

// CPUAndMemorySummaryProvider is a SummaryProvider that can also build the
// cheaper summary of CPU and memory only (upstream's
// GetCPUAndMemoryStats, stats.Provider has it), for
// /stats/summary?only_cpu_and_memory=true. A SummaryProvider without it
// has its whole summary cut down instead.
type CPUAndMemorySummaryProvider interface {
	SummaryProvider
	GetCPUAndMemoryStats(ctx context.Context) (*statsapi.Summary, error)
}

// installOptional serves the endpoints of cfg's optional fields that are
// set; the mux answers 404 for the others.
func (s *Server) installOptional() {
	if s.cfg.Summary != nil {
		// GET and POST, as upstream's stats.CreateHandlers (POST is
		// authorized as verb create).
		s.mux.HandleFunc("GET "+summaryPath, s.getSummary)
		s.mux.HandleFunc("POST "+summaryPath, s.getSummary)
	}
	for path, h := range map[string]http.Handler{metricsPath: s.cfg.Metrics,
		resourceMetricsPath: s.cfg.ResourceMetrics, proberMetricsPath: s.cfg.ProbeMetrics} {
		if h != nil {
			s.mux.Handle("GET "+path, h)
		}
	}
	if s.cfg.Configz != nil {
		s.mux.HandleFunc("GET "+configzPath, s.getConfigz)
	}
}

// getSummary is upstream's handleSummary: the whole summary, from the
// provider's cached figures (updateStats false: a scrape does not force a
// fresh read), or CPU and memory only with only_cpu_and_memory=true;
// an error is a 500 "Internal Error: …".
func (s *Server) getSummary(w http.ResponseWriter, r *http.Request) {
	var (
		summary *statsapi.Summary
		err     error
	)
	if onlyCPUAndMemory(r) {
		if p, ok := s.cfg.Summary.(CPUAndMemorySummaryProvider); ok {
			summary, err = p.GetCPUAndMemoryStats(r.Context())
		} else if summary, err = s.cfg.Summary.Get(r.Context(), false); err == nil {
			summary = cpuAndMemoryOnly(summary)
		}
	} else {
		summary, err = s.cfg.Summary.Get(r.Context(), false)
	}
	if err != nil {
		msg := fmt.Sprintf("Internal Error: %v", err)
		klog.ErrorS(err, "HTTP InternalServerError serving", "path", summaryPath)
		http.Error(w, msg, http.StatusInternalServerError)
		return
	}
	writeJSON(w, summary)
}

// onlyCPUAndMemory is upstream's reading of the parameter: in the query
// or a POST's form, exactly once, exactly "true".
func onlyCPUAndMemory(r *http.Request) bool {
	if err := r.ParseForm(); err != nil {
		return false
	}
	v, ok := r.Form["only_cpu_and_memory"]
	return ok && len(v) == 1 && v[0] == "true"
}

// cpuAndMemoryOnly is s with what upstream's GetCPUAndMemoryStats fills
// and nothing more: names, start times, CPU, memory and swap of the node,
// its system containers, the pods and their containers.
func cpuAndMemoryOnly(s *statsapi.Summary) *statsapi.Summary {
	if s == nil {
		return nil
	}
	trim := func(cs []statsapi.ContainerStats) []statsapi.ContainerStats {
		out := make([]statsapi.ContainerStats, 0, len(cs))
		for _, c := range cs {
			out = append(out, statsapi.ContainerStats{Name: c.Name, StartTime: c.StartTime, CPU: c.CPU, Memory: c.Memory, Swap: c.Swap})
		}
		return out
	}
	n := s.Node
	out := &statsapi.Summary{Node: statsapi.NodeStats{NodeName: n.NodeName, StartTime: n.StartTime,
		CPU: n.CPU, Memory: n.Memory, Swap: n.Swap}, Pods: make([]statsapi.PodStats, 0, len(s.Pods))}
	if len(n.SystemContainers) > 0 {
		out.Node.SystemContainers = trim(n.SystemContainers)
	}
	for _, p := range s.Pods {
		out.Pods = append(out.Pods, statsapi.PodStats{PodRef: p.PodRef, StartTime: p.StartTime,
			Containers: trim(p.Containers), CPU: p.CPU, Memory: p.Memory, Swap: p.Swap})
	}
	return out
}

// getConfigz is component-base's configz handler with one section,
// "kubeletconfig", as the kubelet registers it: the configuration it runs
// with, in JSON.
func (s *Server) getConfigz(w http.ResponseWriter, _ *http.Request) {
	b, err := json.Marshal(map[string]any{"kubeletconfig": s.cfg.Configz()})
	if err != nil {
		http.Error(w, fmt.Sprintf("error marshaling json: %v", err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(b) // an error here is the client gone
}
