package projected

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"mykubelet/mylib/clustertrustbundle"
	"mykubelet/mylib/volume"
	voltesting "mykubelet/mylib/volume/testing"
)

func ctb(name, signer string, labels map[string]string, ders ...[]byte) *certificatesv1.ClusterTrustBundle {
	return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: voltesting.PEMCerts(ders...)}}
}

// setupCTB is setup with a ClusterTrustBundle manager over a fake
// clientset holding ctbs.
func setupCTB(t *testing.T, ctbs ...*certificatesv1.ClusterTrustBundle) (*fake.Clientset, volume.VolumePlugin) {
	t.Helper()
	host, p := setup(t)
	client := fake.NewClientset()
	for _, c := range ctbs {
		if _, err := client.CertificatesV1().ClusterTrustBundles().Create(context.Background(), c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	host.TrustBundles = clustertrustbundle.NewInformerManager(ctx, client)
	return client, p
}

func ctbVolume(mode int32, srcs ...*v1.ClusterTrustBundleProjection) *volume.Spec {
	var sources []v1.VolumeProjection
	for _, s := range srcs {
		sources = append(sources, v1.VolumeProjection{ClusterTrustBundle: s})
	}
	return &volume.Spec{Volume: &v1.Volume{Name: "trust", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		DefaultMode: &mode, Sources: sources}}}}
}

func TestClusterTrustBundleByName(t *testing.T) {
	a, b := voltesting.NewRootCA(t, "a"), voltesting.NewRootCA(t, "b")
	_, p := setupCTB(t, ctb("foo", "", nil, b, a, b), ctb("bar", "", nil, voltesting.NewRootCA(t, "c")))
	m, err := setUp(t, p, ctbVolume(0o440, &v1.ClusterTrustBundleProjection{Name: ptr.To("foo"), Path: "ca/foo.pem"}))
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(m.GetPath(), "ca/foo.pem")
	if got, want := read(t, f), voltesting.SortedPEMCerts(a, b); got != want {
		t.Errorf("ca/foo.pem =\n%s\nwant foo's two certificates, each once, in DER order:\n%s", got, want)
	}
	fi, err := os.Stat(f)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o440 {
		t.Errorf("mode %o, want 0440 (defaultMode)", fi.Mode().Perm())
	}
}

func TestClusterTrustBundleBySignerAndLabelSelector(t *testing.T) {
	r1, r2, r3, r4, r5 := voltesting.NewRootCA(t, "1"), voltesting.NewRootCA(t, "2"), voltesting.NewRootCA(t, "3"), voltesting.NewRootCA(t, "4"), voltesting.NewRootCA(t, "5")
	const signer = "example.com/signer"
	_, p := setupCTB(t,
		ctb("example.com:signer:one", signer, map[string]string{"env": "prod"}, r1, r2),
		ctb("example.com:signer:two", signer, map[string]string{"env": "prod"}, r3, r2),
		ctb("example.com:signer:three", signer, map[string]string{"env": "test"}, r4),
		ctb("example.com:other:one", "example.com/other", map[string]string{"env": "prod"}, r5),
		ctb("no-signer", "", map[string]string{"env": "prod"}, r5))
	for _, tc := range []struct {
		name     string
		selector *metav1.LabelSelector
		optional bool
		want     string // "" with wantErr
		wantErr  string
	}{
		{name: "matching labels: the signer's prod bundles, deduplicated", selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}, want: voltesting.SortedPEMCerts(r1, r2, r3)},
		{name: "an empty selector: every bundle of the signer", selector: &metav1.LabelSelector{}, want: voltesting.SortedPEMCerts(r1, r2, r3, r4)},
		{name: "a nil selector matches none: optional, an empty file", selector: nil, optional: true, want: ""},
		{name: "a nil selector matches none: not optional, an error", selector: nil, wantErr: "combination of signerName and labelSelector matched zero ClusterTrustBundles"},
		{name: "no bundle matches: optional, an empty file", selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "staging"}}, optional: true, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := setUp(t, p, ctbVolume(0o644, &v1.ClusterTrustBundleProjection{SignerName: ptr.To(signer),
				LabelSelector: tc.selector, Optional: &tc.optional, Path: "bundle.pem"}))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := read(t, filepath.Join(m.GetPath(), "bundle.pem")); got != tc.want {
				t.Errorf("bundle.pem =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestClusterTrustBundleMissing(t *testing.T) {
	_, p := setupCTB(t)
	m, err := setUp(t, p, ctbVolume(0o644, &v1.ClusterTrustBundleProjection{Name: ptr.To("nope"), Optional: ptr.To(true), Path: "ca.pem"}))
	if err != nil {
		t.Fatalf("optional: %v", err)
	}
	if got := read(t, filepath.Join(m.GetPath(), "ca.pem")); got != "" {
		t.Errorf("optional and missing: ca.pem = %q, want an empty file", got)
	}

	s := ctbVolume(0o644, &v1.ClusterTrustBundleProjection{Name: ptr.To("nope"), Path: "ca.pem"})
	s.Volume.Name = "required"
	m, err = setUp(t, p, s)
	want := `while getting ClusterTrustBundle: clustertrustbundle.certificates.k8s.io "nope" not found`
	if err == nil || err.Error() != want {
		t.Fatalf("not optional: err = %v, want %q", err, want)
	}
	if _, err := os.Stat(m.GetPath()); !os.IsNotExist(err) {
		t.Errorf("the volume's directory was made though its setup failed: %v", err)
	}
}

func TestClusterTrustBundleChangeRewritesTheFile(t *testing.T) {
	old, renewed := voltesting.NewRootCA(t, "old"), voltesting.NewRootCA(t, "new")
	client, p := setupCTB(t, ctb("foo", "", nil, old))
	m, err := setUp(t, p, ctbVolume(0o644, &v1.ClusterTrustBundleProjection{Name: ptr.To("foo"), Path: "foo.pem"}))
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(m.GetPath(), "foo.pem")
	if got := read(t, f); got != voltesting.PEMCerts(old) {
		t.Fatalf("foo.pem = %q before the change", got)
	}
	if _, err := client.CertificatesV1().ClusterTrustBundles().Update(context.Background(), ctb("foo", "", nil, old, renewed), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The remount the volume manager does at the pod's next sync: SetUp
	// again, once the informer has seen the update.
	want := voltesting.SortedPEMCerts(old, renewed)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := m.SetUp(volume.MounterArgs{}); err != nil {
			t.Fatal(err)
		}
		got := read(t, f)
		if got == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("foo.pem after the update =\n%s\nwant\n%s", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
