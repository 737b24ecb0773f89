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

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// PodCertificateSigner is a CA acting as a PodCertificateRequest signer:
// a test issues the requests the kubelet files with it.
type PodCertificateSigner struct {
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
	// CADER is the CA's certificate, the chain's last.
	CADER []byte
}

// NewPodCertificateSigner makes the signer's CA, valid a day.
func NewPodCertificateSigner(t gotesting.TB) *PodCertificateSigner {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pod-certificate-signer"},
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &PodCertificateSigner{key: key, cert: cert, CADER: der}
}

// Issue sets pcr's status as a signer does: the Issued condition, a
// chain (a leaf for the key of the request's stubPKCS10Request, valid
// from notBefore to notAfter, then the CA), and the three times. The
// caller writes it with UpdateStatus. It returns the leaf's DER.
func (s *PodCertificateSigner) Issue(t gotesting.TB, pcr *certificatesv1.PodCertificateRequest, notBefore, beginRefreshAt, notAfter time.Time) []byte {
	t.Helper()
	csr, err := x509.ParseCertificateRequest(pcr.Spec.StubPKCS10Request)
	if err != nil {
		t.Fatal(err)
	}
	notBefore, notAfter = notBefore.Truncate(time.Second), notAfter.Truncate(time.Second)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: pcr.Spec.PodName},
		NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	leaf, err := x509.CreateCertificate(rand.Reader, tmpl, s.cert, csr.PublicKey, s.key)
	if err != nil {
		t.Fatal(err)
	}
	pcr.Status = certificatesv1.PodCertificateRequestStatus{
		Conditions: []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue,
			Reason: "Issued", Message: "issued by the test signer", LastTransitionTime: metav1.Now()}},
		CertificateChain: PEMCerts(leaf, s.CADER),
		NotBefore:        &metav1.Time{Time: notBefore},
		BeginRefreshAt:   &metav1.Time{Time: beginRefreshAt.Truncate(time.Second)},
		NotAfter:         &metav1.Time{Time: notAfter},
	}
	return leaf
}
