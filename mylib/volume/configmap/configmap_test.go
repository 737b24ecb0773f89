package configmap

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
	p, err := mgr.FindPluginByName(PluginName)
	if err != nil {
		t.Fatal(err)
	}
	return host, p
}

func testPod() *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"}}
}

func spec(src *v1.ConfigMapVolumeSource) *volume.Spec {
	return &volume.Spec{Volume: &v1.Volume{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: src}}}
}

func mount(t *testing.T, p volume.VolumePlugin, s *volume.Spec) (volume.Mounter, error) {
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

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestEveryKeyBecomesAFileWithDefaultMode0644(t *testing.T) {
	host, p := setup(t)
	host.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "game"},
		Data: map[string]string{"game.properties": "lives=3"}, BinaryData: map[string][]byte{"blob": {0, 1}}})
	m, err := mount(t, p, spec(&v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "game"}}))
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(host.Root, "pods", "uid-1", "volumes", "kubernetes.io~configmap", "config")
	if m.GetPath() != want {
		t.Fatalf("GetPath = %s, want %s", m.GetPath(), want)
	}
	if got := read(t, filepath.Join(want, "game.properties")); got != "lives=3" {
		t.Errorf("game.properties = %q", got)
	}
	if got := read(t, filepath.Join(want, "blob")); got != "\x00\x01" {
		t.Errorf("blob = %q", got)
	}
	if got := mode(t, filepath.Join(want, "game.properties")); got != 0o644 {
		t.Errorf("mode %o, want 0644", got)
	}
	if got := mode(t, want); got != 0o755 {
		t.Errorf("volume dir mode %o, want 0755", got)
	}
	if a := m.GetAttributes(); !a.ReadOnly || !a.Managed {
		t.Errorf("attributes %+v, want read-only and managed", a)
	}
	if !p.RequiresRemount(spec(nil)) {
		t.Error("RequiresRemount false, want true")
	}
}

func TestItemsAndModes(t *testing.T) {
	host, p := setup(t)
	host.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"},
		Data: map[string]string{"a": "A", "b": "B", "c": "C"}})
	dm, m400 := int32(0o640), int32(0o400)
	m, err := mount(t, p, spec(&v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, DefaultMode: &dm,
		Items: []v1.KeyToPath{{Key: "a", Path: "dir/a.txt", Mode: &m400}, {Key: "b", Path: "b.txt"}}}))
	if err != nil {
		t.Fatal(err)
	}
	dir := m.GetPath()
	if got := read(t, filepath.Join(dir, "dir/a.txt")); got != "A" {
		t.Errorf("dir/a.txt = %q", got)
	}
	if got := mode(t, filepath.Join(dir, "dir/a.txt")); got != 0o400 {
		t.Errorf("dir/a.txt mode %o, want 0400 (item mode)", got)
	}
	if got := mode(t, filepath.Join(dir, "b.txt")); got != 0o640 {
		t.Errorf("b.txt mode %o, want 0640 (defaultMode)", got)
	}
	for _, absent := range []string{"a", "b", "c"} {
		if _, err := os.Lstat(filepath.Join(dir, absent)); err == nil {
			t.Errorf("%s is present; only the items should be", absent)
		}
	}
}

func TestMissingConfigMapIsUpstreamsErrorUnlessOptional(t *testing.T) {
	_, p := setup(t)
	_, err := mount(t, p, spec(&v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "x"}}))
	if err == nil || err.Error() != `configmap "x" not found` {
		t.Fatalf("err = %v, want configmap \"x\" not found", err)
	}
	yes := true
	m, err := mount(t, p, spec(&v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "x"}, Optional: &yes}))
	if err != nil {
		t.Fatalf("optional: %v", err)
	}
	entries, err := os.ReadDir(m.GetPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name()[0] != '.' {
			t.Errorf("optional missing ConfigMap: volume holds %s, want empty", e.Name())
		}
	}
}

func TestMissingKeyIsAnErrorUnlessOptional(t *testing.T) {
	host, p := setup(t)
	host.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}, Data: map[string]string{"a": "A"}})
	items := []v1.KeyToPath{{Key: "a", Path: "a"}, {Key: "missing-key", Path: "m"}}
	_, err := mount(t, p, spec(&v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Items: items}))
	if err == nil || err.Error() != "configmap references non-existent config key: missing-key" {
		t.Fatalf("err = %v", err)
	}
	yes := true
	m, err := mount(t, p, spec(&v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Items: items, Optional: &yes}))
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(m.GetPath(), "a")); got != "A" {
		t.Errorf("a = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(m.GetPath(), "m")); err == nil {
		t.Error("the missing optional key made a file")
	}
}

func TestSetUpAgainFollowsTheConfigMap(t *testing.T) {
	host, p := setup(t)
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}, Data: map[string]string{"a": "1", "gone": "x"}}
	host.SetConfigMap(cm)
	m, err := mount(t, p, spec(&v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}))
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"a": "2", "new": "n"}
	host.SetConfigMap(cm)
	if err := m.SetUp(volume.MounterArgs{}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(m.GetPath(), "a")); got != "2" {
		t.Errorf("a = %q after the update, want 2", got)
	}
	if got := read(t, filepath.Join(m.GetPath(), "new")); got != "n" {
		t.Errorf("new = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(m.GetPath(), "gone")); !os.IsNotExist(err) {
		t.Errorf("a removed key is still visible (%v)", err)
	}
	if _, err := os.Readlink(filepath.Join(m.GetPath(), "..data")); err != nil {
		t.Errorf("not written by the atomic writer: %v", err)
	}
}

func TestTearDownRemovesTheDirectory(t *testing.T) {
	host, p := setup(t)
	host.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}, Data: map[string]string{"a": "1"}})
	m, err := mount(t, p, spec(&v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}))
	if err != nil {
		t.Fatal(err)
	}
	u, err := p.NewUnmounter("config", "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	if u.GetPath() != m.GetPath() {
		t.Fatalf("unmounter path %s, mounter path %s", u.GetPath(), m.GetPath())
	}
	if err := u.TearDown(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.GetPath()); !os.IsNotExist(err) {
		t.Errorf("volume directory still there: %v", err)
	}
	if err := u.TearDown(); err != nil {
		t.Errorf("second TearDown: %v", err)
	}
}

func TestVolumeNameThatIsAPathRefused(t *testing.T) {
	_, p := setup(t)
	s := spec(&v1.ConfigMapVolumeSource{})
	s.Volume.Name = "../../etc"
	if _, err := p.NewMounter(s, testPod()); err == nil {
		t.Error("NewMounter accepted a volume name with a slash")
	}
	if _, err := p.NewUnmounter("..", "uid-1"); err == nil {
		t.Error("NewUnmounter accepted ..")
	}
}
