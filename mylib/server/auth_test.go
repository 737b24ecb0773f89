package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGetRequestAttributesAsUpstream: the table of upstream's
// GetRequestAttributes comment, with KubeletFineGrainedAuthz (GA in v1.36).
func TestGetRequestAttributesAsUpstream(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		verb         string
		subresources []string
	}{
		{"GET", "/stats/summary", "get", []string{"stats"}},
		{"GET", "/stats", "get", []string{"stats"}},
		{"GET", "/metrics", "get", []string{"metrics"}},
		{"GET", "/metrics/cadvisor", "get", []string{"metrics"}},
		{"GET", "/logs/", "get", []string{"log"}},
		{"GET", "/logs/syslog", "get", []string{"log"}},
		{"POST", "/checkpoint/ns/pod/c", "create", []string{"checkpoint"}},
		{"GET", "/statusz", "get", []string{"statusz"}},
		{"GET", "/flagz", "get", []string{"configz"}},
		{"GET", "/pods", "get", []string{"pods", "proxy"}},
		{"GET", "/pods/", "get", []string{"pods", "proxy"}},
		{"GET", "/runningpods/", "get", []string{"pods", "proxy"}},
		{"GET", "/healthz", "get", []string{"healthz", "proxy"}},
		{"GET", "/healthz/ping", "get", []string{"healthz", "proxy"}},
		{"GET", "/configz", "get", []string{"configz", "proxy"}},
		{"GET", "/containerLogs/default/hello/hello", "get", []string{"proxy"}},
		{"POST", "/exec/default/hello/hello", "create", []string{"proxy"}},
		{"GET", "/exec/default/hello/hello", "get", []string{"proxy"}},
		{"POST", "/attach/default/hello/hello", "create", []string{"proxy"}},
		{"POST", "/portForward/default/hello", "create", []string{"proxy"}},
		{"PUT", "/x", "update", []string{"proxy"}},
		{"PATCH", "/x", "patch", []string{"proxy"}},
		{"DELETE", "/x", "delete", []string{"proxy"}},
		{"GET", "/podsmore", "get", []string{"proxy"}}, // not a subpath of /pods
		{"GET", "/statsfoo", "get", []string{"proxy"}}, // nor of /stats/
		{"GET", "/logsfoo", "get", []string{"proxy"}},  // nor of /logs/
		{"GET", "/healthzz", "get", []string{"proxy"}}, // nor of /healthz
		{"GET", "/metricsx", "get", []string{"proxy"}}, // nor of /metrics
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		attrs := GetRequestAttributes("n1", User{Name: "u"}, r)
		var subs []string
		for _, a := range attrs {
			subs = append(subs, a.Subresource)
			assert.Equal(t, tc.verb, a.Verb, "%s %s", tc.method, tc.path)
			assert.Equal(t, "n1", a.NodeName)
			assert.Equal(t, tc.path, a.Path)
		}
		assert.Equal(t, tc.subresources, subs, "%s %s", tc.method, tc.path)
	}
}

type fakeAuthn struct {
	u   User
	ok  bool
	err error
}

func (f fakeAuthn) AuthenticateRequest(*http.Request) (User, bool, error) { return f.u, f.ok, f.err }

// fakeAuthz allows the listed subresources and records what it was asked.
type fakeAuthz struct {
	allow map[string]bool
	asked *[]string
}

func (f fakeAuthz) Authorize(_ context.Context, a Attributes) (bool, string, error) {
	*f.asked = append(*f.asked, a.Verb+" nodes/"+a.Subresource+" "+a.NodeName)
	return f.allow[a.Subresource], "", nil
}

func TestWithAuth401And403AndTheFirstAllowedSubresource(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("served")) })
	var asked []string
	serve := func(authn Authenticator, allow map[string]bool, method, path string) *httptest.ResponseRecorder {
		asked = nil
		rec := httptest.NewRecorder()
		WithAuth("n1", authn, fakeAuthz{allow: allow, asked: &asked}, ok).ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec
	}

	rec := serve(fakeAuthn{}, nil, "GET", "/pods")
	assert.Equal(t, http.StatusUnauthorized, rec.Code)
	assert.Equal(t, "Unauthorized\n", rec.Body.String())
	assert.Empty(t, asked, "nobody: nothing to authorize")

	rec = serve(fakeAuthn{err: assert.AnError}, nil, "GET", "/pods")
	assert.Equal(t, http.StatusUnauthorized, rec.Code, "an authentication error is a 401 too")

	alice := fakeAuthn{u: User{Name: "alice"}, ok: true}
	rec = serve(alice, nil, "GET", "/pods")
	assert.Equal(t, http.StatusForbidden, rec.Code)
	assert.Equal(t, "Forbidden (user=alice, verb=get, resource=nodes, subresource(s)=[pods proxy])\n", rec.Body.String())
	assert.Equal(t, []string{"get nodes/pods n1", "get nodes/proxy n1"}, asked)

	rec = serve(alice, map[string]bool{"proxy": true}, "GET", "/pods")
	assert.Equal(t, http.StatusOK, rec.Code, "nodes/proxy allows everything")
	assert.Equal(t, "served", rec.Body.String())

	rec = serve(alice, map[string]bool{"pods": true}, "GET", "/pods")
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, []string{"get nodes/pods n1"}, asked, "the first allowed wins")

	rec = serve(alice, map[string]bool{"pods": true}, "POST", "/exec/default/p/c")
	assert.Equal(t, http.StatusForbidden, rec.Code, "nodes/pods does not allow exec")
	assert.Equal(t, "Forbidden (user=alice, verb=create, resource=nodes, subresource(s)=[proxy])\n", rec.Body.String())
}

// TestX509AuthenticatorTrustsOnlyItsCA: CN is the user, O the groups; a
// certificate of another CA, or one for servers only, is nobody.
func TestX509AuthenticatorTrustsOnlyItsCA(t *testing.T) {
	ca, caKey := testCA(t, "cluster-ca")
	other, otherKey := testCA(t, "other-ca")
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	a := X509Authenticator{Roots: roots}

	req := func(c *x509.Certificate) *http.Request {
		r := httptest.NewRequest("GET", "/pods", nil)
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}}
		return r
	}
	u, ok, err := a.AuthenticateRequest(req(testLeaf(t, ca, caKey, "kube-apiserver-kubelet-client", []string{"system:masters"}, x509.ExtKeyUsageClientAuth)))
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, User{Name: "kube-apiserver-kubelet-client", Groups: []string{"system:masters"}}, u)

	_, ok, err = a.AuthenticateRequest(req(testLeaf(t, other, otherKey, "mallory", []string{"system:masters"}, x509.ExtKeyUsageClientAuth)))
	assert.False(t, ok)
	assert.Error(t, err, "another CA")

	_, ok, err = a.AuthenticateRequest(req(testLeaf(t, ca, caKey, "server", nil, x509.ExtKeyUsageServerAuth)))
	assert.False(t, ok)
	assert.Error(t, err, "a serving certificate is not a client certificate")

	_, ok, err = a.AuthenticateRequest(httptest.NewRequest("GET", "/pods", nil))
	assert.False(t, ok)
	assert.NoError(t, err, "no certificate: not this authenticator's request")
}

func testCA(t *testing.T, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	c, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return c, key
}

func testLeaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, orgs []string, usage x509.ExtKeyUsage) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn, Organization: orgs}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	require.NoError(t, err)
	c, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return c
}
