package testing

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"slices"
	"strings"
	gotesting "testing"
	"time"
)

// NewRootCA is a new self-signed CA certificate's DER bytes, valid for an
// hour: a root for a ClusterTrustBundle.
func NewRootCA(t gotesting.TB, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// PEMCerts is the certificates as PEM blocks, in the order given.
func PEMCerts(ders ...[]byte) string {
	var b strings.Builder
	for _, d := range ders {
		b.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: d}))
	}
	return b.String()
}

// SortedPEMCerts is what a clusterTrustBundle projection writes of these
// certificates: each once, in the order of their DER bytes.
func SortedPEMCerts(ders ...[]byte) string {
	ders = slices.Clone(ders)
	slices.SortFunc(ders, bytes.Compare)
	return PEMCerts(slices.CompactFunc(ders, bytes.Equal)...)
}
