package docscheck_test

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"mykubelet/scripts/testkit/testcluster"
)

// libCheckout is a checkout of scripts/lib.sh alone, with a findmnt that
// tells the file system type the test chooses, as findmnt does in the lima
// VM for the mounted home: 9p, virtiofs or fuse.sshfs.
type libCheckout struct {
	repo, guest, bin string
}

func newLibCheckout(t *testing.T) libCheckout {
	root := testcluster.RepoRoot(t)
	lib, err := os.ReadFile(filepath.Join(root, "scripts", "lib.sh"))
	require.NoError(t, err)
	tmp := t.TempDir()
	c := libCheckout{repo: filepath.Join(tmp, "checkout"), guest: filepath.Join(tmp, "guest"), bin: filepath.Join(tmp, "bin")}
	require.NoError(t, os.MkdirAll(filepath.Join(c.repo, "scripts"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(c.repo, "scripts", "lib.sh"), lib, 0o644))
	require.NoError(t, os.MkdirAll(c.bin, 0o755))
	// No type: findmnt fails, as on a machine without it (macOS).
	fake := "#!/bin/sh\n[ -n \"$FAKE_FSTYPE\" ] || exit 1\necho \"$FAKE_FSTYPE\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(c.bin, "findmnt"), []byte(fake), 0o755))
	return c
}

// source runs `source scripts/lib.sh` on a checkout whose file system
// findmnt calls fstype, and returns the STATE_DIR it sets and its stderr.
func (c libCheckout) source(t *testing.T, fstype string, env ...string) (string, string, error) {
	cmd := exec.Command("bash", "-c", `set -euo pipefail; source "$1"; printf %s "$STATE_DIR"`, "_", filepath.Join(c.repo, "scripts", "lib.sh"))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MYKUBELET_STATE_DIR=") && !strings.HasPrefix(kv, "MYKUBELET_GUEST_STATE_ROOT=") && !strings.HasPrefix(kv, "PATH=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PATH="+c.bin+":"+os.Getenv("PATH"), "FAKE_FSTYPE="+fstype, "MYKUBELET_GUEST_STATE_ROOT="+c.guest)
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// TestStateIsOnTheGuestDiskOnALimaMount checks what README.md and vm.yaml
// say of .state in the lima VM: on lima's mount of the home directory (9p,
// virtiofs, reverse-sshfs), which cannot hold unix sockets, scripts/lib.sh
// makes .state a link to the guest's own disk, below
// $MYKUBELET_GUEST_STATE_ROOT/state, and STATE_DIR stays <checkout>/.state,
// so every `.state/...` a README names is still the path to use; a socket
// made there lands on the guest's disk. The link and what it holds are kept
// from one script to the next; `rm -rf .state` starts over, as on any disk.
func TestStateIsOnTheGuestDiskOnALimaMount(t *testing.T) {
	for _, fstype := range []string{"9p", "virtiofs", "fuse.sshfs"} {
		t.Run(fstype, func(t *testing.T) {
			c := newLibCheckout(t)
			state := filepath.Join(c.repo, ".state")
			target := filepath.Join(c.guest, "state", c.repo)

			got, stderr, err := c.source(t, fstype)
			require.NoError(t, err, stderr)
			require.Equal(t, state, got, "STATE_DIR stays .state in the checkout, as the READMEs name it")
			link, err := os.Readlink(state)
			require.NoError(t, err, ".state must be a link on a %s mount", fstype)
			require.Equal(t, target, link)
			fi, err := os.Stat(target)
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
			require.Contains(t, stderr, ".state is "+target)

			// A unix socket at .state/… is a socket on the guest's disk.
			l, err := net.Listen("unix", filepath.Join(state, "runtime.sock"))
			require.NoError(t, err)
			defer l.Close()
			fi, err = os.Lstat(filepath.Join(target, "runtime.sock"))
			require.NoError(t, err)
			require.Equal(t, os.ModeSocket, fi.Mode().Type())

			// Kept by the next script.
			require.NoError(t, os.WriteFile(filepath.Join(state, "kept"), nil, 0o600))
			_, stderr, err = c.source(t, fstype)
			require.NoError(t, err, stderr)
			require.FileExists(t, filepath.Join(state, "kept"))
			require.NotContains(t, stderr, ".state is", "the link is made once")

			// rm -rf .state starts over: the next link leads to an empty directory.
			require.NoError(t, os.RemoveAll(state))
			_, stderr, err = c.source(t, fstype)
			require.NoError(t, err, stderr)
			entries, err := os.ReadDir(state)
			require.NoError(t, err)
			require.Empty(t, entries, "a new .state starts empty")
		})
	}
}

// TestStateStaysInTheCheckoutElsewhere checks that lib.sh leaves .state
// alone on a local disk, where findmnt is missing, and with
// MYKUBELET_STATE_DIR set; and that a .state directory already on a lima
// mount stops the script with what to do, rather than holding sockets that
// cannot be made.
func TestStateStaysInTheCheckoutElsewhere(t *testing.T) {
	for name, fstype := range map[string]string{"local disk": "ext4", "no findmnt": ""} {
		t.Run(name, func(t *testing.T) {
			c := newLibCheckout(t)
			got, stderr, err := c.source(t, fstype)
			require.NoError(t, err, stderr)
			require.Equal(t, filepath.Join(c.repo, ".state"), got)
			require.NoFileExists(t, filepath.Join(c.repo, ".state"))
			require.NoDirExists(t, c.guest)
		})
	}
	t.Run("MYKUBELET_STATE_DIR", func(t *testing.T) {
		c := newLibCheckout(t)
		own := filepath.Join(t.TempDir(), "own")
		got, stderr, err := c.source(t, "9p", "MYKUBELET_STATE_DIR="+own)
		require.NoError(t, err, stderr)
		require.Equal(t, own, got)
		require.NoFileExists(t, filepath.Join(c.repo, ".state"))
		require.NoDirExists(t, c.guest)
	})
	t.Run("a .state directory on the mount", func(t *testing.T) {
		c := newLibCheckout(t)
		require.NoError(t, os.Mkdir(filepath.Join(c.repo, ".state"), 0o700))
		_, stderr, err := c.source(t, "virtiofs")
		require.Error(t, err)
		require.Contains(t, stderr, "cannot hold unix sockets: move it away (mv .state .state.host)")
		require.NoDirExists(t, c.guest)
	})
}
