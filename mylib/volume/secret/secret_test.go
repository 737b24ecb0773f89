package secret

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mykubelet/mylib/volume"
	voltesting "mykubelet/mylib/volume/testing"
)

func setup(t *testing.T) (*voltesting.FakeVolumeHost, volume.VolumePlugin) {
	t.Helper()
	host := voltesting.NewFakeVolumeHost(t.TempDir())
	var mgr volume.VolumePluginMgr
	if err := mgr.InitPlugins(ProbeVolumePlugins(), host); err != nil {
		t.Fatal(err)
	}
	p, err := mgr.FindPluginBySpec(spec(&v1.SecretVolumeSource{}))
	if err != nil {
		t.Fatal(err)
	}
	return host, p
}

func spec(src *v1.SecretVolumeSource) *volume.Spec {
	return &volume.Spec{Volume: &v1.Volume{Name: "creds", VolumeSource: v1.VolumeSource{Secret: src}}}
}

func mount(t *testing.T, p volume.VolumePlugin, s *volume.Spec) (volume.Mounter, error) {
	t.Helper()
	m, err := p.NewMounter(s, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"}})
	if err != nil {
		t.Fatal(err)
	}
	return m, m.SetUp(volume.MounterArgs{})
}

func TestSecretKeysBecomeFiles(t *testing.T) {
	host, p := setup(t)
	host.SetSecret(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}, Data: map[string][]byte{"username": []byte("admin"), "password": []byte("s3cret")}})
	m400 := int32(0o400)
	m, err := mount(t, p, spec(&v1.SecretVolumeSource{SecretName: "db", Items: []v1.KeyToPath{{Key: "password", Path: "pw", Mode: &m400}, {Key: "username", Path: "user"}}}))
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(filepath.Dir(m.GetPath())) != "kubernetes.io~secret" {
		t.Errorf("path %s not under kubernetes.io~secret", m.GetPath())
	}
	b, err := os.ReadFile(filepath.Join(m.GetPath(), "pw"))
	if err != nil || string(b) != "s3cret" {
		t.Fatalf("pw = %q, %v", b, err)
	}
	for f, want := range map[string]os.FileMode{"pw": 0o400, "user": 0o644} {
		fi, err := os.Stat(filepath.Join(m.GetPath(), f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %o, want %o", f, fi.Mode().Perm(), want)
		}
	}
}

func TestMissingSecretAndKey(t *testing.T) {
	host, p := setup(t)
	if _, err := mount(t, p, spec(&v1.SecretVolumeSource{SecretName: "x"})); err == nil || err.Error() != `secret "x" not found` {
		t.Errorf("err = %v, want secret \"x\" not found", err)
	}
	yes := true
	if _, err := mount(t, p, spec(&v1.SecretVolumeSource{SecretName: "x", Optional: &yes})); err != nil {
		t.Errorf("optional missing secret: %v", err)
	}
	host.SetSecret(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}, Data: map[string][]byte{"a": []byte("A")}})
	_, err := mount(t, p, spec(&v1.SecretVolumeSource{SecretName: "db", Items: []v1.KeyToPath{{Key: "nope", Path: "n"}}}))
	if err == nil || err.Error() != "references non-existent secret key: nope" {
		t.Errorf("err = %v", err)
	}
}

func TestUpdateAndTearDown(t *testing.T) {
	host, p := setup(t)
	s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}, Data: map[string][]byte{"pw": []byte("1")}}
	host.SetSecret(s)
	m, err := mount(t, p, spec(&v1.SecretVolumeSource{SecretName: "db"}))
	if err != nil {
		t.Fatal(err)
	}
	s.Data["pw"] = []byte("2")
	host.SetSecret(s)
	if err := m.SetUp(volume.MounterArgs{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(m.GetPath(), "pw")); string(b) != "2" {
		t.Errorf("pw = %q after the update, want 2", b)
	}
	u, err := p.NewUnmounter("creds", "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := u.TearDown(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.GetPath()); !os.IsNotExist(err) {
		t.Errorf("directory still there: %v", err)
	}
}
