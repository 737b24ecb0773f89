package bootstrap

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"

	certificatesv1 "k8s.io/api/certificates/v1"

	"mykubelet/mylib/statedir"
)

// PEM block types. An ECDSA key in SEC 1 form is an "EC PRIVATE KEY"; calling
// it "RSA PRIVATE KEY" (as some tutorials do) makes every parser reject it.
const (
	ECPrivateKeyBlockType       = "EC PRIVATE KEY"
	CertificateRequestBlockType = "CERTIFICATE REQUEST"
	CertificateBlockType        = "CERTIFICATE"
)

// NodeUsages are the key usages of a kubelet client certificate with an
// ECDSA key. (An RSA key would add key encipherment.) The csrapprover only
// approves node client CSRs whose usages are exactly these.
var NodeUsages = []certificatesv1.KeyUsage{
	certificatesv1.UsageDigitalSignature,
	certificatesv1.UsageClientAuth,
}

// NodeSubject is the subject of a node's client certificate: the API server
// reads the user name from CN and the groups from O, so this certificate
// authenticates as user system:node:<nodeName> in group system:nodes — the
// identity the Node authorizer and NodeRestriction admission recognise.
func NodeSubject(nodeName string) pkix.Name {
	return pkix.Name{
		Organization: []string{"system:nodes"},
		CommonName:   "system:node:" + nodeName,
	}
}

// GenerateKey returns a new ECDSA P-256 private key and its PEM encoding
// (SEC 1, block type "EC PRIVATE KEY"), like the kubelet's.
func GenerateKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate ECDSA P-256 key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode ECDSA key: %w", err)
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: ECPrivateKeyBlockType, Bytes: der}), nil
}

// ParseKey reads a PEM "EC PRIVATE KEY".
func ParseKey(keyPEM []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	if block.Type != ECPrivateKeyBlockType {
		return nil, fmt.Errorf("PEM block type %q, want %q", block.Type, ECPrivateKeyBlockType)
	}
	return x509.ParseECPrivateKey(block.Bytes)
}

// LoadOrGenerateKeyFile returns the key in path, or generates one and writes
// it there (mode 0600) when there is none. Keeping the key on disk until the
// certificate arrives means a run that stops while waiting (timeout, Ctrl-C)
// is resumed by the next one: same key, so same CSR name, so the same CSR.
func LoadOrGenerateKeyFile(path string) (key *ecdsa.PrivateKey, keyPEM []byte, generated bool, err error) {
	keyPEM, err = os.ReadFile(path)
	switch {
	case err == nil:
		key, err = ParseKey(keyPEM)
		if err == nil {
			return key, keyPEM, false, nil
		}
		// A damaged key from an interrupted run is useless: replace it.
	case !errors.Is(err, fs.ErrNotExist):
		return nil, nil, false, fmt.Errorf("read private key %s: %w", path, err)
	}
	key, keyPEM, err = GenerateKey()
	if err != nil {
		return nil, nil, false, err
	}
	if err := statedir.WriteFile(path, keyPEM); err != nil {
		return nil, nil, false, err
	}
	return key, keyPEM, true, nil
}

// MakeCSR returns a PEM "CERTIFICATE REQUEST" for the node's subject, signed
// with key (which proves the requester holds the private key). It has no
// DNS names or IP addresses: the API server refuses those for the
// kube-apiserver-client-kubelet signer.
func MakeCSR(key crypto.Signer, nodeName string) ([]byte, error) {
	tmpl := &x509.CertificateRequest{Subject: NodeSubject(nodeName)}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, fmt.Errorf("create certificate request for node %s: %w", nodeName, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: CertificateRequestBlockType, Bytes: der}), nil
}

// CSRName names the CertificateSigningRequest after what it asks for: a hash
// of the public key, the subject and the usages, like the kubelet's
// "node-csr-…" names. Asking twice for the same thing gives the same name, so
// a second run finds the first run's CSR instead of creating another.
func CSRName(pub crypto.PublicKey, subject pkix.Name, usages []certificatesv1.KeyUsage) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encode public key: %w", err)
	}
	h := sha256.New()
	// Each field is base64-encoded and ends with '|', which base64 never
	// produces, so "CN=ab,O=c" and "CN=a,O=bc" cannot hash alike.
	add := func(b []byte) {
		h.Write([]byte(base64.RawURLEncoding.EncodeToString(b)))
		h.Write([]byte{'|'})
	}
	add(der)
	add([]byte(subject.CommonName))
	for _, o := range subject.Organization {
		add([]byte(o))
	}
	for _, u := range usages {
		add([]byte(u))
	}
	return "node-csr-" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)), nil
}
