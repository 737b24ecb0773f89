package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// curl runs the command line args against the test's server and returns
// its exit code, stdout and stderr.
func curl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	o, err := parse(args)
	if err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	var out, errOut bytes.Buffer
	code := run(o, &out, &errOut)
	return code, out.String(), errOut.String()
}

func server(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", r.Method, r.URL.Query().Get("msg"))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/post", func(w http.ResponseWriter, r *http.Request) {
		b := new(bytes.Buffer)
		_, _ = b.ReadFrom(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.Header.Get("X-Test"), b)
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// TestTheSpecsCommandLines: what upstream's e2e specs run, as they write it.
func TestTheSpecsCommandLines(t *testing.T) {
	s := server(t)
	host := strings.TrimPrefix(s.URL, "http://")

	if code, out, _ := curl(t, s.URL+"/echo?msg=poststart"); code != 0 || out != "GET poststart" {
		t.Errorf("the lifecycle hook's curl: %d %q, want 0 \"GET poststart\"", code, out)
	}
	if code, out, _ := curl(t, "-g", "-q", "-s", "--max-time", "15", "--connect-timeout", "1", "http://"+host+"/echo?msg=x"); code != 0 || out != "GET x" {
		t.Errorf("the node's curl: %d %q", code, out)
	}
	if code, out, _ := curl(t, "-g", "-q", "-s", "-o", "/dev/null", "-w", "%{http_code}", s.URL+"/nothing"); code != 0 || out != "404" {
		t.Errorf("-w %%{http_code} of a missing page: %d %q, want 0 \"404\"", code, out)
	}
	if code, out, _ := curl(t, "-i", "-q", "-s", "--connect-timeout", "1", s.URL+"/echo?msg=y"); code != 0 || !strings.HasPrefix(out, "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(out, "\r\n\r\nGET y") {
		t.Errorf("-i: %d %q, want the status line, the headers, then the body", code, out)
	}
	if code, out, _ := curl(t, "-sIk", s.URL+"/echo"); code != 0 || !strings.HasPrefix(out, "HTTP/1.1 200 OK") || strings.Contains(out, "HEAD") {
		t.Errorf("-sIk (grouped): %d %q, want the headers of a HEAD", code, out)
	}
	if code, out, _ := curl(t, "-XPUT", "-H", "X-Test: yes", "-d", "body", s.URL+"/post"); code != 0 || out != "PUT yes body" {
		t.Errorf("-XPUT -H -d: %d %q", code, out)
	}
	file := filepath.Join(t.TempDir(), "page")
	if code, _, _ := curl(t, "-s", "-o", file, s.URL+"/echo?msg=z"); code != 0 {
		t.Errorf("-o FILE: exit %d", code)
	} else if b, _ := os.ReadFile(file); string(b) != "GET z" {
		t.Errorf("-o FILE wrote %q", b)
	}
}

// TestCurlsExitCodes: a spec tells a failure by curl's exit code.
func TestCurlsExitCodes(t *testing.T) {
	s := server(t)
	if code, _, _ := curl(t, "-sf", s.URL+"/nothing"); code != 22 {
		t.Errorf("-f on 404: exit %d, want 22", code)
	}
	if code, _, errOut := curl(t, "-m", "0.3", s.URL+"/slow"); code != 28 || !strings.Contains(errOut, "curl: (28)") {
		t.Errorf("-m 0.3 on a slow page: exit %d %q, want 28", code, errOut)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	if code, _, errOut := curl(t, "-s", "http://"+addr+"/"); code != 7 || errOut != "" {
		t.Errorf("a closed port, silent: exit %d %q, want 7 and nothing said", code, errOut)
	}
	if code, _, _ := curl(t, "ftp://127.0.0.1/"); code != 3 {
		t.Errorf("ftp://: exit %d, want 3", code)
	}
	for _, args := range [][]string{{"--proxy", "x", "http://h/"}, {"-Z", "http://h/"}, {"-s"}, {"-o"}} {
		if _, err := parse(args); err == nil {
			t.Errorf("parse %q: no error, want one (curl's exit code 2)", args)
		}
	}
}
