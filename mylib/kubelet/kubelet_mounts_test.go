package kubelet

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/network/dns"
	"mykubelet/mylib/volume"
	"mykubelet/mylib/volume/image"
)

// fakeMounter is a mounted volume at path.
type fakeMounter struct {
	path     string
	readOnly bool
}

func (f *fakeMounter) GetPath() string                { return f.path }
func (f *fakeMounter) SetUp(volume.MounterArgs) error { return nil }
func (f *fakeMounter) GetAttributes() volume.Attributes {
	return volume.Attributes{ReadOnly: f.readOnly}
}

// mountsFixture is a pod directory with volumes under it, as the volume
// manager lays them out.
type mountsFixture struct {
	podDir string
	vols   kubecontainer.VolumeMap
}

func newMountsFixture(t *testing.T) *mountsFixture {
	t.Helper()
	return &mountsFixture{podDir: filepath.Join(t.TempDir(), "pods", "uid-web"), vols: kubecontainer.VolumeMap{}}
}

// addVolume makes a volume directory (mode 0777, as an emptyDir).
func (f *mountsFixture) addVolume(t *testing.T, name string, readOnly bool) string {
	t.Helper()
	dir := filepath.Join(f.podDir, "volumes", "kubernetes.io~empty-dir", name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.Chmod(dir, 0o777))
	f.vols[name] = kubecontainer.VolumeInfo{Mounter: &fakeMounter{path: dir, readOnly: readOnly}}
	return dir
}

// writeAtomic writes files as the atomic writer does: a timestamped
// directory, the ..data symlink to it, and user-visible symlinks through
// ..data; a previous timestamped directory is removed.
func writeAtomic(t *testing.T, dir, ts string, files map[string]string) {
	t.Helper()
	tsDir := filepath.Join(dir, ts)
	require.NoError(t, os.Mkdir(tsDir, 0o755))
	for k, v := range files {
		require.NoError(t, os.WriteFile(filepath.Join(tsDir, k), []byte(v), 0o644))
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	tmp := filepath.Join(dir, "..data_tmp")
	require.NoError(t, os.Symlink(ts, tmp))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, "..data")))
	for k := range files {
		_ = os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k))
	}
	if old != "" {
		require.NoError(t, os.RemoveAll(filepath.Join(dir, old)))
	}
}

func mountsPod(c v1.Container) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "uid-web"},
		Spec: v1.PodSpec{Containers: []v1.Container{c}}}
}

func TestMakeMountsVolumeMountsAndReadOnly(t *testing.T) {
	f := newMountsFixture(t)
	data := f.addVolume(t, "data", false)
	cfg := f.addVolume(t, "config", true) // the plugin says read-only
	pvc := f.addVolume(t, "claim", false)
	f.vols["claim"] = kubecontainer.VolumeInfo{Mounter: f.vols["claim"].Mounter, ReadOnly: true}
	c := v1.Container{Name: "app", VolumeMounts: []v1.VolumeMount{
		{Name: "data", MountPath: "/data"},
		{Name: "data", MountPath: "/data-ro", ReadOnly: true},
		{Name: "config", MountPath: "/etc/config"},
		{Name: "claim", MountPath: "/claim"},
	}}
	mounts, err := makeMounts(mountsPod(c), f.podDir, &c, "web", "", nil, f.vols, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, []kubecontainer.Mount{
		{Name: "data", ContainerPath: "/data", HostPath: data},
		{Name: "data", ContainerPath: "/data-ro", HostPath: data, ReadOnly: true},
		{Name: "config", ContainerPath: "/etc/config", HostPath: cfg, ReadOnly: true},
		{Name: "claim", ContainerPath: "/claim", HostPath: pvc, ReadOnly: true},
	}, mounts, "no /etc/hosts without pod IPs")
}

// An image volume's mount is its image, read-only (the plugin says so),
// with the subPath for the runtime to resolve inside the image; no
// directory is made on the node for it.
func TestMakeMountsImageVolume(t *testing.T) {
	f := newMountsFixture(t)
	img := image.ProbeVolumePlugins()[0]
	m, err := img.NewMounter(nil, nil)
	require.NoError(t, err)
	f.vols["img"] = kubecontainer.VolumeInfo{Mounter: m}
	spec := &runtimeapi.ImageSpec{Image: "sha256:0123", UserSpecifiedImage: "busybox:1.37"}
	c := v1.Container{Name: "app", VolumeMounts: []v1.VolumeMount{
		{Name: "img", MountPath: "/volume"},
		{Name: "img", MountPath: "/etc-of-image", SubPath: "etc"},
	}}
	mounts, err := makeMounts(mountsPod(c), f.podDir, &c, "web", "", nil, f.vols, nil, kubecontainer.ImageVolumes{"img": spec})
	require.NoError(t, err)
	assert.Equal(t, []kubecontainer.Mount{
		{Name: "img", ContainerPath: "/volume", Image: spec, ReadOnly: true},
		{Name: "img", ContainerPath: "/etc-of-image", Image: spec, ImageSubPath: "etc", ReadOnly: true},
	}, mounts)
	assert.NoDirExists(t, filepath.Join(f.podDir, "volume-subpaths"))

	c.VolumeMounts = []v1.VolumeMount{{Name: "img", MountPath: "/x", SubPath: "../etc"}}
	_, err = makeMounts(mountsPod(c), f.podDir, &c, "web", "", nil, f.vols, nil, kubecontainer.ImageVolumes{"img": spec})
	assert.EqualError(t, err, "unable to provision SubPath `../etc`: must not contain '..'")
	// Not pulled (the runtime manager gives it no image): no path to mount.
	c.VolumeMounts = []v1.VolumeMount{{Name: "img", MountPath: "/x"}}
	_, err = makeMounts(mountsPod(c), f.podDir, &c, "web", "", nil, f.vols, nil, nil)
	assert.EqualError(t, err, `path is empty for volume "img"`)
}

func TestMakeMountsMissingVolume(t *testing.T) {
	f := newMountsFixture(t)
	c := v1.Container{Name: "app", VolumeMounts: []v1.VolumeMount{{Name: "config", MountPath: "/etc/config"}}}
	_, err := makeMounts(mountsPod(c), f.podDir, &c, "web", "", nil, f.vols, nil, nil)
	assert.EqualError(t, err, `cannot find volume "config" to mount into container "app"`)
}

func TestMakeMountsSubPathFileNeverSeesUpdates(t *testing.T) {
	f := newMountsFixture(t)
	dir := f.addVolume(t, "config", true)
	writeAtomic(t, dir, "..2026_03_01_12_00_00.1", map[string]string{"app.conf": "v1"})
	c := v1.Container{Name: "app", VolumeMounts: []v1.VolumeMount{{Name: "config", MountPath: "/etc/app.conf", SubPath: "app.conf"}}}

	mounts, err := makeMounts(mountsPod(c), f.podDir, &c, "web", "", nil, f.vols, nil, nil)
	require.NoError(t, err)
	require.Len(t, mounts, 1)
	hp := mounts[0].HostPath
	assert.Equal(t, filepath.Join(f.podDir, "volume-subpaths", "config", "app", "0"), hp)
	assert.True(t, mounts[0].ReadOnly)
	b, err := os.ReadFile(hp)
	require.NoError(t, err)
	assert.Equal(t, "v1", string(b))

	// The ConfigMap changes: the volume shows v2, the subPath keeps v1,
	// also for a restarted container, as upstream.
	writeAtomic(t, dir, "..2026_03_01_12_01_00.2", map[string]string{"app.conf": "v2"})
	b, err = os.ReadFile(filepath.Join(dir, "app.conf"))
	require.NoError(t, err)
	assert.Equal(t, "v2", string(b))
	b, err = os.ReadFile(hp)
	require.NoError(t, err)
	assert.Equal(t, "v1", string(b))
	mounts, err = makeMounts(mountsPod(c), f.podDir, &c, "web", "", nil, f.vols, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, hp, mounts[0].HostPath)
	b, _ = os.ReadFile(mounts[0].HostPath)
	assert.Equal(t, "v1", string(b))
}

func TestMakeMountsSubPathDirAndSubPathExpr(t *testing.T) {
	f := newMountsFixture(t)
	dir := f.addVolume(t, "logs", false)
	c := v1.Container{Name: "app", VolumeMounts: []v1.VolumeMount{
		{Name: "logs", MountPath: "/var/log/app", SubPathExpr: "pods/$(POD_NAME)"},
		{Name: "logs", MountPath: "/shared", SubPath: "shared"},
	}}
	envs := []kubecontainer.EnvVar{{Name: "POD_NAME", Value: "web"}}
	mounts, err := makeMounts(mountsPod(c), f.podDir, &c, "web", "", nil, f.vols, envs, nil)
	require.NoError(t, err)
	require.Len(t, mounts, 2)
	assert.Equal(t, filepath.Join(dir, "pods", "web"), mounts[0].HostPath)
	assert.Equal(t, filepath.Join(dir, "shared"), mounts[1].HostPath)
	fi, err := os.Stat(filepath.Join(dir, "pods", "web"))
	require.NoError(t, err)
	assert.True(t, fi.IsDir())
	assert.Equal(t, os.FileMode(0o777), fi.Mode().Perm(), "made with the volume's mode")

	// An emptyDir on tmpfs with an fsGroup is drwxrwsrwt: a subPath made
	// in it too (the e2e spec "nonexistent volume subPath should have the
	// correct mode and owner using FSGroup" reads dgtrwxrwxrwx).
	require.NoError(t, os.Chmod(dir, 0o777|os.ModeSetgid|os.ModeSticky))
	c2 := v1.Container{Name: "app", VolumeMounts: []v1.VolumeMount{{Name: "logs", MountPath: "/test-volume", SubPath: "test-sub"}}}
	_, err = makeMounts(mountsPod(c2), f.podDir, &c2, "web", "", nil, f.vols, nil, nil)
	require.NoError(t, err)
	fi, err = os.Stat(filepath.Join(dir, "test-sub"))
	require.NoError(t, err)
	assert.Equal(t, "dgtrwxrwxrwx", fi.Mode().String())

	// A variable that is not set is an error.
	_, err = makeMounts(mountsPod(c), f.podDir, &c, "web", "", nil, f.vols, nil, nil)
	assert.EqualError(t, err, "missing value for POD_NAME")
}

func TestMakeMountsSubPathEscapeRefused(t *testing.T) {
	f := newMountsFixture(t)
	dir := f.addVolume(t, "data", false)
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "shadow"), []byte("secret"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "out")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "shadow"), filepath.Join(dir, "shadow")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "in"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in", "file"), []byte("ok"), 0o644))
	require.NoError(t, os.Symlink("in", filepath.Join(dir, "inlink")))

	for subPath, want := range map[string]string{
		"/etc":        "error SubPath `/etc` must not be an absolute path",
		"../../x":     "unable to provision SubPath `../../x`: must not contain '..'",
		"in/../../x":  "unable to provision SubPath `in/../../x`: must not contain '..'",
		"out":         `failed to prepare subPath for volumeMount "data" of container "app"`,
		"shadow":      `failed to prepare subPath for volumeMount "data" of container "app"`,
		"out/shadow":  `failed to prepare subPath for volumeMount "data" of container "app"`,
		"out/new/dir": `failed to create subPath directory for volumeMount "data" of container "app"`,
	} {
		c := v1.Container{Name: "app", VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/x", SubPath: subPath}}}
		_, err := makeMounts(mountsPod(c), f.podDir, &c, "web", "", nil, f.vols, nil, nil)
		assert.EqualError(t, err, want, subPath)
	}
	_, err := os.Stat(filepath.Join(outside, "new"))
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing made outside the volume")

	// A symlink that stays in the volume is followed.
	c := v1.Container{Name: "app", VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/x", SubPath: "inlink/file"}}}
	mounts, err := makeMounts(mountsPod(c), f.podDir, &c, "web", "", nil, f.vols, nil, nil)
	require.NoError(t, err)
	b, err := os.ReadFile(mounts[0].HostPath)
	require.NoError(t, err)
	assert.Equal(t, "ok", string(b))
}

func TestMakeMountsEtcHostsWithHostAliases(t *testing.T) {
	f := newMountsFixture(t)
	c := v1.Container{Name: "app"}
	pod := mountsPod(c)
	pod.Spec.HostAliases = []v1.HostAlias{
		{IP: "127.0.0.1", Hostnames: []string{"foo.local", "bar.local"}},
		{IP: "10.1.2.3", Hostnames: []string{"foo.remote"}},
	}
	mounts, err := makeMounts(pod, f.podDir, &c, "web", "sub.shop.svc.cluster.local", []string{"10.244.0.5", "fd00::5"}, f.vols, nil, nil)
	require.NoError(t, err)
	hosts := filepath.Join(f.podDir, "etc-hosts")
	assert.Equal(t, []kubecontainer.Mount{{Name: "k8s-managed-etc-hosts", ContainerPath: "/etc/hosts", HostPath: hosts}}, mounts)
	b, err := os.ReadFile(hosts)
	require.NoError(t, err)
	assert.Equal(t, `# Kubernetes-managed hosts file.
127.0.0.1	localhost
::1	localhost ip6-localhost ip6-loopback
fe00::0	ip6-localnet
fe00::0	ip6-mcastprefix
fe00::1	ip6-allnodes
fe00::2	ip6-allrouters
10.244.0.5	web.sub.shop.svc.cluster.local	web
fd00::5	web.sub.shop.svc.cluster.local	web

# Entries added by HostAliases.
127.0.0.1	foo.local	bar.local
10.1.2.3	foo.remote
`, string(b))
	fi, err := os.Stat(hosts)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())

	// Without a domain, the hostname alone.
	_, err = makeMounts(mountsPod(c), f.podDir, &c, "web", "", []string{"10.244.0.5"}, f.vols, nil, nil)
	require.NoError(t, err)
	b, _ = os.ReadFile(hosts)
	assert.Contains(t, string(b), "\n10.244.0.5\tweb\n")
	assert.NotContains(t, string(b), "HostAliases")
}

func TestMakeMountsNoEtcHosts(t *testing.T) {
	f := newMountsFixture(t)
	c := v1.Container{Name: "app"}
	hostNet := mountsPod(c)
	hostNet.Spec.HostNetwork = true
	mounts, err := makeMounts(hostNet, f.podDir, &c, "node-1", "", []string{"192.0.2.10"}, f.vols, nil, nil)
	require.NoError(t, err)
	assert.Empty(t, mounts, "a hostNetwork pod: nothing of the host's /etc/hosts")
	_, err = os.Stat(filepath.Join(f.podDir, "etc-hosts"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	// A container that mounts its own /etc/hosts.
	dir := f.addVolume(t, "hosts", false)
	c = v1.Container{Name: "app", VolumeMounts: []v1.VolumeMount{{Name: "hosts", MountPath: "/etc/hosts", SubPath: "hosts"}}}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hosts"), []byte("mine"), 0o644))
	mounts, err = makeMounts(mountsPod(c), f.podDir, &c, "web", "", []string{"10.244.0.5"}, f.vols, nil, nil)
	require.NoError(t, err)
	require.Len(t, mounts, 1)
	assert.Equal(t, "hosts", mounts[0].Name)
}

func TestPodRuntimeHelperMounts(t *testing.T) {
	f := newMountsFixture(t)
	data := f.addVolume(t, "data", false)
	c := v1.Container{Name: "app", TerminationMessagePath: "/dev/termination-log",
		VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}}}
	pod := mountsPod(c)

	// Without Volumes: today's behaviour, nothing mounted.
	h := &PodRuntimeHelper{}
	opts, err := h.GenerateRunContainerOptions(context.Background(), pod, &pod.Spec.Containers[0], "10.244.0.5", []string{"10.244.0.5"}, nil)
	require.NoError(t, err)
	assert.Empty(t, opts.Mounts)
	assert.Empty(t, opts.PodContainerDir)
	cfg, err := h.GetPodDNS(pod)
	require.NoError(t, err)
	assert.Nil(t, cfg)

	h = &PodRuntimeHelper{
		Volumes: func(*v1.Pod) kubecontainer.VolumeMap { return f.vols },
		PodDir:  func(types.UID) string { return f.podDir },
		DNS:     dns.NewConfigurer(record.NewFakeRecorder(10), nil, []net.IP{net.ParseIP("10.96.0.10")}, "cluster.local", ""),
	}
	opts, err = h.GenerateRunContainerOptions(context.Background(), pod, &pod.Spec.Containers[0], "10.244.0.5", []string{"10.244.0.5"}, nil)
	require.NoError(t, err)
	assert.Equal(t, []kubecontainer.Mount{
		{Name: "data", ContainerPath: "/data", HostPath: data},
		{Name: "k8s-managed-etc-hosts", ContainerPath: "/etc/hosts", HostPath: filepath.Join(f.podDir, "etc-hosts")},
	}, opts.Mounts)
	assert.Equal(t, filepath.Join(f.podDir, "containers", "app"), opts.PodContainerDir)
	fi, err := os.Stat(opts.PodContainerDir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "the sandbox's user goes through it")
	cfg, err = h.GetPodDNS(pod)
	require.NoError(t, err)
	assert.Equal(t, []string{"10.96.0.10"}, cfg.Servers)

	// Volumes without PodDir is a wiring error.
	h.PodDir = nil
	_, err = h.GenerateRunContainerOptions(context.Background(), pod, &pod.Spec.Containers[0], "10.244.0.5", nil, nil)
	assert.Error(t, err)
}

// TestMakeMountsResolvesAVolumesPath: a volume's path with a symlink in it
// (a hostPath that names a link inside the host root) is handed over
// resolved, as a subPath is: the mock runtime follows no symlink below its
// mount roots.
func TestMakeMountsResolvesAVolumesPath(t *testing.T) {
	f := newMountsFixture(t)
	data := f.addVolume(t, "data", false)
	alias := filepath.Join(filepath.Dir(data), "alias")
	require.NoError(t, os.Symlink("data", alias))
	f.vols["alias"] = kubecontainer.VolumeInfo{Mounter: &fakeMounter{path: alias}}
	c := v1.Container{Name: "app", VolumeMounts: []v1.VolumeMount{{Name: "alias", MountPath: "/data"}}}
	mounts, err := makeMounts(mountsPod(c), f.podDir, &c, "web", "", nil, f.vols, nil, nil)
	require.NoError(t, err)
	resolved, err := filepath.EvalSymlinks(data)
	require.NoError(t, err)
	assert.Equal(t, resolved, mounts[0].HostPath)
}

// On a real runtime (NodeHostsFile set) a hostNetwork pod's containers
// see the node's hosts file under the host-network header, with the pod's
// hostAliases (the e2e spec "should write entries to /etc/hosts when
// hostNetwork is enabled"), as upstream's nodeHostsFileContent; a
// container that mounts its own /etc/hosts keeps it; without
// NodeHostsFile (the mock runtime) there is none.
func TestPodRuntimeHelperHostNetworkEtcHosts(t *testing.T) {
	f := newMountsFixture(t)
	nodeHosts := filepath.Join(t.TempDir(), "hosts")
	require.NoError(t, os.WriteFile(nodeHosts, []byte("127.0.0.1\tlocalhost\n192.0.2.10\tnode-1\n"), 0o644))
	c := v1.Container{Name: "app"}
	pod := mountsPod(c)
	pod.Spec.HostNetwork = true
	pod.Spec.HostAliases = []v1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo", "bar"}}}
	h := &PodRuntimeHelper{
		Volumes:       func(*v1.Pod) kubecontainer.VolumeMap { return f.vols },
		PodDir:        func(types.UID) string { return f.podDir },
		NodeHostsFile: nodeHosts,
	}
	opts, err := h.GenerateRunContainerOptions(context.Background(), pod, &pod.Spec.Containers[0], "", nil, nil)
	require.NoError(t, err)
	hostsFile := filepath.Join(f.podDir, "etc-hosts")
	assert.Equal(t, []kubecontainer.Mount{{Name: "k8s-managed-etc-hosts", ContainerPath: "/etc/hosts", HostPath: hostsFile}}, opts.Mounts)
	b, err := os.ReadFile(hostsFile)
	require.NoError(t, err)
	assert.Equal(t, "# Kubernetes-managed hosts file (host network).\n127.0.0.1\tlocalhost\n192.0.2.10\tnode-1\n"+
		"\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n", string(b))

	dir := f.addVolume(t, "hosts", false)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hosts"), []byte("mine"), 0o644))
	own := v1.Container{Name: "app", VolumeMounts: []v1.VolumeMount{{Name: "hosts", MountPath: "/etc/hosts", SubPath: "hosts"}}}
	opts, err = h.GenerateRunContainerOptions(context.Background(), pod, &own, "", nil, nil)
	require.NoError(t, err)
	require.Len(t, opts.Mounts, 1)
	assert.Equal(t, "hosts", opts.Mounts[0].Name, "the container's own /etc/hosts")

	h.NodeHostsFile = ""
	opts, err = h.GenerateRunContainerOptions(context.Background(), pod, &pod.Spec.Containers[0], "", nil, nil)
	require.NoError(t, err)
	assert.Empty(t, opts.Mounts, "the mock runtime's: nothing of the host's /etc/hosts")
}
