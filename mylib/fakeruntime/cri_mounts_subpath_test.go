package fakeruntime

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The subPath corpus (issue 40): an attacker pod owns an emptyDir and mounts
// it twice, once whole and once through a subPath, and turns a name of the
// volume into a symlink up into the pods' directory, by swapping
// directories between CreateContainer and StartContainer and between two
// execs (no container can make a link: the runtime has no tar and no ln). A victim pod on the same node has a
// Secret, a service-account token, an emptyDir and a termination-message
// file. After every attack: nothing of the victim's was read (no output
// names its files or shows their content) or written (its directory is as
// it was). It runs in-process and in the sandbox process (as root).

// subPathNode is a kubelet's pods directory with a victim pod and the
// attacker's emptyDir, laid out and moded as the kubelet leaves them.
type subPathNode struct {
	pods, host string
	victim     string // the victim pod's directory
	vol        string // the attacker's emptyDir (0777)
}

// victimSecrets are the contents no attack may show, and the victim's
// directory as a listing shows it.
var victimSecrets = []string{"victim secret", "victim token", "victim note"}

var victimListed = regexp.MustCompile(`(?m)^(uid-victim|kubernetes.io~secret)$`)

func newSubPathNode(t *testing.T) subPathNode {
	t.Helper()
	root := t.TempDir()
	n := subPathNode{pods: filepath.Join(root, "pods"), host: filepath.Join(root, "host")}
	n.victim = filepath.Join(n.pods, "uid-victim")
	vols := filepath.Join(n.victim, "volumes")
	secret := filepath.Join(vols, "kubernetes.io~secret", "creds")
	token := filepath.Join(vols, "kubernetes.io~projected", "kube-api-access")
	data := filepath.Join(vols, "kubernetes.io~empty-dir", "data")
	for _, dir := range []string{n.pods, n.host, n.victim, secret, token, filepath.Join(n.victim, "containers", "app")} {
		mkdirMode(t, dir, 0o755)
	}
	mkdirMode(t, data, 0o777)
	atomicWrite(t, secret, map[string]string{"password": "victim secret\n"})
	atomicWrite(t, token, map[string]string{"token": "victim token\n"})
	writeMode(t, filepath.Join(data, "note"), "victim note\n", 0o666)
	writeMode(t, filepath.Join(n.victim, "containers", "app", "0a1b2c3d"), "victim note\n", 0o666)

	attacker := filepath.Join(n.pods, "uid-attacker")
	mkdirMode(t, filepath.Join(attacker, "volumes", "kubernetes.io~empty-dir"), 0o755)
	n.vol = filepath.Join(attacker, "volumes", "kubernetes.io~empty-dir", "vol")
	mkdirMode(t, n.vol, 0o777)
	return n
}

// subdir makes dir (0777) in the attacker's volume, with a marker file, as
// the kubelet makes a subPath that does not exist yet.
func (n subPathNode) subdir(t *testing.T, rel string) string {
	t.Helper()
	dir := filepath.Join(n.vol, rel)
	mkdirMode(t, dir, 0o777)
	writeMode(t, filepath.Join(dir, "marker"), rel+"'s own\n", 0o666)
	return dir
}

// swapForLink renames the attacker's rel out of the way and puts a symlink
// to target in its place, as a container of the attacker's would.
func (n subPathNode) swapForLink(t *testing.T, rel, target string) {
	t.Helper()
	p := filepath.Join(n.vol, rel)
	require.NoError(t, os.Rename(p, p+".old"))
	require.NoError(t, os.Symlink(target, p))
}

// steal is what the attacker runs where /steal is the subPath mount: list
// it, read the victim's Secret and token, write its emptyDir and its
// termination-message file.
const steal = `ls /steal /steal/* /steal/*/volumes; cat /steal/marker;
cat /steal/uid-victim/volumes/kubernetes.io~secret/creds/password /steal/uid-victim/volumes/kubernetes.io~projected/kube-api-access/token;
cat /steal/note /steal/password /steal/token;
echo pwned > /steal/uid-victim/volumes/kubernetes.io~empty-dir/data/pwned; echo pwned >> /steal/uid-victim/volumes/kubernetes.io~empty-dir/data/note;
echo pwned >> /steal/uid-victim/containers/app/0a1b2c3d; echo pwned > /steal/pwned; echo pwned >> /steal/note; true`

// subPathAttack is one run of the corpus: its checks after it ran.
type subPathAttack struct {
	t      *testing.T
	r      *Runtime
	n      subPathNode
	sb     string
	before map[string]string
	names  int
}

// check fails if out shows anything of the victim's or the victim's
// directory changed.
func (a *subPathAttack) check(what, out string) {
	a.t.Helper()
	for _, leak := range victimSecrets {
		assert.NotContains(a.t, out, leak, "%s: the attacker saw the victim's files", what)
	}
	assert.NotRegexp(a.t, victimListed, out, "%s: the attacker listed the pods' directory", what)
	assert.Equal(a.t, a.before, dirListing(a.t, a.n.victim), "%s: the victim's files changed", what)
}

// container creates (and starts, unless created only) a container of the
// attacker's pod running cmd with mounts.
func (a *subPathAttack) container(mounts []*runtimeapi.Mount, start bool, cmd ...string) string {
	a.t.Helper()
	a.names++
	id, err := createMounted(a.r, a.sb, "c"+strings.Repeat("x", a.names), mounts, cmd...)
	require.NoError(a.t, err)
	if start {
		startContainer(a.t, a.r, id)
	}
	return id
}

// exec runs script in id, both as ExecSync and as a streamed exec, and
// returns what both printed.
func (a *subPathAttack) exec(id, script string) string {
	a.t.Helper()
	out, errOut, _ := sh(a.t, a.r, id, script)
	sout, serr, _ := stream(a.t, execURL(a.t, a.r, id, false, false, "sh", "-c", script), "", false)
	return out + errOut + sout + serr
}

func subPathCorpus(t *testing.T, r *Runtime, n subPathNode) {
	ctx := context.Background()
	resp, err := r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "attacker", Namespace: "evil", Uid: "uid-attacker"}, LogDirectory: t.TempDir()}})
	require.NoError(t, err)
	a := &subPathAttack{t: t, r: r, n: n, sb: resp.PodSandboxId, before: dirListing(t, n.victim)}
	whole := &runtimeapi.Mount{ContainerPath: "/m/a/b/c/d", HostPath: n.vol}
	sub := func(rel string) *runtimeapi.Mount {
		return &runtimeapi.Mount{ContainerPath: "/steal", HostPath: filepath.Join(n.vol, rel)}
	}

	t.Run("no container can make a link: the runtime has no tar and no ln", func(t *testing.T) {
		// The attack made its link with tar in the attacker's other
		// container. kubectl cp needs a real tar, on a real node; here a
		// link can only appear from outside the runtime, as the swaps below
		// make them.
		a.t = t
		c1 := a.container([]*runtimeapi.Mount{whole}, true, "sleep", "3600")
		for _, cmd := range []string{`tar xf - -C /m/a/b/c/d`, `ln -s ../../../.. /m/a/b/c/d/x`} {
			_, errOut, code := sh(t, r, c1, cmd)
			assert.EqualValues(t, 127, code, "%s: %s", cmd, errOut)
		}
		_, err := os.Lstat(filepath.Join(n.vol, "x"))
		assert.ErrorIs(t, err, os.ErrNotExist, "no link in the volume")
	})

	t.Run("a subPath swapped for a link between two execs stays the directory it was", func(t *testing.T) {
		a.t = t
		n.subdir(t, "p")
		c := a.container([]*runtimeapi.Mount{sub("p")}, true, "sleep", "3600")
		out, _, _ := sh(t, r, c, `cat /steal/marker`)
		require.Equal(t, "p's own\n", out)
		n.swapForLink(t, "p", "../../../..")
		out = a.exec(c, steal)
		a.check("between execs", out)
		assert.Contains(t, out, "p's own", "the pinned directory, moved aside, is still the mount")
	})

	t.Run("a subPath swapped for a link between CreateContainer and StartContainer", func(t *testing.T) {
		a.t = t
		n.subdir(t, "q")
		c := a.container([]*runtimeapi.Mount{sub("q")}, false, "sh", "-c", steal)
		n.swapForLink(t, "q", "../../../..")
		startContainer(t, r, c)
		waitDone(t, r, c)
		a.check("between create and start", logOf(t, r, c))
	})

	t.Run("a subPath's parent swapped for a link into the victim's emptyDir", func(t *testing.T) {
		a.t = t
		n.subdir(t, "a/data")
		c := a.container([]*runtimeapi.Mount{sub("a/data")}, false, "sh", "-c", steal)
		n.swapForLink(t, "a", "../../../../uid-victim/volumes/kubernetes.io~empty-dir")
		startContainer(t, r, c)
		waitDone(t, r, c)
		a.check("parent between create and start", logOf(t, r, c))
		c2 := a.container([]*runtimeapi.Mount{sub("a.old/data")}, true, "sleep", "3600")
		out, _, _ := sh(t, r, c2, `cat /steal/marker`) // started: its mounts are pinned
		require.Equal(t, "a/data's own\n", out)
		n.swapForLink(t, "a.old", "../../../../uid-victim/volumes/kubernetes.io~empty-dir")
		a.check("parent between execs", a.exec(c2, steal))
	})

	t.Run("a file subPath whose directory is swapped for a link to the victim's token", func(t *testing.T) {
		a.t = t
		mkdirMode(t, filepath.Join(n.vol, "f"), 0o777)
		writeMode(t, filepath.Join(n.vol, "f", "token"), "the attacker's token\n", 0o666)
		c := a.container([]*runtimeapi.Mount{{ContainerPath: "/var/run/token", HostPath: filepath.Join(n.vol, "f", "token")}}, true, "sleep", "3600")
		out, _, _ := sh(t, r, c, `cat /var/run/token`) // started: its mounts are pinned
		require.Equal(t, "the attacker's token\n", out)
		n.swapForLink(t, "f", "../../../../uid-victim/volumes/kubernetes.io~projected/kube-api-access")
		out = a.exec(c, `cat /var/run/token; echo pwned >> /var/run/token; ls -l /var/run`)
		a.check("file between execs", out)
		b, err := os.ReadFile(filepath.Join(n.vol, "f.old", "token"))
		require.NoError(t, err)
		assert.Contains(t, string(b), "the attacker's token\npwned\n", "writes go to the pinned file")
		assert.Contains(t, out, "the attacker's token", "reads come from the pinned file")

		// The name itself pointed elsewhere: the pinned file is gone from
		// it, and the mount is stale, never the link's target. In the
		// sandbox process the mount is a bind mount of the pinned file, as
		// runc's: it keeps the old file.
		old := filepath.Join(n.vol, "f.old", "token")
		require.NoError(t, os.Rename(old, old+".old"))
		require.NoError(t, os.Symlink("../../../../../uid-victim/volumes/kubernetes.io~projected/kube-api-access/token", old))
		out = a.exec(c, `cat /var/run/token; echo pwned >> /var/run/token`)
		a.check("file name between execs", out)
		if r.sandbox != nil {
			assert.Contains(t, out, "the attacker's token\npwned\n")
		} else {
			assert.Contains(t, out, "stale file handle")
		}
	})

	t.Run("a host path with a symlink below its mount root is refused at CreateContainer", func(t *testing.T) {
		a.t = t
		require.NoError(t, os.Symlink("../../../..", filepath.Join(n.vol, "z")))
		n.subdir(t, "zz")
		n.swapForLink(t, "zz", "../../../../uid-victim/volumes/kubernetes.io~empty-dir")
		for _, hp := range []string{filepath.Join(n.vol, "z"), filepath.Join(n.vol, "zz", "data"), filepath.Join(n.vol, "z", "uid-victim")} {
			_, err := createMounted(r, a.sb, "refused", []*runtimeapi.Mount{{ContainerPath: "/steal", HostPath: hp}}, "sh", "-c", steal)
			require.Error(t, err, hp)
			assert.Equal(t, codes.InvalidArgument, status.Code(err), err.Error())
			assert.Contains(t, err.Error(), "is a symlink", hp)
			assert.NotContains(t, err.Error(), "\n")
		}
		a.check("refused", "")
	})
}

func TestSubPathCorpusInProcess(t *testing.T) {
	n := newSubPathNode(t)
	subPathCorpus(t, mountRuntime(t, kubeletDirs{pods: n.pods, host: n.host}, IsolationInProcess), n)
}

func TestSubPathCorpusSandboxProcess(t *testing.T) {
	n := newSubPathNode(t)
	subPathCorpus(t, sandboxMountRuntime(t, kubeletDirs{pods: n.pods, host: n.host}), n)
}
