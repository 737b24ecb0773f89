package bootstrap

// Serving certificate rotation, after upstream's
// pkg/kubelet/certificate/kubelet.go (NewKubeletServerCertificateManager):
// with --rotate-server-certificates (serverTLSBootstrap), client-go's
// certificate manager asks for the kubelet's serving certificate with a
// kubernetes.io/kubelet-serving CSR, keeps it in the cert dir as
// kubelet-server-<time>.pem with the symlink kubelet-server-current.pem
// (the same files RequestServingCert writes, so a certificate from either
// is picked up by the other), and asks for the next one at 70–90 % of the
// current one's life. The server reads Current() at every TLS handshake
// (ServingTLSConfig), so a new certificate serves at once, without a
// restart.
//
// Where it departs from upstream, and why: the SANs are given once (the
// node's IP and name), where upstream follows the addresses in the Node's
// status and asks again when they change; the manager's CSR names are the
// API server's ("csr-" and five characters), as upstream's, not
// ServingCSRName's. As upstream, nothing approves a serving CSR by itself:
// an admin (or an approver the cluster runs) must, for the first one and
// for every renewal.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/certificate"
	"k8s.io/utils/clock"
)

// ServingRotationConfig is what NewServingCertificateManager needs.
type ServingRotationConfig struct {
	// Client sends the CSRs with the node's own credentials. Required.
	Client kubernetes.Interface
	// CertDir holds kubelet-server-current.pem. Required.
	CertDir string
	// NodeName goes into the subject: CN=system:node:<NodeName>,
	// O=system:nodes. Required.
	NodeName string
	// IPs and DNSNames are the certificate's SANs; at least one is required.
	IPs      []net.IP
	DNSNames []string
	// RequestedCertificateLifetime is the CSR's expirationSeconds (at least
	// 10 minutes); nil leaves it to the signer.
	RequestedCertificateLifetime *time.Duration
}

// ServingTemplate is the certificate request the serving manager sends:
// the node's subject and its SANs.
func ServingTemplate(nodeName string, ips []net.IP, dnsNames []string) *x509.CertificateRequest {
	return &x509.CertificateRequest{Subject: NodeSubject(nodeName), IPAddresses: ips, DNSNames: dnsNames}
}

// NewServingCertificateManager returns a certificate manager for the
// kubelet's serving certificate (signer kubernetes.io/kubelet-serving),
// stored in CertDir as kubelet-server-<time>.pem (mode 0600) with the
// symlink kubelet-server-current.pem. Start it to get the first
// certificate, if the store has none valid, and to rotate.
func NewServingCertificateManager(cfg ServingRotationConfig) (certificate.Manager, error) {
	if cfg.Client == nil || cfg.CertDir == "" || cfg.NodeName == "" {
		return nil, errors.New("bootstrap: ServingRotationConfig needs Client, CertDir and NodeName")
	}
	if len(cfg.IPs) == 0 && len(cfg.DNSNames) == 0 {
		return nil, errors.New("bootstrap: a serving certificate needs at least one IP or DNS name")
	}
	store, err := certificate.NewFileStore(ServerCertPrefix, cfg.CertDir, cfg.CertDir, "", "")
	if err != nil {
		return nil, fmt.Errorf("serving certificate store in %s: %w", cfg.CertDir, err)
	}
	client := cfg.Client
	m, err := certificate.NewManager(&certificate.Config{
		ClientsetFn:                  func(*tls.Certificate) (kubernetes.Interface, error) { return client, nil },
		Template:                     ServingTemplate(cfg.NodeName, cfg.IPs, cfg.DNSNames),
		SignerName:                   certificatesv1.KubeletServingSignerName,
		GetUsages:                    certificate.DefaultKubeletServingGetUsages,
		RequestedCertificateLifetime: cfg.RequestedCertificateLifetime,
		CertificateStore:             store,
		Name:                         "kubelet-server",
	})
	if err != nil {
		return nil, fmt.Errorf("serving certificate manager: %w", err)
	}
	return m, nil
}

// ErrNoServingCertificate is what a TLS handshake gets while the manager
// has no certificate yet (its CSR not approved): the client sees the
// handshake fail, as with upstream's kubelet.
var ErrNoServingCertificate = errors.New("no serving certificate available for the kubelet (is its CSR approved?)")

// ServingTLSConfig is the kubelet server's TLS with the manager's current
// certificate, read at every handshake (upstream: tlsOptions.Config.GetCertificate
// in cmd/kubelet/app/server.go): TLS 1.2 or later, client certificates
// asked for but left to the server's authenticator to check.
func ServingTLSConfig(m certificate.Manager) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequestClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if cert := m.Current(); cert != nil {
				return cert, nil
			}
			return nil, ErrNoServingCertificate
		},
	}
}

// ReportCertificates prints one line to out each time m's current
// certificate changes, checking every period (0: TransportCheckPeriod),
// in a goroutine wg waits for, until ctx ends: what is "client" or
// "serving". The first line comes when a first certificate arrives (it
// had none) or, with one at the start, when it is rotated. clk nil is the
// real clock.
func ReportCertificates(ctx context.Context, wg *sync.WaitGroup, m certificate.Manager, what string, out io.Writer, period time.Duration, clk clock.WithTicker) {
	if period == 0 {
		period = TransportCheckPeriod
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	last := m.Current()
	wg.Go(func() {
		t := clk.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			}
			cur := m.Current()
			if cur == nil || cur == last {
				continue
			}
			verb := "rotated"
			if last == nil {
				verb = "issued"
			}
			last = cur
			fmt.Fprintf(out, "%s certificate: %s, valid from %s until %s (the next at 70-90%% of that)\n", what, verb,
				cur.Leaf.NotBefore.UTC().Format(time.RFC3339), cur.Leaf.NotAfter.UTC().Format(time.RFC3339))
		}
	})
}
