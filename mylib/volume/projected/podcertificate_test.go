package projected

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"mykubelet/mylib/podcertificate"
	"mykubelet/mylib/volume"
)

// stubCerts is a pod certificate manager answering one bundle, or err.
type stubCerts struct {
	key, chain []byte
	err        error
	asked      []string // volume/sourceIndex
	forgotten  []types.UID
}

func (s *stubCerts) TrackPod(context.Context, *v1.Pod) {}
func (s *stubCerts) ForgetPod(_ context.Context, pod *v1.Pod) {
	s.forgotten = append(s.forgotten, pod.UID)
}
func (s *stubCerts) GetPodCertificateCredentialBundle(_ context.Context, pod *v1.Pod, volumeName string, sourceIndex int) ([]byte, []byte, error) {
	s.asked = append(s.asked, volumeName+"/"+strconv.Itoa(sourceIndex))
	return s.key, s.chain, s.err
}

var _ podcertificate.Manager = (*stubCerts)(nil)

func pcVolume(srcs ...v1.VolumeProjection) *volume.Spec {
	mode := int32(0o600)
	return &volume.Spec{Volume: &v1.Volume{Name: "certs", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		DefaultMode: &mode, Sources: srcs}}}}
}

// TestPodCertificateFiles: the credential bundle is the key then the
// chain; keyPath and certificateChainPath each apart; the manager is
// asked for the source at its index in the volume.
func TestPodCertificateFiles(t *testing.T) {
	host, p := setup(t)
	certs := &stubCerts{key: []byte("KEY\n"), chain: []byte("LEAF\nCA\n")}
	host.PodCertificates = certs
	m, err := setUp(t, p, pcVolume(
		v1.VolumeProjection{DownwardAPI: &v1.DownwardAPIProjection{}},
		v1.VolumeProjection{PodCertificate: &v1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519",
			CredentialBundlePath: "bundle.pem", KeyPath: "tls/key.pem", CertificateChainPath: "tls/chain.pem"}}))
	if err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{"bundle.pem": "KEY\nLEAF\nCA\n", "tls/key.pem": "KEY\n", "tls/chain.pem": "LEAF\nCA\n"} {
		path := filepath.Join(m.GetPath(), f)
		if got := read(t, path); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %o, want 0600 (defaultMode)", f, fi.Mode().Perm())
		}
	}
	if len(certs.asked) != 1 || certs.asked[0] != "certs/1" {
		t.Errorf("asked %v, want [certs/1]", certs.asked)
	}
}

// TestPodCertificateNotIssuedFailsTheMount: until the signer issues the
// certificate, SetUp fails with the manager's error and writes nothing.
func TestPodCertificateNotIssuedFailsTheMount(t *testing.T) {
	host, p := setup(t)
	host.PodCertificates = &stubCerts{err: podcertificate.ErrNotIssuedYet}
	m, err := setUp(t, p, pcVolume(v1.VolumeProjection{PodCertificate: &v1.PodCertificateProjection{
		SignerName: "example.com/s", KeyType: "ED25519", CredentialBundlePath: "bundle.pem"}}))
	if !errors.Is(err, podcertificate.ErrNotIssuedYet) {
		t.Fatalf("SetUp: %v, want %v", err, podcertificate.ErrNotIssuedYet)
	}
	if _, err := os.Stat(filepath.Join(m.GetPath(), "bundle.pem")); !os.IsNotExist(err) {
		t.Errorf("bundle.pem: %v, want none", err)
	}
}

// TestTearDownForgetsThePodsCertificates: as the tokens, the pod's keys
// and certificates leave the manager with its volume.
func TestTearDownForgetsThePodsCertificates(t *testing.T) {
	host, p := setup(t)
	certs := &stubCerts{key: []byte("KEY\n"), chain: []byte("CHAIN\n")}
	host.PodCertificates = certs
	if _, err := setUp(t, p, pcVolume(v1.VolumeProjection{PodCertificate: &v1.PodCertificateProjection{
		SignerName: "example.com/s", KeyType: "ED25519", KeyPath: "k"}})); err != nil {
		t.Fatal(err)
	}
	u, err := p.NewUnmounter("certs", testPod().UID)
	if err != nil {
		t.Fatal(err)
	}
	if err := u.TearDown(); err != nil {
		t.Fatal(err)
	}
	if len(certs.forgotten) != 1 || certs.forgotten[0] != testPod().UID {
		t.Errorf("forgotten %v, want [%s]", certs.forgotten, testPod().UID)
	}
}
