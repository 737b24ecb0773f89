// Command curl is the few curl options upstream's e2e specs use, for the
// offline agnhost image (upstream's is Alpine with curl; ours is busybox,
// which has none). The specs run, through kubectl exec or an exec hook:
//
//	curl http://IP:8080/echo?msg=poststart                   (lifecycle hooks)
//	curl -g -q -s 'http://IP:8080/dial?request=hostname&…'  (pod to pod)
//	curl -g -q -s --max-time 15 --connect-timeout 1 URL      (node to pod)
//	curl -g -q -s -o /dev/null -w %{http_code} URL
//	curl -i -q -s --connect-timeout 1 URL
//
// So: GET (or -X METHOD, -d DATA, -H HEADER), the body to stdout or -o
// FILE, -i the status line and headers first, -I only them (HEAD), -w with
// %{http_code}, -f fail (22) on a status of 400 and more, -L follow
// redirects, -k no certificate check, -s/-S/-g/-q accepted; the exit codes
// are curl's: 3 a malformed URL, 6 a host not resolved, 7 no connection,
// 22 with -f, 28 a time-out, 2 an option this curl does not know.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

type options struct {
	url, method, data, out, format string
	headers                        []string
	include, head, fail, follow    bool
	insecure, silent, showErrors   bool
	maxTime, connectTimeout        time.Duration
}

func main() {
	o, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "curl: %v\n", err)
		os.Exit(2)
	}
	os.Exit(run(o, os.Stdout, os.Stderr))
}

// parse reads curl's options: short ones may be grouped (-sIk), and a
// short option's value may follow it in the same word (-XPOST).
func parse(args []string) (options, error) {
	var o options
	value := func(i *int, name string) (string, error) {
		if *i+1 >= len(args) {
			return "", fmt.Errorf("option %s: requires parameter", name)
		}
		*i++
		return args[*i], nil
	}
	seconds := func(s string) (time.Duration, error) {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f < 0 {
			return 0, fmt.Errorf("expected a proper numerical parameter, got %q", s)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		var err error
		switch a {
		case "--silent":
			o.silent = true
		case "--show-error":
			o.showErrors = true
		case "--include":
			o.include = true
		case "--head":
			o.head = true
		case "--fail":
			o.fail = true
		case "--location":
			o.follow = true
		case "--insecure":
			o.insecure = true
		case "--globoff", "--disable":
		case "--output":
			o.out, err = value(&i, a)
		case "--write-out":
			o.format, err = value(&i, a)
		case "--request":
			o.method, err = value(&i, a)
		case "--data":
			o.data, err = value(&i, a)
		case "--header":
			var h string
			h, err = value(&i, a)
			o.headers = append(o.headers, h)
		case "--max-time", "--connect-timeout":
			var s string
			if s, err = value(&i, a); err == nil {
				var d time.Duration
				if d, err = seconds(s); err == nil {
					if a == "--max-time" {
						o.maxTime = d
					} else {
						o.connectTimeout = d
					}
				}
			}
		default:
			if !strings.HasPrefix(a, "-") || a == "-" {
				o.url = a
				continue
			}
			if strings.HasPrefix(a, "--") {
				return o, fmt.Errorf("option %s: is unknown to this curl (the offline agnhost image's)", a)
			}
			err = o.short(a[1:], &i, args, seconds)
		}
		if err != nil {
			return o, err
		}
	}
	if o.url == "" {
		return o, errors.New("no URL specified")
	}
	return o, nil
}

// short reads one word of grouped short options.
func (o *options) short(group string, i *int, args []string, seconds func(string) (time.Duration, error)) error {
	for j := 0; j < len(group); j++ {
		c := group[j]
		switch c {
		case 's':
			o.silent = true
		case 'S':
			o.showErrors = true
		case 'i':
			o.include = true
		case 'I':
			o.head = true
		case 'f':
			o.fail = true
		case 'L':
			o.follow = true
		case 'k':
			o.insecure = true
		case 'g', 'q', 'v':
		case 'o', 'w', 'X', 'd', 'H', 'm':
			v := group[j+1:]
			if v == "" {
				if *i+1 >= len(args) {
					return fmt.Errorf("option -%c: requires parameter", c)
				}
				*i++
				v = args[*i]
			}
			switch c {
			case 'o':
				o.out = v
			case 'w':
				o.format = v
			case 'X':
				o.method = v
			case 'd':
				o.data = v
			case 'H':
				o.headers = append(o.headers, v)
			case 'm':
				d, err := seconds(v)
				if err != nil {
					return err
				}
				o.maxTime = d
			}
			return nil
		default:
			return fmt.Errorf("option -%c: is unknown to this curl (the offline agnhost image's)", c)
		}
	}
	return nil
}

// run makes the request and writes what curl writes; it returns curl's
// exit code.
func run(o options, stdout, stderr io.Writer) int {
	fail := func(code int, format string, args ...any) int {
		if !o.silent || o.showErrors {
			fmt.Fprintf(stderr, "curl: (%d) "+format+"\n", append([]any{code}, args...)...)
		}
		return code
	}
	u := o.url
	if !strings.Contains(u, "://") {
		u = "http://" + u
	}
	parsed, err := url.Parse(u)
	if err != nil || parsed.Host == "" || (parsed.Scheme != "http" && parsed.Scheme != "https") {
		return fail(3, "URL using bad/illegal format or missing URL")
	}
	method := o.method
	switch {
	case method != "":
	case o.head:
		method = http.MethodHead
	case o.data != "":
		method = http.MethodPost
	default:
		method = http.MethodGet
	}
	ctx := context.Background()
	if o.maxTime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.maxTime)
		defer cancel()
	}
	var body io.Reader
	if o.data != "" {
		body = strings.NewReader(o.data)
	}
	req, err := http.NewRequestWithContext(ctx, method, parsed.String(), body)
	if err != nil {
		return fail(3, "%v", err)
	}
	req.Header.Set("User-Agent", "curl/8 (the offline agnhost image's)")
	req.Header.Set("Accept", "*/*")
	if o.data != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, h := range o.headers {
		k, v, ok := strings.Cut(h, ":")
		if !ok {
			continue
		}
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext:     (&net.Dialer{Timeout: o.connectTimeout}).DialContext,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: o.insecure},
		Proxy:           nil,
	}}
	if !o.follow {
		client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	resp, err := client.Do(req)
	if err != nil {
		return fail(errorCode(err), "%v", err)
	}
	defer resp.Body.Close()
	if o.fail && resp.StatusCode >= 400 {
		return fail(22, "The requested URL returned error: %d", resp.StatusCode)
	}
	out := stdout
	if o.out != "" && o.out != "-" {
		f, err := os.Create(o.out)
		if err != nil {
			return fail(23, "Failure writing output to destination: %v", err)
		}
		defer f.Close()
		out = f
	}
	if o.include || o.head {
		fmt.Fprintf(out, "%s %s\r\n", resp.Proto, resp.Status)
		_ = resp.Header.Write(out)
		fmt.Fprint(out, "\r\n")
	}
	if !o.head {
		if _, err := io.Copy(out, resp.Body); err != nil {
			return fail(errorCode(err), "%v", err)
		}
	}
	if o.format != "" {
		fmt.Fprint(stdout, strings.ReplaceAll(o.format, "%{http_code}", fmt.Sprintf("%03d", resp.StatusCode)))
	}
	return 0
}

// errorCode is curl's exit code for a failed request.
func errorCode(err error) int {
	var dns *net.DNSError
	var op *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded), os.IsTimeout(err):
		return 28
	case errors.As(err, &dns):
		return 6
	case errors.As(err, &op) && op.Op == "dial":
		return 7
	}
	return 56 // a failure receiving data
}
