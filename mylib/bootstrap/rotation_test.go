package bootstrap

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeManager is a certificate.Manager whose current certificate a test sets.
type fakeManager struct {
	mu  sync.Mutex
	cur *tls.Certificate
}

func (f *fakeManager) Start()              {}
func (f *fakeManager) Stop()               {}
func (f *fakeManager) ServerHealthy() bool { return true }
func (f *fakeManager) Current() *tls.Certificate {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur
}
func (f *fakeManager) set(c *tls.Certificate) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cur = c
}

func selfSignedPair(t *testing.T, name string) *tls.Certificate {
	t.Helper()
	crt, key, err := cert.GenerateSelfSignedCertKey(name, nil, nil)
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(crt, key)
	require.NoError(t, err)
	return &pair
}

// TestTransportSwitchesCertificateAtTheNextCheck: the transport presents
// the manager's certificate on each new connection; a kept-alive
// connection goes on with the old one until the periodic check (10 s on
// the clock) sees the new certificate and closes every connection.
func TestTransportSwitchesCertificateAtTheNextCheck(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	srv.StartTLS()
	defer srv.Close()

	a, b := selfSignedPair(t, "cert-a"), selfSignedPair(t, "cert-b")
	m := &fakeManager{cur: a}
	clk := clocktesting.NewFakeClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}}
	_, err := UpdateTransport(ctx, cfg, m, 0, clk)
	require.NoError(t, err)
	assert.Empty(t, cfg.CAData, "the transport carries the TLS settings")
	client, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	get := func() string {
		t.Helper()
		resp, err := client.Get(srv.URL)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(body)
	}

	nameA, nameB := a.Leaf.Subject.CommonName, b.Leaf.Subject.CommonName
	assert.Equal(t, nameA, get())
	m.set(b)
	assert.Equal(t, nameA, get(), "the kept-alive connection still carries the old certificate")
	require.Eventually(t, clk.HasWaiters, 10*time.Second, time.Millisecond, "the check's ticker")
	clk.Step(TransportCheckPeriod)
	require.Eventually(t, func() bool { return get() == nameB }, 10*time.Second, 10*time.Millisecond,
		"after the check, connections are closed and the next one presents the new certificate")
}

func TestUpdateTransportRefusesAConfigWithATransport(t *testing.T) {
	_, err := UpdateTransport(context.Background(), &rest.Config{Transport: http.DefaultTransport}, &fakeManager{}, 0, nil)
	assert.EqualError(t, err, "bootstrap: UpdateTransport: the config already has a transport or dialer")
}

func TestNewClientCertificateManagerNeedsItsFields(t *testing.T) {
	_, err := NewClientCertificateManager(RotationConfig{CertDir: t.TempDir(), NodeName: "n1"})
	assert.EqualError(t, err, "bootstrap: RotationConfig needs NodeConfig, CertDir and NodeName")
}
