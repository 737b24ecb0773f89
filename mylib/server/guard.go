package server

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// LoopbackOnly wraps h for a server without authentication that listens on
// loopback: listening on 127.0.0.1 keeps other machines out, but not a web
// page in the learner's own browser, which can reach 127.0.0.1 too. So it
// answers 403 Forbidden, with one line saying why, to:
//
//   - a Host header that is not localhost or a loopback address (with or
//     without a port): a DNS-rebinding page, whose name now resolves to
//     127.0.0.1, still sends its own name;
//   - an Origin header other than this server's own origin, and a
//     Sec-Fetch-Site header other than same-origin or none: a cross-site
//     request, such as a form on another site posting here.
//
// curl, kubectl and a browser tab opened on the server's own address pass.
// (Upstream's kubelet needs none of this: its server authenticates every
// request.)
func LoopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkLoopbackRequest(r); err != nil {
			httpError(w, http.StatusForbidden, "forbidden: "+err.Error())
			return
		}
		h.ServeHTTP(w, r)
	})
}

func checkLoopbackRequest(r *http.Request) error {
	if !isLoopbackHost(r.Host) {
		return fmt.Errorf("the Host header %q is not a loopback address; this server has no authentication and answers only requests to localhost, 127.0.0.1 or [::1]", r.Host)
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !strings.EqualFold(u.Host, r.Host) {
			return fmt.Errorf("cross-site request from Origin %q to %q; this server has no authentication and answers only its own pages, curl and kubectl", origin, r.Host)
		}
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return fmt.Errorf("cross-site request (Sec-Fetch-Site: %s); this server has no authentication and answers only its own pages, curl and kubectl", site)
	}
	return nil
}

// isLoopbackHost reports whether a Host header names this machine's
// loopback: localhost or an address in 127.0.0.0/8 or ::1, with an optional
// port.
func isLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
