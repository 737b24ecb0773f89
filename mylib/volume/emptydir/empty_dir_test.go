package emptydir

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
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

// The tmpfs's size is upstream's: the Node's allocatable memory, the
// pod's memory limit if smaller, the volume's sizeLimit if smaller still.
func TestCalculateEmptyDirMemorySize(t *testing.T) {
	alloc := resource.MustParse("4Gi")
	limited := func(limits ...string) *v1.Pod {
		p := pod.DeepCopy()
		for _, l := range limits {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c" + l, Resources: v1.ResourceRequirements{
				Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse(l)}}})
		}
		return p
	}
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	for _, tc := range []struct {
		name      string
		pod       *v1.Pod
		sizeLimit *resource.Quantity
		want      string
	}{
		{"no limits: the node's allocatable", limited(), nil, "4Gi"},
		{"the pod's limits, summed", limited("256Mi", "256Mi"), nil, "512Mi"},
		{"a container without a limit: the node's", func() *v1.Pod {
			p := limited("256Mi")
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "free"})
			return p
		}(), nil, "4Gi"},
		{"sizeLimit below the pod's limit", limited("512Mi"), q("64Mi"), "64Mi"},
		{"sizeLimit above the pod's limit is cut", limited("512Mi"), q("1Gi"), "512Mi"},
		{"sizeLimit above the node's", limited(), q("8Gi"), "4Gi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := calculateEmptyDirMemorySize(&alloc, spec(&v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: tc.sizeLimit}), tc.pod)
			if want := resource.MustParse(tc.want); got.Cmp(want) != 0 {
				t.Errorf("size %s, want %s", got.String(), tc.want)
			}
		})
	}
}

// With Options.Tmpfs, medium Memory is a tmpfs mounted on the volume's
// directory, of the computed size (the e2e specs' "mount type of
// /test-volume: tmpfs"); TearDown unmounts it. It needs mount(2).
func TestMemoryMediumIsATmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	host := voltesting.NewFakeVolumeHost(t.TempDir())
	host.Allocatable = v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}
	var mgr volume.VolumePluginMgr
	if err := mgr.InitPlugins(ProbeVolumePluginsWith(Options{Tmpfs: true}), host); err != nil {
		t.Fatal(err)
	}
	p, err := mgr.FindPluginByName(PluginName)
	if err != nil {
		t.Fatal(err)
	}
	size := resource.MustParse("8Mi")
	m, err := p.NewMounter(spec(&v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: &size}), pod)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetUp(volume.MounterArgs{}); err != nil {
		t.Fatal(err)
	}
	dir := m.GetPath()
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) }) // should the test fail before TearDown
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type != unix.TMPFS_MAGIC {
		t.Fatalf("file system %#x, want tmpfs", fs.Type)
	}
	if got := int64(fs.Blocks) * fs.Bsize; got != size.Value() {
		t.Errorf("tmpfs of %d bytes, want %d (sizeLimit)", got, size.Value())
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.SetUp(volume.MounterArgs{}); err != nil {
		t.Fatal(err)
	}
	if mounted, _ := isTmpfsMountPoint(dir); !mounted {
		t.Fatal("not a mount point after a second SetUp")
	}
	if _, err := os.Stat(filepath.Join(dir, "f")); err != nil {
		t.Errorf("a second SetUp mounted another tmpfs over the first: %v", err)
	}
	u, err := p.NewUnmounter("cache", "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := u.TearDown(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("TearDown left the directory: %v", err)
	}
}

// With the pod's fsGroup the directory is setgid and the group's, so
// that what a container writes there is the group's too (the e2e spec
// "EmptyDir volumes when FSGroup is specified … new files should be
// created with FSGroup ownership").
func TestSetUpWithAnFSGroupMakesTheDirectorySetgid(t *testing.T) {
	_, p := setup(t)
	m, err := p.NewMounter(spec(&v1.EmptyDirVolumeSource{}), pod)
	if err != nil {
		t.Fatal(err)
	}
	gid := int64(123)
	if err := m.SetUp(volume.MounterArgs{FsGroup: &gid}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(m.GetPath())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSetgid == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("mode %v, want setgid and 0777", fi.Mode())
	}
	if os.Geteuid() == 0 {
		if g := fi.Sys().(*syscall.Stat_t); g.Gid != 123 {
			t.Errorf("group %d, want 123", g.Gid)
		}
		if err := os.WriteFile(filepath.Join(m.GetPath(), "new"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		nfi, err := os.Stat(filepath.Join(m.GetPath(), "new"))
		if err != nil {
			t.Fatal(err)
		}
		if g := nfi.Sys().(*syscall.Stat_t); g.Gid != 123 {
			t.Errorf("a new file's group %d, want 123 (setgid)", g.Gid)
		}
	}
}
