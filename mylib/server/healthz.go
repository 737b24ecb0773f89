package server

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"k8s.io/klog/v2"
)

// pingCheck is upstream's healthz.PingHealthz: always healthy, always first.
var pingCheck = HealthCheck{Name: "ping", Check: func(*http.Request) error { return nil }}

// checkHealthChecks refuses checks /healthz could not serve: a check needs
// a name of one path segment, its function, and a name of its own.
func checkHealthChecks(checks []HealthCheck) error {
	seen := map[string]bool{pingCheck.Name: true}
	for _, c := range checks {
		if c.Name == "" || strings.Contains(c.Name, "/") || c.Check == nil {
			return fmt.Errorf("server: health check %q needs a name without '/' and a Check", c.Name)
		}
		if seen[c.Name] {
			return fmt.Errorf("server: health check %q is named twice (%q is built in)", c.Name, pingCheck.Name)
		}
		seen[c.Name] = true
	}
	return nil
}

// installHealthz serves /healthz as upstream's healthz.InstallHandler does:
// every check at /healthz, and each alone at /healthz/<name>.
func installHealthz(mux *http.ServeMux, checks []HealthCheck) {
	all := append([]HealthCheck{pingCheck}, checks...)
	mux.Handle("GET "+healthzPath, handleRootHealth("healthz", all))
	for _, c := range all {
		mux.Handle("GET "+healthzPath+"/"+c.Name, handleOneCheck(c.Check))
	}
}

// handleRootHealth runs every check in order, in upstream's format. All
// pass: 200 "ok", or with ?verbose a line per check and "healthz check
// passed". One fails: 500, a line per check, the failing ones with
// "failed: reason withheld" (the reason goes to the log only: /healthz is
// often open to many), and "healthz check failed". ?exclude=<name> skips
// a check.
func handleRootHealth(name string, checks []HealthCheck) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		excluded := r.URL.Query()["exclude"]
		var out, reasons strings.Builder
		var failed []string
		for _, c := range checks {
			if i := slices.Index(excluded, c.Name); i >= 0 {
				excluded = slices.Delete(excluded, i, i+1)
				fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.Name)
				continue
			}
			if err := c.Check(r); err != nil {
				fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.Name)
				fmt.Fprintf(&reasons, "[-]%s failed: %v\n", c.Name, err)
				failed = append(failed, c.Name)
				continue
			}
			fmt.Fprintf(&out, "[+]%s ok\n", c.Name)
		}
		if len(excluded) > 0 {
			quoted := make([]string, len(excluded))
			for i, e := range excluded {
				quoted[i] = fmt.Sprintf("%q", e)
			}
			fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(quoted, ","))
		}
		if len(failed) > 0 {
			klog.V(2).InfoS("Health check failed", "path", r.URL.Path, "checks", failed, "reasons", reasons.String())
			http.Error(w, out.String()+name+" check failed", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if _, verbose := r.URL.Query()["verbose"]; !verbose {
			fmt.Fprint(w, "ok")
			return
		}
		fmt.Fprintf(w, "%s%s check passed\n", out.String(), name)
	}
}

// handleOneCheck is upstream's adaptCheckToHandler: /healthz/<name> does
// say why it fails.
func handleOneCheck(check func(*http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := check(r); err != nil {
			http.Error(w, fmt.Sprintf("internal server error: %v", err), http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "ok")
	}
}
