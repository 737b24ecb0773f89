package server

import (
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// switchable is a check that fails while its error is set.
type switchable struct{ err atomic.Pointer[error] }

func (c *switchable) check(*http.Request) error {
	if e := c.err.Load(); e != nil {
		return *e
	}
	return nil
}
func (c *switchable) fail(err error) { c.err.Store(&err) }
func (c *switchable) heal()          { c.err.Store(nil) }

// TestHealthzInUpstreamsFormat: "ok" while every check passes; a failing
// check is a 500 listing every check, its reason withheld, ending
// "healthz check failed"; ?verbose lists them when healthy; the check
// alone, at /healthz/<name>, says why.
func TestHealthzInUpstreamsFormat(t *testing.T) {
	syncloop, pleg := &switchable{}, &switchable{}
	s := newTestServer(t, Config{HealthChecks: []HealthCheck{{Name: "syncloop", Check: syncloop.check}, {Name: "pleg", Check: pleg.check}}})

	w := request(s, "GET", "/healthz")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "ok", w.Body.String())
	assert.Equal(t, "text/plain; charset=utf-8", w.Header().Get("Content-Type"))
	w = request(s, "GET", "/healthz?verbose")
	assert.Equal(t, "[+]ping ok\n[+]syncloop ok\n[+]pleg ok\nhealthz check passed\n", w.Body.String())
	for _, path := range []string{"/healthz/ping", "/healthz/syncloop", "/healthz/pleg"} {
		w = request(s, "GET", path)
		assert.Equal(t, http.StatusOK, w.Code, path)
		assert.Equal(t, "ok", w.Body.String(), path)
	}

	syncloop.fail(errors.New("sync Loop took longer than expected"))
	w = request(s, "GET", "/healthz")
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	assert.Equal(t, "[+]ping ok\n[-]syncloop failed: reason withheld\n[+]pleg ok\nhealthz check failed\n", w.Body.String())
	w = request(s, "GET", "/healthz?verbose")
	assert.Equal(t, http.StatusInternalServerError, w.Code, "verbose or not, a failure is a failure")
	w = request(s, "GET", "/healthz/syncloop")
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	assert.Equal(t, "internal server error: sync Loop took longer than expected\n", w.Body.String())
	w = request(s, "GET", "/healthz/pleg")
	assert.Equal(t, http.StatusOK, w.Code, "the other check alone is healthy")

	w = request(s, "GET", "/healthz?exclude=syncloop&exclude=nope&verbose")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "[+]ping ok\n[+]syncloop excluded: ok\n[+]pleg ok\n"+
		`warn: some health checks cannot be excluded: no matches for "nope"`+"\nhealthz check passed\n", w.Body.String())

	syncloop.heal()
	w = request(s, "GET", "/healthz")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "ok", w.Body.String())
	assert.Equal(t, http.StatusNotFound, request(s, "GET", "/healthz/nope").Code)
}

// TestHealthzWithoutChecksIsPing: the Config of before, "ok" from ping.
func TestHealthzWithoutChecksIsPing(t *testing.T) {
	s := newTestServer(t, Config{})
	assert.Equal(t, "ok", request(s, "GET", "/healthz").Body.String())
	assert.Equal(t, "[+]ping ok\nhealthz check passed\n", request(s, "GET", "/healthz?verbose").Body.String())
}

func TestNewServerRefusesHealthChecksItCannotServe(t *testing.T) {
	ok := func(*http.Request) error { return nil }
	for _, checks := range [][]HealthCheck{
		{{Name: "", Check: ok}},
		{{Name: "a/b", Check: ok}},
		{{Name: "syncloop"}},
		{{Name: "ping", Check: ok}},
		{{Name: "x", Check: ok}, {Name: "x", Check: ok}},
	} {
		_, err := NewServer(Config{NodeName: "n1", Pods: testManager(), Runtime: nothingRuntime{},
			Authenticator: allowAll{}, Authorizer: allowAll{}, HealthChecks: checks})
		require.Error(t, err, "%+v", checks)
	}
}
