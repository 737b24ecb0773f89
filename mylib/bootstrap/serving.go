package bootstrap

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// The kubelet's serving certificate: the one its HTTPS server on port 10250
// presents to the API server (kubectl logs, exec) and to anyone else who
// connects. Upstream's kubelet asks for it with
// pkg/kubelet/certificate/kubelet.go, NewKubeletServerCertificateManager,
// when --rotate-server-certificates is on, as kubeadm recommends.
const (
	// ServerCertPrefix names the files of its store, as upstream's:
	// kubelet-server-<timestamp>.pem and kubelet-server-current.pem.
	ServerCertPrefix = "kubelet-server"
	// TmpServingKeyFile keeps the serving key until its certificate arrives.
	TmpServingKeyFile = "kubelet-server.key.tmp"
	// DefaultServingCertificateTimeout is how long RequestServingCert waits
	// for a human to approve the CSR.
	DefaultServingCertificateTimeout = 5 * time.Minute
)

// ServingUsages are the key usages of a kubelet serving certificate with an
// ECDSA key, as upstream's getUsages gives them (an RSA key adds key
// encipherment). The kube-controller-manager signs a kubernetes.io/kubelet-serving
// CSR only with these (and its SANs are DNS names and IPs, nothing else).
var ServingUsages = []certificatesv1.KeyUsage{
	certificatesv1.UsageDigitalSignature,
	certificatesv1.UsageServerAuth,
}

// ServingConfig says what RequestServingCert asks for and where it keeps it.
type ServingConfig struct {
	// Client talks to the API server with the node's own credentials (the
	// kubeconfig LoadClientCert wrote): a node may create CSRs for itself.
	Client kubernetes.Interface
	// CertDir holds kubelet-server-current.pem (the kubelet's --cert-dir).
	CertDir string
	// NodeName goes into the subject: CN=system:node:<NodeName>, O=system:nodes.
	NodeName string
	// IPs and DNSNames are the certificate's SANs: the node's addresses
	// (InternalIP…) and its hostname. At least one is required.
	IPs      []net.IP
	DNSNames []string
	// Timeout bounds the wait for approval and signing; 0 means
	// DefaultServingCertificateTimeout.
	Timeout time.Duration
	// Clock tells whether a stored certificate is still valid; nil means the real clock.
	Clock clock.PassiveClock
	// Out receives one line per step; nil discards them.
	Out io.Writer
}

// ServingResult says what RequestServingCert did.
type ServingResult struct {
	// Reused: the stored certificate was still valid for these SANs.
	Reused bool
	// CSRName is the CertificateSigningRequest used (empty when Reused).
	CSRName string
	// CertFile is kubelet-server-current.pem: certificate and key, mode 0600.
	CertFile string
	// Certificate is the serving certificate and its key, for a tls.Config.
	Certificate tls.Certificate
}

// ServingCSRName names a serving CSR after what it asks for, like CSRName
// for the client certificate, so that a run that stopped while waiting is
// resumed by the next (same key, same SANs, same name). Upstream's
// certificate manager lets the API server pick a name ("csr-" and five
// random characters) and never resumes: it asks again with a new key.
func ServingCSRName(pub crypto.PublicKey, subject pkix.Name, ips []net.IP, dnsNames []string) (string, error) {
	sans := make([]string, 0, len(ips)+len(dnsNames))
	for _, ip := range ips {
		sans = append(sans, ip.String())
	}
	sans = append(sans, dnsNames...)
	usages := append(slices.Clone(ServingUsages), certificatesv1.KeyUsage(strings.Join(sans, ",")))
	name, err := CSRName(pub, subject, usages)
	if err != nil {
		return "", err
	}
	return "kubelet-serving-" + strings.TrimPrefix(name, "node-csr-"), nil
}

// MakeServingCSR returns a PEM "CERTIFICATE REQUEST" for the node's serving
// certificate: the node's subject, and the addresses and names the API
// server may dial it by.
func MakeServingCSR(key crypto.Signer, nodeName string, ips []net.IP, dnsNames []string) ([]byte, error) {
	tmpl := &x509.CertificateRequest{Subject: NodeSubject(nodeName), IPAddresses: ips, DNSNames: dnsNames}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, fmt.Errorf("create serving certificate request for node %s: %w", nodeName, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: CertificateRequestBlockType, Bytes: der}), nil
}

// RequestServingCert makes sure CertDir holds a valid serving certificate
// for the node and its SANs: it reuses kubelet-server-current.pem when that
// still is, or else sends a CSR of signer kubernetes.io/kubelet-serving and
// waits (up to Timeout) until someone approves it and the controller
// manager signs it. Unlike a node's client CSR, nothing approves it by
// itself: kube-controller-manager's csrapprover approves only client
// certificates, because it cannot tell whether the node really owns the
// addresses it asks for. An admin does, with `kubectl certificate approve`.
func RequestServingCert(ctx context.Context, cfg ServingConfig) (*ServingResult, error) {
	if cfg.Client == nil || cfg.NodeName == "" || cfg.CertDir == "" {
		return nil, errors.New("bootstrap: ServingConfig needs Client, NodeName and CertDir")
	}
	if len(cfg.IPs) == 0 && len(cfg.DNSNames) == 0 {
		return nil, errors.New("bootstrap: a serving certificate needs at least one IP or DNS name")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultServingCertificateTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	certFile := filepath.Join(cfg.CertDir, ServerCertPrefix+"-current.pem")
	subject := NodeSubject(cfg.NodeName)

	// 1. A stored certificate that still fits is reused.
	if pair, why := servingCertStillValid(certFile, subject.CommonName, cfg.IPs, cfg.DNSNames, cfg.Clock.Now()); why == nil {
		fmt.Fprintf(out, "serving certificate: %s is valid until %s for %s: reusing it\n", certFile,
			pair.Leaf.NotAfter.UTC().Format(time.RFC3339), sanList(pair.Leaf.IPAddresses, pair.Leaf.DNSNames))
		return &ServingResult{Reused: true, CertFile: certFile, Certificate: pair}, nil
	} else if !errors.Is(why, fs.ErrNotExist) {
		fmt.Fprintf(out, "serving certificate: %s is not usable (%v): requesting a new one\n", certFile, why)
	}

	// 2. The key, kept until the certificate arrives.
	if err := os.MkdirAll(cfg.CertDir, 0o700); err != nil {
		return nil, fmt.Errorf("create cert dir %s: %w", cfg.CertDir, err)
	}
	keyPath := filepath.Join(cfg.CertDir, TmpServingKeyFile)
	key, keyPEM, _, err := LoadOrGenerateKeyFile(keyPath)
	if err != nil {
		return nil, err
	}

	// 3. Ask, then wait for a human.
	csrPEM, err := MakeServingCSR(key, cfg.NodeName, cfg.IPs, cfg.DNSNames)
	if err != nil {
		return nil, err
	}
	name, err := ServingCSRName(key.Public(), subject, cfg.IPs, cfg.DNSNames)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	reqName, reqUID, err := csr.RequestCertificateWithContext(wctx, cfg.Client, csrPEM, name,
		certificatesv1.KubeletServingSignerName, nil, ServingUsages, key)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("interrupted while sending certificate signing request %s: %w", name, ctx.Err())
	case err != nil:
		return nil, fmt.Errorf("serving certificate signing request %s: %w", name, err)
	}
	fmt.Fprintf(out, "csr: %s for %s (signer %s, usages %s, SANs %s)\n", reqName, subject.CommonName,
		certificatesv1.KubeletServingSignerName, joinUsages(ServingUsages), sanList(cfg.IPs, cfg.DNSNames))
	fmt.Fprintf(out, "csr: waiting up to %s for approval: nothing approves serving certificates by itself; run: kubectl certificate approve %s\n", cfg.Timeout, reqName)
	certPEM, err := csr.WaitForCertificate(wctx, cfg.Client, reqName, reqUID)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("interrupted while waiting for certificate signing request %s (it stays; run again to keep waiting for it): %w", reqName, ctx.Err())
	case err != nil && wait.Interrupted(err):
		return nil, &NotApprovedError{CSRName: reqName, Timeout: cfg.Timeout}
	case err != nil:
		return nil, fmt.Errorf("certificate signing request %s: %w", reqName, err)
	}
	if err := checkIssued(certPEM, key, subject.CommonName); err != nil {
		return nil, fmt.Errorf("certificate signing request %s: %w", reqName, err)
	}
	fmt.Fprintf(out, "csr: %s approved and signed\n", reqName)

	// 4. Store it as upstream does: kubelet-server-<time>.pem and the
	// symlink kubelet-server-current.pem, mode 0600.
	store, err := certificate.NewFileStore(ServerCertPrefix, cfg.CertDir, cfg.CertDir, "", "")
	if err != nil {
		return nil, fmt.Errorf("certificate store in %s: %w", cfg.CertDir, err)
	}
	pair, err := store.Update(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("store serving certificate in %s: %w", cfg.CertDir, err)
	}
	if err := os.Remove(keyPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		klog.V(2).InfoS("Could not remove the temporary serving key", "path", keyPath, "err", err)
	}
	fmt.Fprintf(out, "serving certificate: wrote %s (mode 0600, valid until %s)\n", certFile, pair.Leaf.NotAfter.UTC().Format(time.RFC3339))
	return &ServingResult{CSRName: reqName, CertFile: certFile, Certificate: *pair}, nil
}

// servingCertStillValid loads path (certificate and key in one PEM file)
// and says why it cannot serve for these SANs now, if it cannot.
func servingCertStillValid(path, commonName string, ips []net.IP, dnsNames []string, now time.Time) (tls.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return tls.Certificate{}, err
	}
	pair, err := tls.X509KeyPair(b, b)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certificate and key: %w", err)
	}
	c := pair.Leaf
	switch {
	case c.Subject.CommonName != commonName:
		return pair, fmt.Errorf("it is for %s, not %s", c.Subject.CommonName, commonName)
	case now.After(c.NotAfter):
		return pair, fmt.Errorf("expired at %s", c.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(c.NotBefore):
		return pair, fmt.Errorf("not valid before %s", c.NotBefore.UTC().Format(time.RFC3339))
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
			return pair, fmt.Errorf("it does not name IP %s", ip)
		}
	}
	for _, n := range dnsNames {
		if !slices.Contains(c.DNSNames, n) {
			return pair, fmt.Errorf("it does not name %s", n)
		}
	}
	return pair, nil
}

func sanList(ips []net.IP, dnsNames []string) string {
	s := make([]string, 0, len(ips)+len(dnsNames))
	for _, ip := range ips {
		s = append(s, "IP:"+ip.String())
	}
	for _, n := range dnsNames {
		s = append(s, "DNS:"+n)
	}
	return strings.Join(s, ", ")
}
