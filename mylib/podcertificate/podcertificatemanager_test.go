package podcertificate_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"mykubelet/mylib/podcertificate"
	voltesting "mykubelet/mylib/volume/testing"
)

func TestGenerateKeyEveryKeyType(t *testing.T) {
	for kt, check := range map[string]func(crypto.Signer) bool{
		"RSA3072": func(k crypto.Signer) bool { r, ok := k.(*rsa.PrivateKey); return ok && r.N.BitLen() == 3072 },
		"RSA4096": func(k crypto.Signer) bool { r, ok := k.(*rsa.PrivateKey); return ok && r.N.BitLen() == 4096 },
		"ECDSAP256": func(k crypto.Signer) bool {
			e, ok := k.(*ecdsa.PrivateKey)
			return ok && e.Curve.Params().Name == "P-256"
		},
		"ECDSAP384": func(k crypto.Signer) bool {
			e, ok := k.(*ecdsa.PrivateKey)
			return ok && e.Curve.Params().Name == "P-384"
		},
		"ECDSAP521": func(k crypto.Signer) bool {
			e, ok := k.(*ecdsa.PrivateKey)
			return ok && e.Curve.Params().Name == "P-521"
		},
		"ED25519": func(k crypto.Signer) bool { _, ok := k.(ed25519.PrivateKey); return ok },
	} {
		k, err := podcertificate.GenerateKey(kt)
		require.NoError(t, err, kt)
		assert.True(t, check(k), "%s: %T", kt, k)
	}
	_, err := podcertificate.GenerateKey("DSA1024")
	assert.ErrorContains(t, err, `unknown key type "DSA1024"`)
}

func certPod() *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "pod-uid"},
		Spec: v1.PodSpec{NodeName: "n1", ServiceAccountName: "sa", Volumes: []v1.Volume{{Name: "certs", VolumeSource: v1.VolumeSource{
			Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "x"}}},
				{PodCertificate: &v1.PodCertificateProjection{SignerName: "example.com/signer", KeyType: "ECDSAP256",
					MaxExpirationSeconds: ptr.To[int32](3600), CredentialBundlePath: "bundle.pem",
					UserAnnotations: map[string]string{"example.com/a": "b"}}},
			}}}}}}}
}

// TestNewPodCertificateRequest: the request names the pod, its service
// account and the node, copies the projection's fields, and its stub
// PKCS#10 request carries the key's public key, signed with the key.
func TestNewPodCertificateRequest(t *testing.T) {
	pod := certPod()
	keyPEM, pcr, err := podcertificate.NewPodCertificateRequest(pod, "sa-uid", "n1", "node-uid", pod.Spec.Volumes[0].Projected.Sources[1].PodCertificate)
	require.NoError(t, err)
	assert.Equal(t, certificatesv1.PodCertificateRequestSpec{SignerName: "example.com/signer", PodName: "p", PodUID: "pod-uid",
		ServiceAccountName: "sa", ServiceAccountUID: "sa-uid", NodeName: "n1", NodeUID: "node-uid",
		MaxExpirationSeconds: ptr.To[int32](3600), StubPKCS10Request: pcr.Spec.StubPKCS10Request,
		UnverifiedUserAnnotations: map[string]string{"example.com/a": "b"}}, pcr.Spec)
	assert.Equal(t, "ns", pcr.Namespace)
	assert.Equal(t, []metav1.OwnerReference{{APIVersion: "core/v1", Kind: "Pod", Name: "p", UID: "pod-uid"}}, pcr.OwnerReferences)

	block, rest := pem.Decode(keyPEM)
	require.NotNil(t, block)
	assert.Empty(t, rest)
	assert.Equal(t, "PRIVATE KEY", block.Type)
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	require.NoError(t, err)
	csr, err := x509.ParseCertificateRequest(pcr.Spec.StubPKCS10Request)
	require.NoError(t, err)
	require.NoError(t, csr.CheckSignature(), "the key's proof of possession")
	assert.True(t, key.(*ecdsa.PrivateKey).PublicKey.Equal(csr.PublicKey), "the request is for the key")
	assert.Empty(t, csr.Subject.String())
}

type fixture struct {
	client  *fake.Clientset
	clk     *testingclock.FakeClock
	m       *podcertificate.IssuingManager
	pod     *v1.Pod
	created int
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{pod: certPod(), clk: testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	f.client = fake.NewClientset(
		&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sa", UID: "sa-uid"}},
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}})
	// The fake does not generate names.
	f.client.PrependReactor("create", "podcertificaterequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pcr := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.PodCertificateRequest)
		f.created++
		pcr.Name = fmt.Sprintf("%sgen%d", pcr.GenerateName, f.created)
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f.m = podcertificate.NewIssuingManager(ctx, f.client, "n1", f.clk)
	f.m.Jitter = func() time.Duration { return 0 }
	return f
}

func (f *fixture) get() ([]byte, []byte, error) {
	return f.m.GetPodCertificateCredentialBundle(context.Background(), f.pod, "certs", 1)
}

func (f *fixture) pcrs(t *testing.T) []certificatesv1.PodCertificateRequest {
	l, err := f.client.CertificatesV1().PodCertificateRequests("ns").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	return l.Items
}

// issue has the signer issue the request, and waits until the manager
// serves its chain.
func (f *fixture) issue(t *testing.T, s *voltesting.PodCertificateSigner, name string, beginRefreshAt time.Time) (key, chain []byte) {
	pcr, err := f.client.CertificatesV1().PodCertificateRequests("ns").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	now := f.clk.Now()
	s.Issue(t, pcr, now, beginRefreshAt, now.Add(2*time.Hour))
	_, err = f.client.CertificatesV1().PodCertificateRequests("ns").UpdateStatus(context.Background(), pcr, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		k, c, err := f.get()
		key, chain = k, c
		return err == nil && string(c) == pcr.Status.CertificateChain
	}, 5*time.Second, 10*time.Millisecond)
	return key, chain
}

// TestIssueThenRefreshAtBeginRefreshAt: no bundle until the signer
// issues the request (the mount fails, the pod waits); then the key and
// the chain; at beginRefreshAt a second request with a new key, the old
// bundle served until it is issued.
func TestIssueThenRefreshAtBeginRefreshAt(t *testing.T) {
	f := newFixture(t)
	signer := voltesting.NewPodCertificateSigner(t)

	_, _, err := f.get()
	require.ErrorIs(t, err, podcertificate.ErrNotIssuedYet)
	_, _, err = f.get()
	require.ErrorIs(t, err, podcertificate.ErrNotIssuedYet)
	pcrs := f.pcrs(t)
	require.Len(t, pcrs, 1, "one request while it waits")
	assert.Equal(t, "sa-uid", string(pcrs[0].Spec.ServiceAccountUID))
	assert.Equal(t, "node-uid", string(pcrs[0].Spec.NodeUID))

	refreshAt := f.clk.Now().Add(time.Hour)
	key1, chain1 := f.issue(t, signer, pcrs[0].Name, refreshAt)
	csr, err := x509.ParseCertificateRequest(pcrs[0].Spec.StubPKCS10Request)
	require.NoError(t, err)
	block, _ := pem.Decode(key1)
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	require.NoError(t, err)
	assert.True(t, k.(*ecdsa.PrivateKey).PublicKey.Equal(csr.PublicKey), "the key the request was for")
	assert.Len(t, f.pcrs(t), 1, "no refresh before beginRefreshAt")

	f.clk.SetTime(refreshAt.Add(-time.Second))
	_, _, err = f.get()
	require.NoError(t, err)
	assert.Len(t, f.pcrs(t), 1, "no refresh before beginRefreshAt")

	f.clk.SetTime(refreshAt)
	key, chain, err := f.get()
	require.NoError(t, err)
	assert.Equal(t, key1, key, "the old bundle while the refresh waits")
	assert.Equal(t, chain1, chain)
	pcrs = f.pcrs(t)
	require.Len(t, pcrs, 2, "a refresh request at beginRefreshAt")
	refresh := pcrs[0]
	if refresh.Name == "req-gen1" {
		refresh = pcrs[1]
	}
	assert.NotEqual(t, pcrs[0].Spec.StubPKCS10Request, pcrs[1].Spec.StubPKCS10Request, "a new key")

	key2, chain2 := f.issue(t, signer, refresh.Name, refreshAt.Add(time.Hour))
	assert.NotEqual(t, key1, key2)
	assert.NotEqual(t, chain1, chain2)

	f.m.ForgetPod(context.Background(), f.pod)
	_, _, err = f.get()
	require.ErrorIs(t, err, podcertificate.ErrNotIssuedYet, "forgotten: a new first request")
	assert.Len(t, f.pcrs(t), 3)
}

// TestDeniedIsFinal: a denied request fails the source for good, with
// the signer's reason; no new request is filed.
func TestDeniedIsFinal(t *testing.T) {
	f := newFixture(t)
	_, _, err := f.get()
	require.ErrorIs(t, err, podcertificate.ErrNotIssuedYet)
	pcr := f.pcrs(t)[0]
	pcr.Status.Conditions = []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeDenied, Status: metav1.ConditionTrue,
		Reason: certificatesv1.PodCertificateRequestConditionUnsupportedKeyType, Message: "use ED25519", LastTransitionTime: metav1.Now()}}
	_, err = f.client.CertificatesV1().PodCertificateRequests("ns").UpdateStatus(context.Background(), &pcr, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, _, err = f.get()
		return err != podcertificate.ErrNotIssuedYet
	}, 5*time.Second, 10*time.Millisecond)
	assert.EqualError(t, err, `PodCertificateRequest was permanently denied: reason="UnsupportedKeyType" message="use ED25519"`)
	f.clk.Step(time.Hour)
	_, _, err = f.get()
	assert.ErrorContains(t, err, "permanently denied")
	assert.Len(t, f.pcrs(t), 1)
}

func TestCleanCertificateChain(t *testing.T) {
	a, b := voltesting.NewRootCA(t, "a"), voltesting.NewRootCA(t, "b")
	in := "leaf:\n" + string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"X": "y"}, Bytes: a})) +
		"intermediate:\n" + voltesting.PEMCerts(b) + "trailing"
	assert.Equal(t, voltesting.PEMCerts(a, b), string(podcertificate.CleanCertificateChain([]byte(in))))
}
