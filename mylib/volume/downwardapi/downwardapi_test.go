package downwardapi

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
	host.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")}
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

// The docs' example pod ("Expose Pod Information to Containers Through Files").
func examplePod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes-downwardapi-volume-example", Namespace: "default", UID: "uid-1",
			Labels:      map[string]string{"zone": "us-est-coast", "cluster": "test-cluster1", "rack": "rack-22"},
			Annotations: map[string]string{"build": "two", "builder": "john-doe"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "client-container", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")},
		}}}},
	}
}

func field(path, fp string) v1.DownwardAPIVolumeFile {
	return v1.DownwardAPIVolumeFile{Path: path, FieldRef: &v1.ObjectFieldSelector{FieldPath: fp}}
}

func res(path, r, divisor string) v1.DownwardAPIVolumeFile {
	f := v1.DownwardAPIVolumeFile{Path: path, ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "client-container", Resource: r}}
	if divisor != "" {
		f.ResourceFieldRef.Divisor = resource.MustParse(divisor)
	}
	return f
}

func spec(items ...v1.DownwardAPIVolumeFile) *volume.Spec {
	return &volume.Spec{Volume: &v1.Volume{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: items}}}}
}

func setUp(t *testing.T, p volume.VolumePlugin, s *volume.Spec, pod *v1.Pod) volume.Mounter {
	t.Helper()
	m, err := p.NewMounter(s, pod)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetUp(volume.MounterArgs{}); err != nil {
		t.Fatal(err)
	}
	return m
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFieldRefsFormattedAsUpstream(t *testing.T) {
	_, p := setup(t)
	m := setUp(t, p, spec(field("labels", "metadata.labels"), field("annotations", "metadata.annotations"),
		field("name", "metadata.name"), field("ns", "metadata.namespace"), field("uid", "metadata.uid"),
		field("zone", "metadata.labels['zone']"), field("builder", "metadata.annotations['builder']")), examplePod())
	want := map[string]string{
		"labels":      "cluster=\"test-cluster1\"\nrack=\"rack-22\"\nzone=\"us-est-coast\"",
		"annotations": "build=\"two\"\nbuilder=\"john-doe\"",
		"name":        "kubernetes-downwardapi-volume-example",
		"ns":          "default",
		"uid":         "uid-1",
		"zone":        "us-est-coast",
		"builder":     "john-doe",
	}
	for f, w := range want {
		if got := read(t, filepath.Join(m.GetPath(), f)); got != w {
			t.Errorf("%s = %q, want %q", f, got, w)
		}
	}
	fi, err := os.Stat(filepath.Join(m.GetPath(), "labels"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %o, want 0644", fi.Mode().Perm())
	}
}

func TestResourceFieldRefWithDivisorAndAllocatableDefault(t *testing.T) {
	_, p := setup(t)
	m := setUp(t, p, spec(res("cpu_limit", "limits.cpu", "1m"), res("cpu_request", "requests.cpu", "1m"),
		res("mem_limit", "limits.memory", "1Mi"), res("mem_request", "requests.memory", "1Mi"), res("cpu_limit_cores", "limits.cpu", "")), examplePod())
	want := map[string]string{
		"cpu_limit":       "500",  // the container's limit in millicores
		"cpu_request":     "250",  // its request
		"mem_limit":       "8192", // no limit: the node's allocatable, 8Gi in Mi
		"mem_request":     "32",
		"cpu_limit_cores": "1", // 500m with divisor 1, rounded up
	}
	for f, w := range want {
		if got := read(t, filepath.Join(m.GetPath(), f)); got != w {
			t.Errorf("%s = %q, want %q", f, got, w)
		}
	}
}

func TestLabelsChangeOnRemount(t *testing.T) {
	_, p := setup(t)
	pod := examplePod()
	s := spec(field("labels", "metadata.labels"))
	m := setUp(t, p, s, pod)
	pod = pod.DeepCopy()
	pod.Labels = map[string]string{"zone": "eu"}
	m2 := setUp(t, p, s, pod)
	if got := read(t, filepath.Join(m2.GetPath(), "labels")); got != `zone="eu"` {
		t.Errorf("labels after update = %q", got)
	}
	if m.GetPath() != m2.GetPath() {
		t.Error("the remount wrote elsewhere")
	}
	if !p.RequiresRemount(s) {
		t.Error("RequiresRemount false")
	}
}

func TestErrors(t *testing.T) {
	_, p := setup(t)
	for _, item := range []v1.DownwardAPIVolumeFile{
		field("x", "spec.nodeName"),
		{Path: "y", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "nope", Resource: "limits.cpu"}},
		{Path: "z", ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}},
		res("w", "limits.nvidia.com/gpu", ""),
	} {
		m, err := p.NewMounter(spec(item), examplePod())
		if err != nil {
			t.Fatal(err)
		}
		if err := m.SetUp(volume.MounterArgs{}); err == nil {
			t.Errorf("item %s: SetUp succeeded", item.Path)
		}
	}
	if _, err := ExtractFieldPathAsString(examplePod(), "spec.nodeName"); err == nil || err.Error() != "unsupported fieldPath: spec.nodeName" {
		t.Errorf("err = %v", err)
	}
}

func TestTearDown(t *testing.T) {
	_, p := setup(t)
	m := setUp(t, p, spec(field("name", "metadata.name")), examplePod())
	u, err := p.NewUnmounter("podinfo", "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := u.TearDown(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.GetPath()); !os.IsNotExist(err) {
		t.Errorf("still there: %v", err)
	}
}
