package fleet

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
)

// Transport says how each agent's connection to the API server is built.
// The zero value is what the fleet uses: HTTP/1.1, one connection per agent.
type Transport struct {
	// HTTP2 speaks HTTP/2 over each agent's connection, as client-go does
	// by default. It costs more memory per connection (the HTTP/2 framer,
	// header tables and flow-control state, for one request at a time).
	HTTP2 bool
}

// nodeClient is the part of a clientset a node agent uses: Nodes (core) and
// Leases (coordination). A whole kubernetes.Clientset builds some fifty
// REST clients, which for a thousand agents was the largest part of the
// fleet's memory; any other group panics (nil Interface), a programming
// error since the node half uses only these two.
type nodeClient struct {
	kubernetes.Interface
	core  corev1client.CoreV1Interface
	coord coordinationv1client.CoordinationV1Interface
}

func (c *nodeClient) CoreV1() corev1client.CoreV1Interface { return c.core }
func (c *nodeClient) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return c.coord
}

// conns are one agent's connections.
type conns struct {
	dialer    *connrotation.Dialer
	transport *http.Transport
}

// CloseAll closes every connection, busy or idle: the next request dials
// afresh (after repeated heartbeat failures, and at shutdown).
func (c *conns) CloseAll() {
	c.dialer.CloseAll()
	c.transport.CloseIdleConnections()
}

// caPools keeps one parsed CA pool per CA bundle: every agent trusts the
// same API server, so a thousand agents share one pool instead of parsing
// a thousand copies.
var caPools sync.Map // string(PEM) -> *x509.CertPool

func caPool(pem []byte) (*x509.CertPool, error) {
	if p, ok := caPools.Load(string(pem)); ok {
		return p.(*x509.CertPool), nil
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		return nil, errors.New("no CA certificate in the kubeconfig")
	}
	got, _ := caPools.LoadOrStore(string(pem), p)
	return got.(*x509.CertPool), nil
}

// newNodeClient is one agent's only client, built like the kubelet's
// heartbeat client (nodelease.NewHeartbeatClient): requests time out after
// timeout, and every connection goes through a dialer that can close them
// all. Upstream has a second client without the timeout for everything
// else; an agent of the fleet has nothing else, so one client.
//
// The fleet builds the transport itself instead of letting client-go build
// it from the certificate in cfg: HTTP/1.1 unless tr.HTTP2 (client-go
// always offers HTTP/2), at most one connection per agent (its Lease
// renewal and its status sync take turns), and one CA pool for all.
func newNodeClient(cfg *rest.Config, tr Transport, timeout time.Duration) (*nodeClient, *conns, error) {
	cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
	if err != nil {
		return nil, nil, fmt.Errorf("client certificate: %w", err)
	}
	roots, err := caPool(cfg.CAData)
	if err != nil {
		return nil, nil, err
	}
	d := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	t := &http.Transport{
		DialContext: d.DialContext,
		TLSClientConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			RootCAs:      roots,
			ServerName:   cfg.ServerName,
			MinVersion:   tls.VersionTLS12,
		},
		TLSHandshakeTimeout: 10 * time.Second,
		MaxConnsPerHost:     1,
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     90 * time.Second,
		Protocols:           new(http.Protocols),
	}
	if tr.HTTP2 {
		t.Protocols.SetHTTP2(true)
		// client-go's health check: a ping after 30 s of silence.
		t.HTTP2 = &http.HTTP2Config{SendPingTimeout: 30 * time.Second, PingTimeout: 15 * time.Second}
	} else {
		t.Protocols.SetHTTP1(true)
	}
	c := rest.CopyConfig(cfg)
	c.TLSClientConfig = rest.TLSClientConfig{}
	c.Transport = t
	c.Timeout = timeout
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, nil, fmt.Errorf("client: %w", err)
	}
	core, err := corev1client.NewForConfigAndClient(c, hc)
	if err != nil {
		return nil, nil, fmt.Errorf("core client: %w", err)
	}
	coord, err := coordinationv1client.NewForConfigAndClient(c, hc)
	if err != nil {
		return nil, nil, fmt.Errorf("coordination client: %w", err)
	}
	return &nodeClient{core: core, coord: coord}, &conns{dialer: d, transport: t}, nil
}
