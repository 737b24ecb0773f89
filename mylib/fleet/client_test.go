package fleet

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"path"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// clientCert is a self-signed client certificate for user, as PEM.
func clientCert(t *testing.T, user string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: user, Organization: []string{"system:nodes"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// TestEachAgentHasOneConnectionOfItsOwn sends requests from two agents'
// clients, several at a time, to a TLS server that speaks both HTTP/1.1
// and HTTP/2, and checks what the server saw: one connection per agent,
// each request with that agent's certificate, in the protocol asked for.
func TestEachAgentHasOneConnectionOfItsOwn(t *testing.T) {
	for _, tc := range []struct {
		tr    Transport
		proto int
	}{{TransportOwn, 1}, {TransportHTTP1, 1}, {TransportHTTP2, 2}} {
		t.Run(fmt.Sprintf("transport %d HTTP/%d", tc.tr, tc.proto), func(t *testing.T) {
			var mu sync.Mutex
			var conns int
			var mismatches []string
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				name := path.Base(r.URL.Path)
				mu.Lock()
				if got := r.TLS.PeerCertificates[0].Subject.CommonName; got != "system:node:"+name || r.ProtoMajor != tc.proto {
					mismatches = append(mismatches, fmt.Sprintf("GET %s by %s over HTTP/%d", r.URL.Path, got, r.ProtoMajor))
				}
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":%q}}`, name)
			}))
			srv.EnableHTTP2 = true
			srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					mu.Lock()
					conns++
					mu.Unlock()
				}
			}
			srv.StartTLS()
			defer srv.Close()
			ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

			var wg sync.WaitGroup
			for _, name := range []string{"a", "b"} {
				cert, key := clientCert(t, "system:node:"+name)
				cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CertData: cert, KeyData: key, CAData: ca}}
				client, c, err := newNodeClient(cfg, tc.tr, 10*time.Second)
				require.NoError(t, err)
				defer c.CloseAll()
				for range 5 {
					wg.Go(func() {
						n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
						if assert.NoError(t, err) {
							assert.Equal(t, name, n.Name)
						}
					})
				}
			}
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			assert.Empty(t, mismatches)
			assert.Equal(t, 2, conns, "one connection per agent, for five requests at a time")
		})
	}
}

func TestAgentsShareOneCAPool(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	p1, err := caPool(ca)
	require.NoError(t, err)
	p2, err := caPool(append([]byte(nil), ca...))
	require.NoError(t, err)
	assert.Same(t, p1, p2)
	_, err = caPool([]byte("not a certificate"))
	assert.Error(t, err)
}
