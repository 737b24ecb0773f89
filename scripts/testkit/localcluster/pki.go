package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"mykubelet/mylib/statedir"
)

// CA is a certificate authority: the cluster CA signs every serving and
// client certificate of the local control plane, and the controller manager
// signs node CSRs with it.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// CertPEM is Cert, PEM-encoded, as kubeconfigs embed it.
	CertPEM []byte
}

// CertSpec describes a certificate for CA.Issue.
type CertSpec struct {
	CommonName    string
	Organizations []string
	// DNSNames and IPs make it a serving certificate; without them it is a
	// client certificate.
	DNSNames []string
	IPs      []net.IP
	Validity time.Duration
}

func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
}

// NewCA makes a self-signed CA valid for ten years.
func NewCA(name string) (*CA, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: pemCert(der)}, nil
}

// Issue makes a key and a certificate signed by the CA. It returns both
// PEM-encoded; the key as "EC PRIVATE KEY".
func (ca *CA) Issue(spec CertSpec) (certPEM, keyPEM []byte, err error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	validity := spec.Validity
	if validity == 0 {
		validity = 365 * 24 * time.Hour
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: spec.CommonName, Organization: spec.Organizations},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:     spec.DNSNames,
		IPAddresses:  spec.IPs,
	}
	if len(spec.DNSNames) > 0 || len(spec.IPs) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = PEMKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pemCert(der), keyPEM, nil
}

// PEMKey encodes an ECDSA key as PEM type "EC PRIVATE KEY" (SEC 1), the type
// that matches its content.
func PEMKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// loadOrCreateCA reads name.crt and name.key from dir, or creates them: a
// CA whose common name is commonName.
func loadOrCreateCA(dir, name, commonName string) (*CA, error) {
	certFile, keyFile := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	certPEM, errC := os.ReadFile(certFile)
	keyPEM, errK := os.ReadFile(keyFile)
	if errC == nil && errK == nil {
		ca, err := parseCA(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", certFile, err)
		}
		return ca, nil
	}
	if !errors.Is(errC, os.ErrNotExist) && errC != nil {
		return nil, errC
	}
	ca, err := NewCA(commonName)
	if err != nil {
		return nil, err
	}
	key, err := PEMKey(ca.Key.(*ecdsa.PrivateKey))
	if err != nil {
		return nil, err
	}
	if err := statedir.WriteFile(keyFile, key); err != nil {
		return nil, err
	}
	if err := statedir.WriteFile(certFile, ca.CertPEM); err != nil {
		return nil, err
	}
	return ca, nil
}

func parseCA(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("the CA's certificate or key is not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the CA's certificate: %w", err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the CA's key: %w", err)
	}
	return &CA{Cert: cert, Key: key, CertPEM: certPEM}, nil
}

// writeIssued writes name.crt and name.key unless both exist already.
func (ca *CA) writeIssued(dir, name string, spec CertSpec) error {
	crt, key := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if fileExists(crt) && fileExists(key) {
		return nil
	}
	c, k, err := ca.Issue(spec)
	if err != nil {
		return fmt.Errorf("issue %s: %w", name, err)
	}
	if err := statedir.WriteFile(key, k); err != nil {
		return err
	}
	return statedir.WriteFile(crt, c)
}

// writeServiceAccountKey writes the key pair the API server signs and checks
// service account tokens with.
func writeServiceAccountKey(dir string) error {
	keyFile, pubFile := filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if fileExists(keyFile) && fileExists(pubFile) {
		return nil
	}
	key, err := newKey()
	if err != nil {
		return err
	}
	keyPEM, err := PEMKey(key)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	if err := statedir.WriteFile(keyFile, keyPEM); err != nil {
		return err
	}
	return statedir.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
