package fleet

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type okTransport struct{ bodies []int }

func (t *okTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	n := 0
	if req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		n = len(b)
	}
	t.bodies = append(t.bodies, n)
	return &http.Response{StatusCode: 200, Body: io.NopCloser(bytes.NewReader(nil))}, nil
}

func TestCounterCountsByVerbResourceAndBodyBytes(t *testing.T) {
	c := NewCounter()
	next := &okTransport{}
	rt := c.Wrap(next)
	do := func(method, url string, body []byte, knownLength bool) {
		var r io.Reader
		if body != nil {
			r = bytes.NewReader(body)
			if !knownLength {
				r = io.MultiReader(r) // hides the length from http.NewRequest
			}
		}
		req, err := http.NewRequest(method, url, r)
		require.NoError(t, err)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	do("PUT", "https://127.0.0.1:6443/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", make([]byte, 100), true)
	do("PUT", "https://127.0.0.1:6443/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n2", make([]byte, 50), false)
	do("PATCH", "https://127.0.0.1:6443/api/v1/nodes/n1/status", make([]byte, 7), true)
	do("GET", "https://127.0.0.1:6443/api/v1/nodes/n1", nil, true)
	do("POST", "https://127.0.0.1:6443/api/v1/nodes", make([]byte, 3), true)

	assert.Equal(t, map[RequestKey]Count{
		{Verb: "PUT", Resource: "leases"}:                         {Requests: 2, BodyBytes: 150},
		{Verb: "PATCH", Resource: "nodes", Subresource: "status"}: {Requests: 1, BodyBytes: 7},
		{Verb: "GET", Resource: "nodes"}:                          {Requests: 1},
		{Verb: "POST", Resource: "nodes"}:                         {Requests: 1, BodyBytes: 3},
	}, c.Snapshot())
	assert.Equal(t, []int{100, 50, 7, 0, 3}, next.bodies, "the requests go through unchanged")
	writes, reads, bytes := Totals(c.Snapshot())
	assert.Equal(t, []int64{4, 1, 160}, []int64{writes, reads, bytes})
	assert.Equal(t, "0.4 writes/s (PATCH nodes/status 0.1, POST nodes 0.1, PUT leases 0.2), 0.0 KiB/s written, 0.1 reads/s",
		FormatRates(c.Snapshot(), 10*time.Second))
}

func TestParseServerCounts(t *testing.T) {
	text := `# HELP apiserver_request_total ...
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 12
apiserver_request_total{code="409",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="status",verb="PATCH",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="cluster",subresource="",verb="LIST",version="v1"} 2
apiserver_request_body_size_bytes_sum{group="coordination.k8s.io",resource="leases",verb="update"} 2040
apiserver_request_body_size_bytes_count{group="coordination.k8s.io",resource="leases",verb="update"} 13
`
	assert.Equal(t, ServerCounts{
		{Verb: "PUT", Resource: "leases"}:                         {Requests: 13, BodyBytes: 2040},
		{Verb: "PATCH", Resource: "nodes", Subresource: "status"}: {Requests: 5},
		{Verb: "GET", Resource: "nodes"}:                          {Requests: 2},
	}, ParseServerCounts(text))
}
