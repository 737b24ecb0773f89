package fakeruntime

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tarContainer runs a busybox container that sleeps, and returns its ID
// and the host directory of its root file system.
func tarContainer(t *testing.T) (*Runtime, string, string) {
	t.Helper()
	r, _ := fixture(t)
	sb := runSandbox(t, r, "cp", "uid-cp", nil)
	id := createContainer(t, r, sb, "c", "sh", "-c", "sleep 3600")
	startContainer(t, r, id)
	r.mu.Lock()
	root := r.containers[id].fs.Root.Name()
	r.mu.Unlock()
	return r, id, root
}

// shTar runs a script in the container (ExecSync).
func shTar(t *testing.T, r *Runtime, id, script string) (string, string, int) {
	t.Helper()
	out, errOut, code := sh(t, r, id, script)
	return out, errOut, int(code)
}

// tarEntry is a member of a test archive.
type tarEntry struct {
	name, body, link string
	kind             byte
	mode             int64
}

func makeTar(t *testing.T, entries ...tarEntry) string {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.kind, Linkname: e.link, Mode: e.mode, Size: int64(len(e.body)), ModTime: time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		require.NoError(t, tw.WriteHeader(h))
		_, err := io.WriteString(tw, e.body)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	return b.String()
}

// readTar lists an archive: name → body (a link: "-> target").
func readTar(t *testing.T, archive string) map[string]string {
	t.Helper()
	got := map[string]string{}
	tr := tar.NewReader(strings.NewReader(archive))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return got
		}
		require.NoError(t, err)
		b, _ := io.ReadAll(tr)
		if h.Typeflag == tar.TypeSymlink {
			b = []byte("-> " + h.Linkname)
		}
		got[h.Name] = string(b)
	}
}

// TestTarCreateAsKubectlCpFromAPod: `tar cf - /data` (kubectl cp
// POD:/data …) writes the tree with its leading "/" removed, as GNU tar;
// -C and a relative path too.
func TestTarCreateAsKubectlCpFromAPod(t *testing.T) {
	r, id, _ := tarContainer(t)
	_, stderr, code := shTar(t, r, id, "mkdir -p /data/sub && echo hello > /data/a.txt && echo deep > /data/sub/b.txt && cd /data && touch empty")
	require.Equal(t, 0, code, stderr)

	out, errOut, code := stream(t, execURL(t, r, id, false, false, "tar", "cf", "-", "/data"), "", false)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "tar: Removing leading `/' from member names\n", errOut)
	assert.Equal(t, map[string]string{"data/": "", "data/a.txt": "hello\n", "data/empty": "", "data/sub/": "", "data/sub/b.txt": "deep\n"}, readTar(t, out))

	out, errOut, code = stream(t, execURL(t, r, id, false, false, "tar", "-c", "-f", "-", "-C", "/data", "sub"), "", false)
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut)
	assert.Equal(t, map[string]string{"sub/": "", "sub/b.txt": "deep\n"}, readTar(t, out))

	_, errOut, code = stream(t, execURL(t, r, id, false, false, "tar", "cf", "-", "/nope"), "", false)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "tar: nope: Cannot stat: No such file or directory\n")
	assert.Contains(t, errOut, "tar: Exiting with failure status due to previous errors\n")
}

// TestTarExtractAsKubectlCpToAPod: `tar -xmf - -C /tmp` (kubectl cp …
// POD:/tmp/dest) makes the files, directories and an inside link, with
// the runtime's clock as their time (m), and modes without set-ID bits.
func TestTarExtractAsKubectlCpToAPod(t *testing.T) {
	r, id, root := tarContainer(t)
	archive := makeTar(t,
		tarEntry{name: "dest/", kind: tar.TypeDir, mode: 0o755},
		tarEntry{name: "dest/x.txt", body: "from the laptop\n", mode: 0o4755},
		tarEntry{name: "dest/d/y.txt", body: "nested\n"}, // no directory member first
		tarEntry{name: "dest/l", kind: tar.TypeSymlink, link: "x.txt"},
		tarEntry{name: "dest/h", kind: tar.TypeLink, link: "dest/x.txt"},
	)
	out, errOut, code := stream(t, execURL(t, r, id, true, false, "tar", "-xmf", "-", "-C", "/tmp"), archive, false)
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, out)
	assert.Empty(t, errOut)
	got, stderr, code := shTar(t, r, id, "cat /tmp/dest/x.txt /tmp/dest/d/y.txt /tmp/dest/l /tmp/dest/h")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "from the laptop\nnested\nfrom the laptop\nfrom the laptop\n", got)
	fi, err := os.Stat(filepath.Join(root, "tmp/dest/x.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode(), "no set-ID bit on the host")
	assert.Equal(t, t0, fi.ModTime().UTC(), "m: the runtime's clock, not the archive's 2020")

	// kubectl cp first asks whether the destination is a directory.
	assert.Equal(t, int32(0), execIn(t, r, id, "test", "-d", "/tmp/dest").ExitCode)
	assert.Equal(t, int32(1), execIn(t, r, id, "test", "-d", "/tmp/dest/x.txt").ExitCode)

	// Without m, the archive's time; v names each member.
	out, errOut, code = stream(t, execURL(t, r, id, true, false, "tar", "xvf", "-", "-C", "/tmp"), makeTar(t, tarEntry{name: "old.txt", body: "x"}), false)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "old.txt\n", out)
	fi, err = os.Stat(filepath.Join(root, "tmp/old.txt"))
	require.NoError(t, err)
	assert.Equal(t, time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC), fi.ModTime().UTC())

	// A -C directory that is not there.
	_, errOut, code = stream(t, execURL(t, r, id, true, false, "tar", "-xmf", "-", "-C", "/nope"), archive, false)
	assert.Equal(t, 2, code)
	assert.Equal(t, "tar: /nope: Cannot open: No such file or directory\ntar: Error is not recoverable: exiting now\n", errOut)
}

// TestTarRefusesToLeaveTheContainer: members with "..", absolute names, a
// link out of the root and a link the host put there cannot write
// anything outside the container's files.
func TestTarRefusesToLeaveTheContainer(t *testing.T) {
	r, id, root := tarContainer(t)
	outside := t.TempDir() // a host directory no member may reach
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "tmp", "hostlink")))
	rootRel, err := filepath.Rel(filepath.Join(root, "tmp"), outside)
	require.NoError(t, err)
	up := strings.Repeat("../", strings.Count(filepath.Join(root, "tmp"), "/"))

	archive := makeTar(t,
		tarEntry{name: "../escape.txt", body: "no"},
		tarEntry{name: "a/../../escape.txt", body: "no"},
		tarEntry{name: rootRel + "/escape.txt", body: "no"},
		tarEntry{name: "/abs.txt", body: "made relative\n"},
		tarEntry{name: "up", kind: tar.TypeSymlink, link: up + strings.TrimPrefix(outside, "/")},
		tarEntry{name: "up/escape.txt", body: "no"},
		tarEntry{name: "abs", kind: tar.TypeSymlink, link: outside},
		tarEntry{name: "abs/escape.txt", body: "no"},
		tarEntry{name: "hostlink/escape.txt", body: "no"},
		tarEntry{name: "in", kind: tar.TypeSymlink, link: "../etc"}, // /tmp/in -> /etc: inside
		tarEntry{name: "hard", kind: tar.TypeLink, link: "../../etc/passwd"},
		tarEntry{name: "ok.txt", body: "fine\n"},
	)
	_, errOut, code := stream(t, execURL(t, r, id, true, false, "tar", "xf", "-", "-C", "/tmp"), archive, false)
	assert.Equal(t, 2, code)
	for _, want := range []string{
		"tar: ../escape.txt: Member name contains '..'\n",
		"tar: a/../../escape.txt: Member name contains '..'\n",
		"tar: Removing leading `/' from member names\n",
		"tar: up: Cannot create symlink to '" + up + strings.TrimPrefix(outside, "/") + "': it would lead out of the container's files\n",
		"tar: abs: Cannot create symlink to '" + outside + "': it would lead out of the container's files\n",
		"tar: hostlink/escape.txt: Cannot mkdir: ",
		"tar: hard: Cannot hard link to '../../etc/passwd': Member name contains '..'\n",
		"tar: Exiting with failure status due to previous errors\n",
	} {
		assert.Contains(t, errOut, want)
	}
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing written outside the container")
	_, err = os.Stat(filepath.Join(root, "..", "escape.txt"))
	assert.True(t, os.IsNotExist(err), "nothing beside the root: %v", err)

	got, stderr, code := shTar(t, r, id, "cat /tmp/abs.txt /tmp/ok.txt /tmp/up/escape.txt")
	assert.Equal(t, 0, code, stderr)
	assert.Equal(t, "made relative\nfine\nno", got, "a refused link leaves a plain directory for what follows")
	link, err := os.Readlink(filepath.Join(root, "tmp/in"))
	require.NoError(t, err)
	assert.Equal(t, "../etc", link, "a link that stays inside is made")
}

// TestTarResolvesALinkAgainstWhatIsExtracted: issue 49's archive. `d -> .`
// makes d/d/d/d/d/d the directory d is in, so a link written there as
// d/d/d/d/d/d/x -> ../../../../../.. climbs six levels from the top of
// the root, not from six levels down: tar resolves the links already
// extracted before it decides, and refuses it.
func TestTarResolvesALinkAgainstWhatIsExtracted(t *testing.T) {
	r, id, root := tarContainer(t)
	archive := makeTar(t,
		tarEntry{name: "d", kind: tar.TypeSymlink, link: "."},
		tarEntry{name: "d/d/d/d/d/d/x", kind: tar.TypeSymlink, link: "../../../../../.."},
		tarEntry{name: "e/f/y", kind: tar.TypeSymlink, link: "../../z"}, // in /: stays inside
	)
	_, errOut, code := stream(t, execURL(t, r, id, true, false, "tar", "xf", "-", "-C", "/"), archive, false)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "tar: d/d/d/d/d/d/x: Cannot create symlink to '../../../../../..': it would lead out of the container's files\n")
	_, err := os.Lstat(filepath.Join(root, "x"))
	assert.True(t, os.IsNotExist(err), "no link to the host's / in the rootfs: %v", err)
	link, err := os.Readlink(filepath.Join(root, "e/f/y"))
	require.NoError(t, err)
	assert.Equal(t, "../../z", link)
}

// TestTarListAndGzip: czf then tzvf, t alone, and the usage errors.
func TestTarListAndGzip(t *testing.T) {
	r, id, _ := tarContainer(t)
	_, stderr, code := shTar(t, r, id, "mkdir -p /w/d && echo abc > /w/d/f")
	require.Equal(t, 0, code, stderr)
	gz, errOut, code := stream(t, execURL(t, r, id, false, false, "tar", "czf", "-", "-C", "/w", "d"), "", false)
	require.Equal(t, 0, code, errOut)
	zr, err := gzip.NewReader(strings.NewReader(gz))
	require.NoError(t, err, "gzip")
	plain, err := io.ReadAll(zr)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"d/": "", "d/f": "abc\n"}, readTar(t, string(plain)))

	out, errOut, code := stream(t, execURL(t, r, id, true, false, "tar", "tzvf", "-"), gz, false)
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	assert.Regexp(t, `^drwxr-xr-x root/root +0 \d{4}-\d\d-\d\d \d\d:\d\d d/$`, lines[0])
	assert.Regexp(t, `^-rw-r--r-- root/root +4 \d{4}-\d\d-\d\d \d\d:\d\d d/f$`, lines[1])

	out, _, code = stream(t, execURL(t, r, id, true, false, "tar", "-t", "-f", "-"), string(plain), false)
	require.Equal(t, 0, code)
	assert.Equal(t, "d/\nd/f\n", out)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tar", "f", "-"}, "tar: You must specify one of the '-Acdtrux', '--delete' or '--test-label' options\n"},
		{[]string{"tar", "cf", "-"}, "tar: Cowardly refusing to create an empty archive\n"},
		{[]string{"tar", "cf"}, "tar: option requires an argument -- 'f'\n"},
		{[]string{"tar", "-xq"}, "tar: invalid option -- 'q'\n"},
		{[]string{"tar", "cf", "/tmp/a.tar", "/w"}, "tar: /tmp/a.tar: Cannot open: the mock runtime's tar reads and writes only standard input/output (-f -)\n"},
		{[]string{"tar", "xf", "-"}, "tar: This does not look like a tar archive\n"},
	} {
		resp := execIn(t, r, id, tc.args...)
		assert.Equal(t, int32(2), resp.ExitCode, "%v", tc.args)
		assert.True(t, strings.HasPrefix(string(resp.Stderr), tc.want), "%v: %q", tc.args, resp.Stderr)
	}
}

// TestTarRoundTripInTheSandboxProcess: as root on the real clock the
// scripts run in the sandbox process; kubectl cp's two commands work the
// same there, binary bytes unharmed, and the ".." refusal holds.
func TestTarRoundTripInTheSandboxProcess(t *testing.T) {
	r := sandboxRuntime(t)
	sb := runSandbox(t, r, "cp", "uid-cp", nil)
	id := createContainer(t, r, sb, "c", "sh", "-c", "sleep 3600")
	startContainer(t, r, id)
	binary := string([]byte{0, 1, 2, 0xff, '\r', '\n', 0x7f, 0})
	archive := makeTar(t, tarEntry{name: "dest/bin.dat", body: binary}, tarEntry{name: "../x", body: "no"})
	_, errOut, code := stream(t, execURL(t, r, id, true, false, "tar", "-xmf", "-", "-C", "/tmp"), archive, false)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "tar: ../x: Member name contains '..'\n")
	out, errOut, code := stream(t, execURL(t, r, id, false, false, "tar", "cf", "-", "/tmp/dest"), "", false)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, map[string]string{"tmp/dest/": "", "tmp/dest/bin.dat": binary}, readTar(t, out))
}
