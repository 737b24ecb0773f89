package hostpath

import (
	"os"
	"path/filepath"
	"strings"
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

func spec(path string, typ v1.HostPathType) *volume.Spec {
	src := &v1.HostPathVolumeSource{Path: path}
	if typ != "" {
		src.Type = &typ
	}
	return &volume.Spec{Volume: &v1.Volume{Name: "logs", VolumeSource: v1.VolumeSource{HostPath: src}}}
}

var pod = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"}}

func setUp(t *testing.T, p volume.VolumePlugin, s *volume.Spec) (volume.Mounter, error) {
	t.Helper()
	m, err := p.NewMounter(s, pod)
	if err != nil {
		return nil, err
	}
	return m, m.SetUp(volume.MounterArgs{})
}

func TestPathIsMappedUnderTheHostRoot(t *testing.T) {
	host, p := setup(t)
	m, err := setUp(t, p, spec("/var/log/app", v1.HostPathDirectoryOrCreate))
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(host.Root, "host", "var/log/app")
	if m.GetPath() != want {
		t.Fatalf("GetPath = %s, want %s", m.GetPath(), want)
	}
	if fi, err := os.Stat(want); err != nil || !fi.IsDir() {
		t.Errorf("DirectoryOrCreate did not create %s: %v", want, err)
	}
	if _, err := os.Stat("/var/log/app"); err == nil && strings.HasPrefix(want, "/var/log") {
		t.Error("the real host path was used")
	}
}

// TestOnARealRuntimeThePathIsTheMachines: with the host root "/" (a real
// runtime's kubelet), the path is the machine's own, as upstream's, and a
// symlink on it may lead anywhere: nothing is outside "/".
func TestOnARealRuntimeThePathIsTheMachines(t *testing.T) {
	host, p := setup(t)
	host.HostPathRoot = "/"
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(dir, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{dir, filepath.Join(dir, "elsewhere"), filepath.Join(dir, "new")} {
		m, err := setUp(t, p, spec(path, v1.HostPathDirectoryOrCreate))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if m.GetPath() != path {
			t.Errorf("GetPath = %s, want the machine's %s", m.GetPath(), path)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "new")); err != nil || !fi.IsDir() {
		t.Errorf("DirectoryOrCreate made nothing at the machine's path: %v", err)
	}
}

func TestTypes(t *testing.T) {
	host, p := setup(t)
	root := filepath.Join(host.Root, "host")
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/app.conf"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path    string
		typ     v1.HostPathType
		wantErr string
	}{
		{"/etc", v1.HostPathDirectory, ""},
		{"/etc/app.conf", v1.HostPathFile, ""},
		{"/etc/app.conf", v1.HostPathDirectory, "hostPath type check failed: /etc/app.conf is not a directory"},
		{"/nope", v1.HostPathDirectory, "hostPath type check failed: /nope is not a directory"},
		{"/nope", v1.HostPathFile, "hostPath type check failed: /nope is not a file"},
		{"/etc", v1.HostPathFile, "hostPath type check failed: /etc is not a file"},
		{"/etc/new.log", v1.HostPathFileOrCreate, ""},
		{"/nope/new.log", v1.HostPathFileOrCreate, "no such file or directory"},
		{"/etc/app.conf", v1.HostPathSocket, "hostPath type check failed: /etc/app.conf is not a socket file"},
		{"/anything", "", ""},
		{"/etc", "Bogus", "Bogus is an invalid volume type"},
	}
	for _, c := range cases {
		_, err := setUp(t, p, spec(c.path, c.typ))
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s %q: %v", c.path, c.typ, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s %q: err = %v, want %q", c.path, c.typ, err, c.wantErr)
		}
	}
	if fi, err := os.Stat(filepath.Join(root, "etc/new.log")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("FileOrCreate made no file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "anything")); !os.IsNotExist(err) {
		t.Errorf("type \"\" created the path (%v); it checks nothing and creates nothing", err)
	}
}

func TestEscapesRefused(t *testing.T) {
	host, p := setup(t)
	if _, err := setUp(t, p, spec("/var/../../etc", v1.HostPathDirectoryOrCreate)); err == nil || !strings.Contains(err.Error(), "must not contain '..'") {
		t.Errorf("err = %v, want the '..' refusal", err)
	}
	// A symlink under the root that points out of it: neither the path
	// itself nor anything below it may be used.
	outside := t.TempDir()
	root := filepath.Join(host.Root, "host")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "evil")); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/evil", "/evil/sub"} {
		if _, err := setUp(t, p, spec(path, v1.HostPathDirectoryOrCreate)); err == nil || !strings.Contains(err.Error(), "leads out of it") {
			t.Errorf("%s: err = %v, want the symlink refusal", path, err)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "sub")); !os.IsNotExist(err) {
		t.Errorf("a directory was created outside the root (%v)", err)
	}
	// A symlink that stays inside is fine.
	if err := os.MkdirAll(filepath.Join(root, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("data", filepath.Join(root, "alias")); err != nil {
		t.Fatal(err)
	}
	if _, err := setUp(t, p, spec("/alias", v1.HostPathDirectory)); err != nil {
		t.Errorf("an inside symlink: %v", err)
	}
}

func TestTearDownKeepsTheContent(t *testing.T) {
	_, p := setup(t)
	m, err := setUp(t, p, spec("/data", v1.HostPathDirectoryOrCreate))
	if err != nil {
		t.Fatal(err)
	}
	u, err := p.NewUnmounter("logs", "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := u.TearDown(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.GetPath()); err != nil {
		t.Errorf("TearDown removed the hostPath content: %v", err)
	}
}

func TestReadOnlyAttribute(t *testing.T) {
	_, p := setup(t)
	s := spec("/data", "")
	s.ReadOnly = true
	m, err := p.NewMounter(s, pod)
	if err != nil {
		t.Fatal(err)
	}
	if a := m.GetAttributes(); !a.ReadOnly || a.Managed {
		t.Errorf("attributes %+v", a)
	}
}
