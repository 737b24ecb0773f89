package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"mykubelet/mylib/bootstrap"
)

// RunConfig is what Run needs: the server's Config, and where and how to
// get its certificate.
type RunConfig struct {
	Config
	// Client asks the API server, with the node's credentials, for the
	// serving certificate, TokenReviews and SubjectAccessReviews. Required.
	Client kubernetes.Interface
	// ClientCA is the PEM bundle client certificates are checked against
	// (the kubelet's --client-ca-file: the cluster CA). Required.
	ClientCA []byte
	// NodeIP is the node's InternalIP, the address the API server dials
	// and the serving certificate's IP SAN. Required.
	NodeIP net.IP
	// Port is the kubelet's --port (DefaultPort).
	Port int
	// Address is the IP to listen on (the kubelet's --address); "" means
	// NodeIP.
	Address string
	// CertDir and CertTimeout: see bootstrap.ServingConfig.
	CertDir     string
	CertTimeout time.Duration
	// TLS, when set, is the server's TLS configuration, used instead of
	// asking once for a certificate with bootstrap.RequestServingCert: a
	// certificate manager's (bootstrap.ServingTLSConfig, rotated as it
	// renews; until its first CSR is approved, handshakes fail) or a
	// self-signed certificate (TLSConfig of bootstrap.SelfSignedServingCert).
	TLS *tls.Config
	// Out receives the certificate's steps and the line saying where the
	// server listens.
	Out io.Writer
}

// Run gets the serving certificate (bootstrap.RequestServingCert: a CSR
// with the node's IP and name, approved by a human), then serves the
// kubelet API on NodeIP:Port with webhook authentication and
// authorization, in goroutines wg waits for, until ctx ends. It returns
// once the server listens.
func Run(ctx context.Context, wg *sync.WaitGroup, cfg RunConfig) error {
	authn, authz, err := NewWebhookAuth(cfg.Client, cfg.ClientCA)
	if err != nil {
		return fmt.Errorf("client CA: %w", err)
	}
	cfg.Authenticator, cfg.Authorizer = authn, authz
	s, err := NewServer(cfg.Config)
	if err != nil {
		return err
	}
	host := cfg.Address
	if host == "" {
		host = cfg.NodeIP.String()
	}
	addr := net.JoinHostPort(host, strconv.Itoa(cfg.Port))
	lis, err := net.Listen("tcp", addr) // before the CSR: a taken port fails at once
	if err != nil {
		return fmt.Errorf("kubelet server on %s: %w", addr, err)
	}
	if cfg.TLS != nil {
		ListenAndServeTLS(ctx, wg, lis, s, cfg.TLS)
		if cfg.Out != nil {
			fmt.Fprintf(cfg.Out, "kubelet server: listening on https://%s (authentication: x509 and TokenReview; authorization: SubjectAccessReview)\n", addr)
		}
		return nil
	}
	cert, err := bootstrap.RequestServingCert(ctx, bootstrap.ServingConfig{Client: cfg.Client, CertDir: cfg.CertDir,
		NodeName: cfg.NodeName, IPs: []net.IP{cfg.NodeIP}, DNSNames: []string{cfg.NodeName}, Timeout: cfg.CertTimeout, Out: cfg.Out})
	if err != nil {
		lis.Close()
		return err
	}
	ListenAndServe(ctx, wg, lis, s, cert.Certificate)
	if cfg.Out != nil {
		fmt.Fprintf(cfg.Out, "kubelet server: listening on https://%s (authentication: x509 and TokenReview; authorization: SubjectAccessReview)\n", addr)
	}
	return nil
}
