package bootstrap

import (
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"

	certutil "k8s.io/client-go/util/cert"

	"mykubelet/mylib/statedir"
)

// Self-signed serving certificate files, as upstream's kubelet names them
// in its --cert-dir.
const (
	SelfSignedCertFile = "kubelet.crt"
	SelfSignedKeyFile  = "kubelet.key"
)

// SelfSignedServingCert is what upstream's kubelet serves with when it
// neither has --tls-cert-file nor bootstraps its serving certificate
// (cmd/kubelet/app/server.go, InitializeTLS): a certificate it signs
// itself, for its hostname and addresses, kept as kubelet.crt and
// kubelet.key in certDir (mode 0600, where upstream makes the certificate 0644) and reused on the next start.
// Nobody's CA signed it, so an API server that checks kubelets'
// certificates (--kubelet-certificate-authority) refuses it: `kubectl logs`
// then fails with "x509: certificate signed by unknown authority". That is
// why kubeadm recommends serverTLSBootstrap.
func SelfSignedServingCert(certDir, hostname string, ips []net.IP, dnsNames []string) (cert tls.Certificate, created bool, err error) {
	crtPath, keyPath := filepath.Join(certDir, SelfSignedCertFile), filepath.Join(certDir, SelfSignedKeyFile)
	if ok, _ := certutil.CanReadCertAndKey(crtPath, keyPath); !ok {
		crt, key, err := certutil.GenerateSelfSignedCertKey(hostname, ips, dnsNames)
		if err != nil {
			return tls.Certificate{}, false, fmt.Errorf("self-signed serving certificate for %s: %w", hostname, err)
		}
		for path, data := range map[string][]byte{crtPath: crt, keyPath: key} {
			if err := statedir.WriteFile(path, data); err != nil {
				return tls.Certificate{}, false, err
			}
		}
		created = true
	}
	cert, err = tls.LoadX509KeyPair(crtPath, keyPath)
	if err != nil {
		return tls.Certificate{}, false, fmt.Errorf("self-signed serving certificate %s: %w", crtPath, err)
	}
	return cert, created, nil
}
