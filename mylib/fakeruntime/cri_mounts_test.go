package fakeruntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// Tests of the CRI mounts: checked at CreateContainer, mapped into the
// container's view. mountSuite runs in-process here and in the sandbox
// process in sandboxproc_mounts_test.go.

// kubeletDirs is a kubelet's root directory as the volume manager leaves
// it for one pod: the mount roots (pods, host) and the pod's volumes,
// owned by root with the kubelet's modes.
type kubeletDirs struct {
	pods, host string
	config     string // a configMap volume, written as the atomic writer does
	shared     string // an emptyDir (0777)
	secret     string // another volume of the pod (a sibling of config)
	plain      string // a directory of root's (0755) with a 0644 file
	hosts      string // the pod's etc-hosts (0644)
	term       string // a termination-message file (0666)
}

var atomicWrites atomic.Int64

// atomicWrite writes files into dir as the kubelet's atomic writer does:
// a new ..<n> directory, ..data swapped to it by a rename, and the
// user-visible names symlinks to ..data/<name>.
func atomicWrite(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	ts := fmt.Sprintf("..2026_03_01_12_00_00.%d", atomicWrites.Add(1))
	require.NoError(t, os.Mkdir(filepath.Join(dir, ts), 0o755))
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, ts, name), []byte(content), 0o644))
	}
	tmp := filepath.Join(dir, "..data_tmp")
	require.NoError(t, os.Symlink(ts, tmp))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, "..data")))
	for name := range files {
		if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
			require.NoError(t, os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)))
		}
	}
}

// mkdirMode makes dir with exactly mode (no umask).
func mkdirMode(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.Chmod(dir, mode))
}

func writeMode(t *testing.T, file, content string, mode os.FileMode) {
	t.Helper()
	require.NoError(t, os.WriteFile(file, []byte(content), mode))
	require.NoError(t, os.Chmod(file, mode))
}

func newKubeletDirs(t *testing.T) kubeletDirs {
	t.Helper()
	root := t.TempDir()
	d := kubeletDirs{pods: filepath.Join(root, "pods"), host: filepath.Join(root, "host")}
	pod := filepath.Join(d.pods, "uid-1")
	vols := filepath.Join(pod, "volumes")
	d.config = filepath.Join(vols, "kubernetes.io~configmap", "config")
	d.shared = filepath.Join(vols, "kubernetes.io~empty-dir", "shared")
	d.secret = filepath.Join(vols, "kubernetes.io~secret", "token")
	d.plain = filepath.Join(vols, "kubernetes.io~empty-dir", "plain")
	for _, dir := range []string{d.pods, d.host, pod, vols, filepath.Dir(d.config), d.config, filepath.Dir(d.shared), d.secret, d.plain,
		filepath.Join(pod, "containers"), filepath.Join(pod, "containers", "app")} {
		mkdirMode(t, dir, 0o755)
	}
	mkdirMode(t, d.shared, 0o777)
	atomicWrite(t, d.config, map[string]string{"game.properties": "lives=3\n", "ui.properties": "color=blue\n"})
	writeMode(t, filepath.Join(d.secret, "token"), "the pod's other secret\n", 0o644)
	writeMode(t, filepath.Join(d.plain, "file"), "root's\n", 0o644)
	writeMode(t, filepath.Join(d.shared, "roots"), "root's, 0644\n", 0o644)
	d.hosts = filepath.Join(pod, "etc-hosts")
	writeMode(t, d.hosts, "127.0.0.1\tlocalhost\n10.88.0.2\tweb\n", 0o644)
	d.term = filepath.Join(pod, "containers", "app", "0a1b2c3d")
	writeMode(t, d.term, "", 0o666)
	// Links a script must not follow out of its mount: to the host, to
	// another volume of the pod (inside the mount root, outside the mount).
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(d.config, "abs")))
	require.NoError(t, os.Symlink("../../../../../../../../../../etc/passwd", filepath.Join(d.config, "up")))
	require.NoError(t, os.Symlink("../../kubernetes.io~secret/token/token", filepath.Join(d.config, "sibling")))
	return d
}

// appMounts are the app container's mounts, as the kubelet sends them.
func (d kubeletDirs) appMounts() []*runtimeapi.Mount {
	return []*runtimeapi.Mount{
		{ContainerPath: "/etc/config", HostPath: d.config, Readonly: true},
		{ContainerPath: "/shared", HostPath: d.shared},
		{ContainerPath: "/data/plain", HostPath: d.plain},
		{ContainerPath: "/etc/hosts", HostPath: d.hosts},
		{ContainerPath: "/dev/termination-log", HostPath: d.term},
	}
}

// mountPod runs a sandbox with a hostname and a DNS config.
func mountPod(t *testing.T, r *Runtime) string {
	t.Helper()
	resp, err := r.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1"},
		Hostname:     "web-0",
		LogDirectory: t.TempDir(),
		DnsConfig: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10", "10.96.0.11"},
			Searches: []string{"default.svc.cluster.local", "svc.cluster.local"}, Options: []string{"ndots:5", "edns0"}},
	}})
	require.NoError(t, err)
	return resp.PodSandboxId
}

// createMounted creates a busybox container running cmd with mounts.
func createMounted(r *Runtime, sandboxID, name string, mounts []*runtimeapi.Mount, cmd ...string) (string, error) {
	resp, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		Command: cmd, Mounts: mounts, LogPath: name + ".log"}})
	if err != nil {
		return "", err
	}
	return resp.ContainerId, nil
}

// sh runs script in container id and returns its stdout, stderr and code.
func sh(t *testing.T, r *Runtime, id, script string) (string, string, int32) {
	t.Helper()
	resp := execIn(t, r, id, "sh", "-c", script)
	return string(resp.Stdout), string(resp.Stderr), resp.ExitCode
}

// mountRuntime is a runtime with the kubelet's mount roots, in-process on
// a fake clock.
func mountRuntime(t *testing.T, d kubeletDirs, iso Isolation) *Runtime {
	t.Helper()
	r, err := NewRuntime(Config{Clock: clocktesting.NewFakeClock(t0), StateDir: t.TempDir(), MountRoots: []string{d.pods, d.host}, Isolation: iso})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	for _, img := range []string{"busybox:1.36", "registry.k8s.io/pause:3.10"} {
		_, err = r.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img}})
		require.NoError(t, err)
	}
	return r
}

func TestMountsInProcess(t *testing.T) {
	d := newKubeletDirs(t)
	mountSuite(t, mountRuntime(t, d, IsolationInProcess), d)
}

// mountSuite is what a script sees of its mounts, the same in-process and
// in the sandbox process.
func mountSuite(t *testing.T, r *Runtime, d kubeletDirs) {
	sb := mountPod(t, r)
	app, err := createMounted(r, sb, "app", d.appMounts(), "sleep", "3600")
	require.NoError(t, err)
	startContainer(t, r, app)
	sidecar, err := createMounted(r, sb, "sidecar", []*runtimeapi.Mount{{ContainerPath: "/cache", HostPath: d.shared}}, "sleep", "3600")
	require.NoError(t, err)
	startContainer(t, r, sidecar)

	t.Run("a configMap's files through its ..data links", func(t *testing.T) {
		out, errOut, code := sh(t, r, app, `cat /etc/config/game.properties; ls /etc/config; cd /etc/config && cat ui.properties ..data/game.properties; pwd -P`)
		assert.Equal(t, "lives=3\nabs\ngame.properties\nsibling\nui.properties\nup\ncolor=blue\nlives=3\n/etc/config\n", out, errOut)
		assert.Zero(t, code)
		out, _, _ = sh(t, r, app, `ls -a /etc/config`)
		assert.Contains(t, out, "..data\n")
	})

	t.Run("an update of the volume is seen at once", func(t *testing.T) {
		atomicWrite(t, d.config, map[string]string{"game.properties": "lives=4\n", "ui.properties": "color=red\n"})
		out, errOut, _ := sh(t, r, app, `cat /etc/config/game.properties /etc/config/ui.properties`)
		assert.Equal(t, "lives=4\ncolor=red\n", out, errOut)
	})

	t.Run("a read-only mount refuses every change", func(t *testing.T) {
		before := dirListing(t, d.config)
		for _, script := range []string{
			`echo x > /etc/config/new`,
			`echo x >> /etc/config/game.properties`,
			`touch /etc/config/game.properties`,
			`rm /etc/config/ui.properties`,
			`rm -rf /etc/config/..data`,
			`mkdir /etc/config/d`,
			`cd /etc/config && echo x > ../config/relative`,
		} {
			_, errOut, code := sh(t, r, app, script)
			assert.NotZero(t, code, script)
			assert.Contains(t, errOut, "read-only file system", script)
		}
		out, _, _ := sh(t, r, app, `mkdir -p /etc/config; [ -w /etc/config/ui.properties ] || echo not writable`)
		assert.Equal(t, "not writable\n", out, "mkdir -p of what exists is no change")
		assert.Equal(t, before, dirListing(t, d.config), "nothing changed on the host")
	})

	t.Run("a file mount maps exactly its name", func(t *testing.T) {
		out, errOut, _ := sh(t, r, app, `cat /etc/hosts; echo "exited: boom" > /dev/termination-log`)
		assert.Equal(t, "127.0.0.1\tlocalhost\n10.88.0.2\tweb\n", out, errOut)
		b, err := os.ReadFile(d.term)
		require.NoError(t, err)
		assert.Equal(t, "exited: boom\n", string(b))
		_, errOut, code := sh(t, r, app, `cat /etc/hosts/x`)
		assert.NotZero(t, code)
		assert.Contains(t, errOut, "not a directory")
		_, errOut, _ = sh(t, r, app, `rm /etc/hosts`)
		assert.Contains(t, errOut, "device or resource busy", "a mount point is not removed")
		_, err = os.Stat(d.hosts)
		assert.NoError(t, err)
	})

	t.Run("a symlink in a mount is never followed out of it", func(t *testing.T) {
		for _, name := range []string{"abs", "up", "sibling"} {
			out, errOut, code := sh(t, r, app, "cat /etc/config/"+name)
			assert.NotZero(t, code, name)
			assert.Contains(t, errOut, "path escapes from parent", name)
			assert.NotContains(t, out, "root:", name)
			assert.NotContains(t, out, "secret", name)
		}
		out, _, _ := sh(t, r, app, `cat /etc/config/../../../../../etc/passwd /shared/../../../`+d.secret+`/token`)
		assert.NotContains(t, out, "secret")
		assert.NotContains(t, out, "root:")
	})

	t.Run("two containers share a writable volume", func(t *testing.T) {
		_, errOut, code := sh(t, r, app, `echo from app > /shared/a; mkdir -p /shared/dir/sub && touch /shared/dir/sub/f`)
		require.Zero(t, code, errOut)
		out, errOut, _ := sh(t, r, sidecar, `cat /cache/a; ls /cache/dir/sub; echo from sidecar >> /cache/a`)
		assert.Equal(t, "from app\nf\n", out, errOut)
		out, _, _ = sh(t, r, app, `cat /shared/a`)
		assert.Equal(t, "from app\nfrom sidecar\n", out)
		b, err := os.ReadFile(filepath.Join(d.shared, "a"))
		require.NoError(t, err)
		assert.Equal(t, "from app\nfrom sidecar\n", string(b), "the volume's own file on the host")
		_, errOut, code = sh(t, r, sidecar, `rm -r /cache/dir && rm /cache/a`)
		assert.Zero(t, code, errOut)
		_, err = os.Stat(filepath.Join(d.shared, "a"))
		assert.ErrorIs(t, err, os.ErrNotExist)
	})

	t.Run("the mount points are in the container's root", func(t *testing.T) {
		out, errOut, _ := sh(t, r, app, `ls /; ls /etc; ls /data`)
		assert.Equal(t, "data\ndev\netc\nproc\nshared\ntmp\nvar\nconfig\nhostname\nhosts\nresolv.conf\nplain\n", out, errOut)
		out, _, _ = sh(t, r, app, `ls -l /`)
		assert.Regexp(t, `(?m)^drwxrwxrwx .* shared$`, out, "the volume's mode, not the mount point's")
		out, _, _ = sh(t, r, app, `ls -l /dev`)
		assert.Regexp(t, `(?m)^-rw-rw-rw- .* termination-log$`, out)
	})

	t.Run("resolv.conf and hostname", func(t *testing.T) {
		out, errOut, _ := sh(t, r, app, `cat /etc/resolv.conf; cat /etc/hostname; hostname`)
		assert.Equal(t, "search default.svc.cluster.local svc.cluster.local\nnameserver 10.96.0.10\nnameserver 10.96.0.11\noptions ndots:5 edns0\nweb-0\nweb-0\n", out, errOut)
	})

	t.Run("ContainerStatus reports the mounts", func(t *testing.T) {
		st := containerStatus(t, r, app)
		require.Len(t, st.Mounts, len(d.appMounts()))
		for i, m := range d.appMounts() {
			assert.Equal(t, m.ContainerPath, st.Mounts[i].ContainerPath)
			assert.Equal(t, m.HostPath, st.Mounts[i].HostPath)
			assert.Equal(t, m.Readonly, st.Mounts[i].Readonly)
		}
	})
}

// dirListing is every name under dir with its content or link target.
func dirListing(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			out[p], _ = os.Readlink(p)
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			out[p] = string(b)
		default:
			out[p] = fi.Mode().String()
		}
		return nil
	}))
	return out
}

func TestMountsOutsideTheRootsAreRefused(t *testing.T) {
	d := newKubeletDirs(t)
	r := mountRuntime(t, d, IsolationInProcess)
	sb := mountPod(t, r)
	outside := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(d.pods, "uid-1", "link-out")))
	require.NoError(t, os.Symlink("/etc", filepath.Join(d.shared, "etc")))
	r.mu.Lock()
	containers, err := r.containersDir()
	r.mu.Unlock()
	require.NoError(t, err)
	require.NoError(t, os.Symlink(containers, filepath.Join(d.pods, "uid-1", "link-containers")))

	for _, tc := range []struct {
		mount *runtimeapi.Mount
		want  string
	}{
		{&runtimeapi.Mount{ContainerPath: "/x", HostPath: outside}, "is outside the runtime's mount roots"},
		{&runtimeapi.Mount{ContainerPath: "/x", HostPath: "/etc/passwd"}, "is outside the runtime's mount roots"},
		{&runtimeapi.Mount{ContainerPath: "/x", HostPath: d.pods + "/../../../../../../etc"}, "is outside the runtime's mount roots"},
		{&runtimeapi.Mount{ContainerPath: "/x", HostPath: filepath.Join(d.pods, "uid-1", "link-out")}, "is outside the runtime's mount roots"},
		{&runtimeapi.Mount{ContainerPath: "/x", HostPath: filepath.Join(d.shared, "etc")}, "is outside the runtime's mount roots"},
		{&runtimeapi.Mount{ContainerPath: "/x", HostPath: filepath.Join(d.pods, "uid-1", "link-containers")}, "holds the runtime's containers"},
		{&runtimeapi.Mount{ContainerPath: "/x", HostPath: filepath.Join(d.pods, "uid-1", "missing")}, "does not exist"},
		{&runtimeapi.Mount{ContainerPath: "x", HostPath: d.shared}, "the container path is not absolute"},
		{&runtimeapi.Mount{ContainerPath: "/", HostPath: d.shared}, "cannot mount over the container's /"},
		{&runtimeapi.Mount{ContainerPath: "/x", HostPath: "pods/uid-1"}, "is not absolute"},
		{&runtimeapi.Mount{ContainerPath: "/x", Image: &runtimeapi.ImageSpec{Image: "sha256:1234", UserSpecifiedImage: "busybox"}},
			"mount /x: image volume busybox: this runtime cannot mount an image's files (a real one can: containerd 2.1 or later)"},
		{&runtimeapi.Mount{ContainerPath: "/x"}, "mount /x: no host path"},
		{&runtimeapi.Mount{ContainerPath: "/etc", HostPath: d.hosts}, "mount point /etc: the host path is a file"},
	} {
		_, err := createMounted(r, sb, "bad", []*runtimeapi.Mount{tc.mount}, "sleep", "1")
		require.Error(t, err, tc.want)
		assert.Equal(t, codes.InvalidArgument, status.Code(err), err.Error())
		assert.Contains(t, err.Error(), tc.want)
		assert.NotContains(t, err.Error(), "\n", "one line")
	}
	_, err = createMounted(r, sb, "bad", []*runtimeapi.Mount{{ContainerPath: "/a", HostPath: d.shared}, {ContainerPath: "/a/", HostPath: d.plain}}, "sleep", "1")
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Contains(t, fmt.Sprint(err), "mounted twice")

	// Nothing was made for the refused containers.
	r.mu.Lock()
	n := len(r.containers)
	r.mu.Unlock()
	assert.Zero(t, n)
	entries, err := os.ReadDir(containers)
	require.NoError(t, err)
	assert.Empty(t, entries)

	// Without mount roots, every mount is refused.
	plain, _ := fixture(t)
	psb := runSandbox(t, plain, "web", "uid-1", nil)
	_, err = createMounted(plain, psb, "app", []*runtimeapi.Mount{{ContainerPath: "/x", HostPath: d.shared}}, "sleep", "1")
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Contains(t, fmt.Sprint(err), "this runtime allows no mounts")

	_, err = NewRuntime(Config{MountRoots: []string{"relative/pods"}})
	assert.ErrorContains(t, err, "not an absolute path")
	state := t.TempDir()
	_, err = NewRuntime(Config{StateDir: state, MountRoots: []string{state}})
	assert.ErrorContains(t, err, "holds the runtime's containers")
}

func TestWritesIntoAMountAreNotTheContainersMemory(t *testing.T) {
	d := newKubeletDirs(t)
	r := mountRuntime(t, d, IsolationInProcess)
	sb := mountPod(t, r)
	fill := `s=0123456789abcdef; s=$s$s$s$s$s$s$s$s$s$s$s$s$s$s$s$s; s=$s$s$s$s$s$s$s$s$s$s$s$s$s$s$s$s; ` + // 4 KiB
		`i=0; while [ $i -lt 512 ]; do echo $s >> %s; i=$((i+1)); done` // 2 MiB
	for _, tc := range []struct {
		file string
		code int32
	}{{"/shared/big", 0}, {"/tmp/big", ExitCodeSIGKILL}} {
		resp, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: strings.ReplaceAll(tc.file, "/", "-")}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
			Command: []string{"sh", "-c", fmt.Sprintf(fill, tc.file)}, Mounts: []*runtimeapi.Mount{{ContainerPath: "/shared", HostPath: d.shared}},
			Linux: &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 1 << 20}}}})
		require.NoError(t, err)
		startContainer(t, r, resp.ContainerId)
		waitDone(t, r, resp.ContainerId)
		assert.Equal(t, tc.code, containerStatus(t, r, resp.ContainerId).ExitCode, tc.file)
	}
	fi, err := os.Stat(filepath.Join(d.shared, "big"))
	require.NoError(t, err)
	assert.EqualValues(t, 512*(4096+1), fi.Size(), "2 MiB in the volume, past the 1 MiB limit")
}

func TestResolvConfIsLeftToAMountThatCoversIt(t *testing.T) {
	d := newKubeletDirs(t)
	r := mountRuntime(t, d, IsolationInProcess)
	sb := mountPod(t, r)
	writeMode(t, filepath.Join(d.plain, "resolv.conf"), "nameserver 1.1.1.1\n", 0o644)
	c, err := createMounted(r, sb, "app", []*runtimeapi.Mount{{ContainerPath: "/etc/resolv.conf", HostPath: filepath.Join(d.plain, "resolv.conf")}}, "sleep", "3600")
	require.NoError(t, err)
	startContainer(t, r, c)
	out, _, _ := sh(t, r, c, `cat /etc/resolv.conf`)
	assert.Equal(t, "nameserver 1.1.1.1\n", out)

	// A sandbox without a DNS config: no resolv.conf at all (containerd
	// would copy the host's; this runtime never shows a host file).
	plain := runSandbox(t, r, "other", "uid-2", nil)
	c2 := createContainer(t, r, plain, "app", "sleep", "3600")
	startContainer(t, r, c2)
	_, errOut, _ := sh(t, r, c2, `cat /etc/resolv.conf`)
	assert.Contains(t, errOut, "no such file or directory")

	_, err = r.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata:  &runtimeapi.PodSandboxMetadata{Name: "bad", Namespace: "default", Uid: "uid-3"},
		DnsConfig: &runtimeapi.DNSConfig{Servers: []string{"10.0.0.1\nnameserver 6.6.6.6"}}}})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
}

func TestAMountInsideAMount(t *testing.T) {
	d := newKubeletDirs(t)
	r := mountRuntime(t, d, IsolationInProcess)
	sb := mountPod(t, r)
	c, err := createMounted(r, sb, "app", []*runtimeapi.Mount{
		{ContainerPath: "/data/inner", HostPath: d.shared},
		{ContainerPath: "/data", HostPath: d.plain, Readonly: true},
	}, "sleep", "3600")
	require.NoError(t, err)
	startContainer(t, r, c)
	out, errOut, _ := sh(t, r, c, `ls /data; echo in > /data/inner/x; cat /data/inner/x`)
	assert.Equal(t, "file\ninner\nin\n", out, errOut)
	_, errOut, _ = sh(t, r, c, `echo out > /data/y`)
	assert.Contains(t, errOut, "read-only file system", "the outer mount is read-only")
	_, err = os.Lstat(filepath.Join(d.plain, "inner"))
	assert.ErrorIs(t, err, os.ErrNotExist, "no mount point is made in the outer volume")
	_, errOut, _ = sh(t, r, c, `rm -r /data`)
	assert.Contains(t, errOut, "device or resource busy")
}
