package fleet

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Counter is an http.RoundTripper wrapper that counts every request the
// agents send and get an answer to (any status code), by verb and
// resource, and the bytes of the request bodies.
// It counts what leaves the process; the API server's own count
// (apiserver_request_total, see ParseServerCounts) is the cross-check.
type Counter struct {
	mu     sync.Mutex
	counts map[RequestKey]Count
}

// RequestKey names a kind of request the way the API server's metrics do:
// the HTTP verb (GET, PUT, PATCH, POST, DELETE; reads of a collection are
// counted as GET here, LIST by the API server), the resource and the
// subresource.
type RequestKey struct {
	Verb, Resource, Subresource string
}

func (k RequestKey) String() string {
	r := k.Resource
	if k.Subresource != "" {
		r += "/" + k.Subresource
	}
	return k.Verb + " " + r
}

// IsWrite reports whether the request changes something.
func (k RequestKey) IsWrite() bool {
	switch k.Verb {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// Count is how many requests of one kind, and their request-body bytes.
type Count struct {
	Requests  int64
	BodyBytes int64
}

// NewCounter returns an empty Counter.
func NewCounter() *Counter { return &Counter{counts: map[RequestKey]Count{}} }

// Wrap returns rt with every request counted; use it as rest.Config's
// WrapTransport.
func (c *Counter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return &countingRoundTripper{c: c, next: rt}
}

type countingRoundTripper struct {
	c    *Counter
	next http.RoundTripper
}

// WrappedRoundTripper lets client-go's utilnet.CloseIdleConnectionsFor
// reach the transport underneath.
func (rt *countingRoundTripper) WrappedRoundTripper() http.RoundTripper { return rt.next }

func (rt *countingRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	key := keyOf(req)
	var sent atomic.Int64
	n := req.ContentLength
	if n <= 0 && req.Body != nil && req.Body != http.NoBody {
		// Unknown length (0 with a body, or -1): count the bytes as they
		// are sent.
		req = req.Clone(req.Context())
		req.Body = &countingBody{ReadCloser: req.Body, n: &sent}
		n = 0
	}
	resp, err := rt.next.RoundTrip(req)
	if err != nil {
		// No answer (refused, timed out, cancelled): not counted, so that
		// the counts compare with the API server's, which counts what it
		// answered.
		return resp, err
	}
	rt.c.add(key, 1, max(n, 0)+sent.Load())
	return resp, nil
}

func (c *Counter) add(k RequestKey, requests, bytes int64) {
	c.mu.Lock()
	v := c.counts[k]
	v.Requests += requests
	v.BodyBytes += bytes
	c.counts[k] = v
	c.mu.Unlock()
}

// Snapshot returns a copy of the counts so far.
func (c *Counter) Snapshot() map[RequestKey]Count {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[RequestKey]Count, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// Totals sums a snapshot into writes, reads and written body bytes.
func Totals(s map[RequestKey]Count) (writes, reads, writeBytes int64) {
	for k, v := range s {
		if k.IsWrite() {
			writes += v.Requests
			writeBytes += v.BodyBytes
		} else {
			reads += v.Requests
		}
	}
	return writes, reads, writeBytes
}

// Sub returns a - b, key by key: the counts of a time window.
func Sub(a, b map[RequestKey]Count) map[RequestKey]Count {
	out := map[RequestKey]Count{}
	for k, v := range a {
		w := b[k]
		if d := (Count{Requests: v.Requests - w.Requests, BodyBytes: v.BodyBytes - w.BodyBytes}); d != (Count{}) {
			out[k] = d
		}
	}
	return out
}

// SortedKeys returns the keys of s, sorted, for stable output.
func SortedKeys(s map[RequestKey]Count) []RequestKey {
	keys := make([]RequestKey, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b RequestKey) int { return strings.Compare(a.String(), b.String()) })
	return keys
}

// keyOf reads verb, resource and subresource from an API path:
// /api/v1/nodes/<name>/status, /apis/<group>/<version>/namespaces/<ns>/leases/<name>.
func keyOf(req *http.Request) RequestKey {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return RequestKey{Verb: req.Method, Resource: req.URL.Path}
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	k := RequestKey{Verb: req.Method}
	if len(parts) > 0 {
		k.Resource = parts[0]
	}
	if len(parts) > 2 {
		k.Subresource = parts[2]
	}
	return k
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// FormatRates is one line for a window of d with the counts delta: writes
// per second (by kind), request-body bytes per second, reads per second.
func FormatRates(delta map[RequestKey]Count, d time.Duration) string {
	secs := d.Seconds()
	writes, reads, bytes := Totals(delta)
	var kinds []string
	for _, k := range SortedKeys(delta) {
		if k.IsWrite() {
			kinds = append(kinds, fmt.Sprintf("%s %.1f", k, float64(delta[k].Requests)/secs))
		}
	}
	return fmt.Sprintf("%.1f writes/s (%s), %.1f KiB/s written, %.1f reads/s",
		float64(writes)/secs, strings.Join(kinds, ", "), float64(bytes)/1024/secs, float64(reads)/secs)
}
