package bootstrap

// Client certificate rotation, after upstream's
// pkg/kubelet/certificate/kubelet.go (NewKubeletClientCertificateManager)
// and transport.go (UpdateTransport): client-go's certificate manager asks
// for a new certificate at 70–90 % of the current one's life, and the
// node's transport presents whatever certificate the manager holds,
// closing its connections when that changes, so requests go on with the
// new certificate without a restart.
//
// Where it departs from upstream, and why: UpdateTransport does not exit
// the process when the certificate has expired (upstream's exitAfter); a
// library does not end its program, and the expiry shows as 401s.

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// TransportCheckPeriod is how often the transport looks for a new
// certificate (upstream: 10 s).
const TransportCheckPeriod = 10 * time.Second

// RotationConfig is what NewClientCertificateManager needs.
type RotationConfig struct {
	// NodeConfig is the node kubeconfig's config: its server and CA, and
	// its certificate (CertFile/KeyFile, as the bootstrap writes, or
	// CertData/KeyData) as the starting one when CertDir has none. While
	// there is a current certificate, new ones are asked for with it.
	// Required.
	NodeConfig *rest.Config
	// BootstrapConfig asks for a certificate when there is no valid one
	// (the bootstrap kubeconfig); nil means there is no such fallback.
	BootstrapConfig *rest.Config
	// CertDir holds kubelet-client-current.pem and its predecessors.
	// Required.
	CertDir string
	// NodeName goes into the certificate: CN=system:node:<NodeName>.
	// Required.
	NodeName string
	// RequestedCertificateLifetime is the CSR's expirationSeconds (at least
	// 10 minutes, the API's minimum); nil leaves it to the signer
	// (kube-controller-manager's --cluster-signing-duration, a year).
	RequestedCertificateLifetime *time.Duration
}

// NewClientCertificateManager returns a certificate manager for the node's
// client certificate, stored as CertDir/kubelet-client-<time>.pem (mode
// 0600) with the symlink kubelet-client-current.pem. Start it to rotate.
func NewClientCertificateManager(cfg RotationConfig) (certificate.Manager, error) {
	if cfg.NodeConfig == nil || cfg.CertDir == "" || cfg.NodeName == "" {
		return nil, errors.New("bootstrap: RotationConfig needs NodeConfig, CertDir and NodeName")
	}
	store, err := certificate.NewFileStore(ClientCertPrefix, cfg.CertDir, cfg.CertDir, cfg.NodeConfig.CertFile, cfg.NodeConfig.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("client certificate store in %s: %w", cfg.CertDir, err)
	}
	node := rest.CopyConfig(cfg.NodeConfig)
	var bootstrap *rest.Config
	if cfg.BootstrapConfig != nil {
		bootstrap = rest.CopyConfig(cfg.BootstrapConfig)
	}
	subject := NodeSubject(cfg.NodeName)
	m, err := certificate.NewManager(&certificate.Config{
		// With a current certificate, the CSR goes with the node's own
		// credentials (the file the store keeps current); without, with
		// the bootstrap token.
		ClientsetFn: func(current *tls.Certificate) (kubernetes.Interface, error) {
			if current != nil {
				return kubernetes.NewForConfig(node)
			}
			if bootstrap == nil {
				return nil, errors.New("no valid client certificate and no bootstrap kubeconfig to ask for one with")
			}
			return kubernetes.NewForConfig(bootstrap)
		},
		Template:                     &x509.CertificateRequest{Subject: pkix.Name{CommonName: subject.CommonName, Organization: subject.Organization}},
		SignerName:                   certificatesv1.KubeAPIServerClientKubeletSignerName,
		GetUsages:                    certificate.DefaultKubeletClientGetUsages,
		RequestedCertificateLifetime: cfg.RequestedCertificateLifetime,
		BootstrapCertificatePEM:      cfg.NodeConfig.CertData,
		BootstrapKeyPEM:              cfg.NodeConfig.KeyData,
		CertificateStore:             store,
		Name:                         "kubelet-client",
	})
	if err != nil {
		return nil, fmt.Errorf("client certificate manager: %w", err)
	}
	return m, nil
}

// UpdateTransport makes cfg (a copy of the node's config, whose
// credentials it replaces) present the manager's current certificate on
// every new connection, and every period (0: TransportCheckPeriod) closes
// all its connections once the manager holds a new certificate, so that
// the next requests connect again with it. It returns a function that
// closes all connections. The check stops when ctx ends.
func UpdateTransport(ctx context.Context, cfg *rest.Config, m certificate.Manager, period time.Duration, clk clock.WithTicker) (closeAll func(), err error) {
	if cfg.Transport != nil || cfg.Dial != nil || cfg.WrapTransport != nil {
		return nil, errors.New("bootstrap: UpdateTransport: the config already has a transport or dialer")
	}
	if period == 0 {
		period = TransportCheckPeriod
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("TLS for %s: %w", cfg.Host, err)
	}
	if tlsConfig == nil {
		tlsConfig = &tls.Config{}
	}
	tlsConfig.Certificates = nil
	tlsConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if cert := m.Current(); cert != nil {
			return cert, nil
		}
		return &tls.Certificate{}, nil // none yet: the server sees an anonymous client
	}
	d := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)

	var mu sync.Mutex
	last := m.Current()
	check := func() {
		mu.Lock()
		defer mu.Unlock()
		cur := m.Current()
		if cur == nil || cur == last {
			return
		}
		last = cur
		klog.FromContext(ctx).Info("Certificate rotation detected, shutting down client connections to start using new credentials",
			"serial", cur.Leaf.SerialNumber.String(), "notAfter", cur.Leaf.NotAfter)
		d.CloseAll()
	}
	go func() {
		t := clk.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				check()
			}
		}
	}()

	cfg.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 25,
		DialContext:         d.DialContext,
	})
	// The transport carries the TLS settings now; rest must not build its own.
	cfg.CertData, cfg.KeyData, cfg.CertFile, cfg.KeyFile = nil, nil, "", ""
	cfg.CAData, cfg.CAFile, cfg.Insecure, cfg.NextProtos = nil, "", false, nil
	return d.CloseAll, nil
}

// CredentialID is how the API server names a client certificate in the
// user's extra "authentication.kubernetes.io/credential-id": X509SHA256=
// and the hex SHA-256 of the certificate.
func CredentialID(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return "X509SHA256=" + hex.EncodeToString(sum[:])
}
