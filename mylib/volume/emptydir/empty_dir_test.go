package emptydir

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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

func spec(src *v1.EmptyDirVolumeSource) *volume.Spec {
	return &volume.Spec{Volume: &v1.Volume{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: src}}}
}

var pod = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"}}

func TestSetUpMakesA0777DirectoryThatKeepsContent(t *testing.T) {
	host, p := setup(t)
	for _, medium := range []v1.StorageMedium{v1.StorageMediumDefault, v1.StorageMediumMemory} {
		m, err := p.NewMounter(spec(&v1.EmptyDirVolumeSource{Medium: medium}), pod)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.SetUp(volume.MounterArgs{}); err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(host.Root, "pods/uid-1/volumes/kubernetes.io~empty-dir/cache")
		if m.GetPath() != want {
			t.Fatalf("path %s, want %s", m.GetPath(), want)
		}
		fi, err := os.Stat(want)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o777 {
			t.Errorf("medium %q: mode %o, want 0777", medium, fi.Mode().Perm())
		}
		if err := os.WriteFile(filepath.Join(want, "shared"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := m.SetUp(volume.MounterArgs{}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(want, "shared")); err != nil {
			t.Errorf("a second SetUp lost the containers' file: %v", err)
		}
		if m.GetAttributes().ReadOnly {
			t.Error("emptyDir is read-only")
		}
		u, err := p.NewUnmounter("cache", "uid-1")
		if err != nil {
			t.Fatal(err)
		}
		if err := u.TearDown(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(want); !os.IsNotExist(err) {
			t.Errorf("TearDown left the directory: %v", err)
		}
	}
}

func TestHugePagesRefused(t *testing.T) {
	_, p := setup(t)
	if _, err := p.NewMounter(spec(&v1.EmptyDirVolumeSource{Medium: v1.StorageMediumHugePages}), pod); err == nil {
		t.Error("HugePages medium accepted")
	}
}

func TestSizeLimitRecorded(t *testing.T) {
	q := resource.MustParse("500Mi")
	if got := SizeLimit(spec(&v1.EmptyDirVolumeSource{SizeLimit: &q})); got == nil || got.Cmp(q) != 0 {
		t.Errorf("SizeLimit = %v, want 500Mi", got)
	}
	if got := SizeLimit(spec(&v1.EmptyDirVolumeSource{})); got != nil {
		t.Errorf("SizeLimit = %v, want nil", got)
	}
}
