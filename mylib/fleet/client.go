package fleet

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
)

// Transport says how each agent's connection to the API server is built.
type Transport int

const (
	// TransportOwn, the default, is the fleet's own HTTP/1.1 client (see
	// oneConn): one kept-alive TLS connection per agent, each request done
	// in the goroutine that makes it, so that an idle agent holds no
	// goroutine and no buffer.
	TransportOwn Transport = iota
	// TransportHTTP1 is net/http's Transport speaking HTTP/1.1, one
	// connection per agent: two goroutines and two 4 KiB buffers per
	// connection for as long as it lives.
	TransportHTTP1
	// TransportHTTP2 is net/http speaking HTTP/2, as client-go does by
	// default: on top of that, HTTP/2's framer, header tables and
	// flow-control state, for one request at a time.
	TransportHTTP2
)

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
type conns interface {
	// CloseAll closes every connection, busy or idle: the next request
	// dials afresh (after repeated heartbeat failures, and at shutdown).
	CloseAll()
}

// netConns are the connections of a net/http Transport.
type netConns struct {
	dialer    *connrotation.Dialer
	transport *http.Transport
}

func (c *netConns) CloseAll() {
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
// timeout, and its connection can be closed at any time (conns.CloseAll).
// Upstream has a second client without the timeout for everything else;
// an agent of the fleet has nothing else, so one client.
//
// The fleet builds the transport itself instead of letting client-go build
// it from the certificate in cfg: its own HTTP/1.1 client by default
// (client-go always offers HTTP/2), one connection per agent (its Lease
// renewal and its status sync take turns), and one CA pool for all.
func newNodeClient(cfg *rest.Config, tr Transport, timeout time.Duration) (*nodeClient, conns, error) {
	cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
	if err != nil {
		return nil, nil, fmt.Errorf("client certificate: %w", err)
	}
	roots, err := caPool(cfg.CAData)
	if err != nil {
		return nil, nil, err
	}
	tlsConfig := &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      roots,
		ServerName:   cfg.ServerName,
		MinVersion:   tls.VersionTLS12,
	}
	var rt http.RoundTripper
	var cs conns
	clientTimeout := timeout
	switch tr {
	case TransportOwn:
		u, err := url.Parse(cfg.Host)
		if err != nil || u.Scheme != "https" || u.Port() == "" {
			return nil, nil, fmt.Errorf("API server %q: want https://<host>:<port>", cfg.Host)
		}
		if tlsConfig.ServerName == "" {
			tlsConfig.ServerName = u.Hostname()
		}
		// Only HTTP/1.1 is offered: the server must not pick h2.
		tlsConfig.NextProtos = []string{"http/1.1"}
		// The transport times each request (see newOneConn), so the
		// client does not: its requests carry no ?timeout= for the
		// API server, which then applies its own (60 s).
		oc := newOneConn(u.Host, tlsConfig, timeout)
		rt, cs, clientTimeout = oc, oc, 0
	case TransportHTTP1, TransportHTTP2:
		d := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
		t := &http.Transport{
			DialContext:         d.DialContext,
			TLSClientConfig:     tlsConfig,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxConnsPerHost:     1,
			MaxIdleConnsPerHost: 1,
			IdleConnTimeout:     90 * time.Second,
			Protocols:           new(http.Protocols),
		}
		if tr == TransportHTTP2 {
			t.Protocols.SetHTTP2(true)
			// client-go's health check: a ping after 30 s of silence.
			t.HTTP2 = &http.HTTP2Config{SendPingTimeout: 30 * time.Second, PingTimeout: 15 * time.Second}
		} else {
			t.Protocols.SetHTTP1(true)
		}
		rt, cs = t, &netConns{dialer: d, transport: t}
	default:
		return nil, nil, fmt.Errorf("transport %d: unknown", tr)
	}
	c := rest.CopyConfig(cfg)
	c.TLSClientConfig = rest.TLSClientConfig{}
	c.Transport = rt
	c.Timeout = clientTimeout
	// Protobuf, as the kubelet asks for (its --kube-api-content-type): the
	// answers decode with less work and less garbage than JSON.
	c.ContentType = "application/vnd.kubernetes.protobuf"
	c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
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
	return &nodeClient{core: core, coord: coord}, cs, nil
}
