package projected

import (
	"os"
	"path/filepath"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mykubelet/mylib/volume"
	voltesting "mykubelet/mylib/volume/testing"
)

func setup(t *testing.T) (*voltesting.FakeVolumeHost, volume.VolumePlugin) {
	t.Helper()
	host := voltesting.NewFakeVolumeHost(t.TempDir())
	host.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kube-root-ca.crt"},
		Data: map[string]string{"ca.crt": "-----BEGIN CERTIFICATE-----"}})
	var mgr volume.VolumePluginMgr
	if err := mgr.InitPlugins(ProbeVolumePlugins(), host); err != nil {
		t.Fatal(err)
	}
	p, err := mgr.FindPluginByName(PluginName)
	if err != nil {
		t.Fatal(err)
	}
	return host, p
}

func testPod() *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
		Spec: v1.PodSpec{ServiceAccountName: "default"}}
}

// kubeAPIAccess is the volume the ServiceAccount admission plugin adds to
// every pod, as the API server writes it.
func kubeAPIAccess() *volume.Spec {
	exp, mode := int64(3607), int32(0o644)
	return &volume.Spec{Volume: &v1.Volume{Name: "kube-api-access-abcde", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		DefaultMode: &mode,
		Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{ExpirationSeconds: &exp, Path: "token"}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}}}}
}

func setUp(t *testing.T, p volume.VolumePlugin, s *volume.Spec) (volume.Mounter, error) {
	t.Helper()
	m, err := p.NewMounter(s, testPod())
	if err != nil {
		t.Fatal(err)
	}
	return m, m.SetUp(volume.MounterArgs{})
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestKubeAPIAccessVolume(t *testing.T) {
	host, p := setup(t)
	m, err := setUp(t, p, kubeAPIAccess())
	if err != nil {
		t.Fatal(err)
	}
	dir := m.GetPath()
	if filepath.Base(filepath.Dir(dir)) != "kubernetes.io~projected" {
		t.Errorf("path %s", dir)
	}
	for f, want := range map[string]string{"token": "fake-token", "ca.crt": "-----BEGIN CERTIFICATE-----", "namespace": "default"} {
		if got := read(t, filepath.Join(dir, f)); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
	}
	trs := host.TokenRequests()
	if len(trs) != 1 {
		t.Fatalf("%d token requests, want 1", len(trs))
	}
	tr := trs[0]
	if tr.Namespace != "default" || tr.Name != "default" {
		t.Errorf("token for %s/%s, want default/default (the pod's service account)", tr.Namespace, tr.Name)
	}
	wantRef := authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "web", UID: "uid-1"}
	if tr.Spec.BoundObjectRef == nil || *tr.Spec.BoundObjectRef != wantRef {
		t.Errorf("BoundObjectRef = %+v, want %+v", tr.Spec.BoundObjectRef, wantRef)
	}
	if tr.Spec.ExpirationSeconds == nil || *tr.Spec.ExpirationSeconds != 3607 {
		t.Errorf("ExpirationSeconds = %v, want 3607", tr.Spec.ExpirationSeconds)
	}
	if len(tr.Spec.Audiences) != 0 {
		t.Errorf("audiences %v, want none (the API server's own)", tr.Spec.Audiences)
	}
}

func TestTokenAudienceAndDefaultExpiration(t *testing.T) {
	host, p := setup(t)
	s := &volume.Spec{Volume: &v1.Volume{Name: "vault", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Audience: "vault", Path: "vault-token"}}},
	}}}}
	m, err := setUp(t, p, s)
	if err != nil {
		t.Fatal(err)
	}
	tr := host.TokenRequests()[0]
	if len(tr.Spec.Audiences) != 1 || tr.Spec.Audiences[0] != "vault" {
		t.Errorf("audiences %v", tr.Spec.Audiences)
	}
	if *tr.Spec.ExpirationSeconds != 3600 {
		t.Errorf("ExpirationSeconds %d, want 3600", *tr.Spec.ExpirationSeconds)
	}
	fi, err := os.Stat(filepath.Join(m.GetPath(), "vault-token"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("token mode %o, want 0644 (the projected default)", fi.Mode().Perm())
	}
}

func TestSecretConfigMapSourcesDefaultModeAndUpdate(t *testing.T) {
	host, p := setup(t)
	host.SetSecret(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "mysecret"}, Data: map[string][]byte{"username": []byte("admin")}})
	host.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "myconfigmap"}, Data: map[string]string{"config": "v1"}})
	mode, m400 := int32(0o440), int32(0o400)
	s := &volume.Spec{Volume: &v1.Volume{Name: "all-in-one", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		DefaultMode: &mode,
		Sources: []v1.VolumeProjection{
			{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "mysecret"}, Items: []v1.KeyToPath{{Key: "username", Path: "my-group/my-username", Mode: &m400}}}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "myconfigmap"}, Items: []v1.KeyToPath{{Key: "config", Path: "my-group/my-config"}}}},
		},
	}}}}
	m, err := setUp(t, p, s)
	if err != nil {
		t.Fatal(err)
	}
	dir := m.GetPath()
	if got := read(t, filepath.Join(dir, "my-group/my-username")); got != "admin" {
		t.Errorf("username = %q", got)
	}
	for f, want := range map[string]os.FileMode{"my-group/my-username": 0o400, "my-group/my-config": 0o440} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %o, want %o", f, fi.Mode().Perm(), want)
		}
	}
	host.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "myconfigmap"}, Data: map[string]string{"config": "v2"}})
	if err := m.SetUp(volume.MounterArgs{}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dir, "my-group/my-config")); got != "v2" {
		t.Errorf("config after update = %q, want v2", got)
	}
}

func TestMissingSourceErrorsUnlessOptional(t *testing.T) {
	_, p := setup(t)
	src := func(optional bool) *volume.Spec {
		return &volume.Spec{Volume: &v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
			Sources: []v1.VolumeProjection{{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Optional: &optional}}},
		}}}}
	}
	if _, err := setUp(t, p, src(false)); err == nil || err.Error() != `secret "nope" not found` {
		t.Errorf("err = %v, want secret \"nope\" not found", err)
	}
	if _, err := setUp(t, p, src(true)); err != nil {
		t.Errorf("optional: %v", err)
	}
}

func TestTearDownRemovesAndForgetsTokens(t *testing.T) {
	host, p := setup(t)
	m, err := setUp(t, p, kubeAPIAccess())
	if err != nil {
		t.Fatal(err)
	}
	u, err := p.NewUnmounter("kube-api-access-abcde", "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := u.TearDown(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.GetPath()); !os.IsNotExist(err) {
		t.Errorf("still there: %v", err)
	}
	if d := host.DeletedTokens(); len(d) != 1 || d[0] != "uid-1" {
		t.Errorf("deleted tokens %v, want [uid-1]", d)
	}
}
