package fakeruntime

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestASandboxProcessHoldsOnlyTheDescriptorsItWasGiven: a descriptor the
// runtime inherited without close-on-exec (here the host's /etc, as a
// shell's 7</etc would leave it) does not pass through pivot_root into a
// pod's sandbox process: it closes every inherited descriptor but its
// stdio and the runtime's socket before its walls go up.
func TestASandboxProcessHoldsOnlyTheDescriptorsItWasGiven(t *testing.T) {
	r := sandboxRuntime(t)
	fd, err := unix.Open("/etc", unix.O_RDONLY|unix.O_DIRECTORY, 0) // no O_CLOEXEC: inherited by what the runtime starts
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	var etc unix.Stat_t
	require.NoError(t, unix.Fstat(fd, &etc))

	sb := runSandbox(t, r, "fds", "uid-fds", nil)
	c := createContainer(t, r, sb, "one", "sleep", "3600")
	startContainer(t, r, c)
	pid := sandboxPID(t, r, sb)
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		var st syscall.Stat_t
		if syscall.Stat(dir+"/"+e.Name(), &st) != nil {
			continue // gone meanwhile
		}
		target, _ := os.Readlink(dir + "/" + e.Name())
		require.False(t, st.Dev == etc.Dev && st.Ino == etc.Ino, "the sandbox process holds the host's /etc as fd %s (-> %s)", e.Name(), target)
	}
}

// TestSandboxUIDsStayClearOfSubordinateIDs: a second local user's usual
// /etc/subuid range (165536-231071) overlaps the runtime's 200000-249999;
// the runtime reads the files when it claims a uid and skips every id they
// hand out (here to 231071, and 240000-240099 of /etc/subgid).
func TestSandboxUIDsStayClearOfSubordinateIDs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the sandbox users' directory is root's")
	}
	dir := t.TempDir()
	subuid, subgid := filepath.Join(dir, "subuid"), filepath.Join(dir, "subgid")
	require.NoError(t, os.WriteFile(subuid, []byte("alice:100000:65536\nbob:165536:65536\n"), 0o644))
	require.NoError(t, os.WriteFile(subgid, []byte("# comment\nbob:240000:100\n"), 0o644))
	ranges, err := subordinateRanges(subuid, subgid, filepath.Join(dir, "missing"))
	require.NoError(t, err)
	require.Equal(t, [][2]int{{100000, 65536}, {165536, 65536}, {240000, 100}}, ranges)

	oldFiles, oldDir := subIDFiles, sandboxUIDDir
	subIDFiles, sandboxUIDDir = []string{subuid, subgid}, filepath.Join(dir, "uids")
	uidCursor.Lock()
	oldNext := uidCursor.next
	uidCursor.next = 0
	uidCursor.Unlock()
	t.Cleanup(func() {
		subIDFiles, sandboxUIDDir = oldFiles, oldDir
		uidCursor.Lock()
		uidCursor.next = oldNext
		uidCursor.Unlock()
	})
	standIn, err := rootStandIn()
	require.NoError(t, err)
	require.Equal(t, 231072, standIn, "the root stand-in: the first id clear of them")
	var uids []int
	for range 3 {
		s, err := claimUID(standIn)
		require.NoError(t, err)
		defer s.release()
		uids = append(uids, s.uid)
	}
	require.Equal(t, []int{231073, 231074, 231075}, uids, "no pod is the root stand-in")
	uidCursor.Lock()
	uidCursor.next = 240000 - SandboxUIDBase
	uidCursor.Unlock()
	s, err := claimUID(0)
	require.NoError(t, err)
	defer s.release()
	require.Equal(t, 240100, s.uid, "/etc/subgid's 240000-240099 skipped too")
}

// TestASandboxProcessRunsUnderASeccompFilter: /proc/<pid>/status shows the
// filter (mode 2) on the pod's process, and its scripts still run.
func TestASandboxProcessRunsUnderASeccompFilter(t *testing.T) {
	r := sandboxRuntime(t)
	st, out := runLogged(t, r, "seccomp", `echo hi; sleep 0.1 & wait; ls /`)
	require.EqualValues(t, 0, st.ExitCode, out)
	require.Equal(t, "hi\ndev\netc\nproc\ntmp\nvar\n", out)
	sb := runSandbox(t, r, "filtered", "uid-filtered", nil)
	startContainer(t, r, createContainer(t, r, sb, "one", "sleep", "3600"))
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", sandboxPID(t, r, sb)))
	require.NoError(t, err)
	require.Contains(t, string(status), "Seccomp:\t2\n")
}

// TestACodeExecutionBugStaysInItsPod plays a bug of the interpreter that
// runs native code in a pod's sandbox process: the sandbox binary built
// with the tag mykubelet_codeexec, whose scripts can call
// mykubelet-codeexec (sandboxproc/codeexec_hook.go). With the forged file
// handle of the "shocker" escape (open_by_handle_at, inode 2) it opens
// nothing, on its own root nor on its container's mount, which is the
// host's filesystem; and of the host's /etc, which the runtime holds
// without close-on-exec, it holds no descriptor. Each wall holds alone:
// the seccomp filter refuses the call; built also with the tag
// mykubelet_noseccomp (no filter), the kernel still refuses it, for the
// process's capability is its own user namespace's, not the host's.
func TestACodeExecutionBugStaysInItsPod(t *testing.T) {
	for _, c := range []struct {
		tags    string
		seccomp string // its Seccomp: line
	}{
		{"mykubelet_codeexec", "2"},
		{"mykubelet_codeexec,mykubelet_noseccomp", "0"},
	} {
		t.Run(c.tags, func(t *testing.T) { codeExecutionStaysInItsPod(t, c.tags, c.seccomp) })
	}
}

func codeExecutionStaysInItsPod(t *testing.T, tags, seccomp string) {
	r := sandboxRuntime(t)
	r.sandbox.exe = codeExecSandboxBinary(t, tags)
	fd, err := unix.Open("/etc", unix.O_RDONLY|unix.O_DIRECTORY, 0) // no O_CLOEXEC
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	var etc, state unix.Stat_t
	require.NoError(t, unix.Fstat(fd, &etc))

	st, out := runLogged(t, r, "codeexec", `mykubelet-codeexec handles; mykubelet-codeexec fds`)
	require.EqualValues(t, 0, st.ExitCode, out)
	r.sandbox.mu.Lock()
	var pods []string
	for id := range r.sandbox.pods {
		pods = append(pods, id)
	}
	r.sandbox.mu.Unlock()
	require.Len(t, pods, 1)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", sandboxPID(t, r, pods[0])))
	require.NoError(t, err)
	require.Contains(t, string(status), "Seccomp:\t"+seccomp+"\n")
	r.mu.Lock()
	require.NoError(t, unix.Stat(r.stateDir, &state)) // where its containers' files are
	r.mu.Unlock()
	handles := regexp.MustCompile(`(?m)^handle (\S+) dev (\d+): (.*)$`).FindAllStringSubmatch(out, -1)
	fds := regexp.MustCompile(`(?m)^fd (\d+): dev (\d+) ino (\d+)$`).FindAllStringSubmatch(out, -1)
	require.NotEmpty(t, fds, out)
	onHost := false
	for _, h := range handles {
		assert.NotEqual(t, "opened", h[3], "%s: open_by_handle_at gave the process its filesystem's root", h[1])
		if h[2] == strconv.FormatUint(state.Dev, 10) {
			onHost = true
			assert.Contains(t, h[3], "operation not permitted", "%s: on the host's filesystem the kernel refuses the call", h[1])
		}
	}
	require.True(t, onHost, "no directory the process can name is on the host's filesystem (dev %d): the attack was not tried there\n%s", state.Dev, out)
	for _, f := range fds {
		assert.False(t, f[2] == strconv.FormatUint(etc.Dev, 10) && f[3] == strconv.FormatUint(etc.Ino, 10),
			"fd %s of the sandbox process is the host's /etc", f[1])
	}
}

// codeExecSandboxBinary builds the sandbox binary with tags, as the runtime builds its own (sandboxproc_binary.go),
// and opens it.
func codeExecSandboxBinary(t *testing.T, tags string) *os.File {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mykubelet-sandbox-codeexec")
	cmd := exec.Command("go", "build", "-tags", tags, "-o", bin, sandboxBinaryPackage)
	cmd.Dir = moduleDir()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-trimpath")
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", msg)
	f, err := openExe(bin)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

// TestWithoutAUserNamespaceASandboxProcessKeepsNoCapability: where no
// user namespace can be made (played by the runtime's giving up on them),
// the sandbox process runs in the host's, as its pod's user, with no
// capability at all: a capability there would be one over the host's
// files. A Secret file of mode 0400 is then refused, as the log says.
func TestWithoutAUserNamespaceASandboxProcessKeepsNoCapability(t *testing.T) {
	r := sandboxRuntime(t)
	r.sandbox.noUserNamespace(errors.New("played by the test"))
	sb := runSandbox(t, r, "plain", "uid-plain", nil)
	startContainer(t, r, createContainer(t, r, sb, "one", "sleep", "3600"))
	pid := sandboxPID(t, r, sb)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, want := range []string{"CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "CapAmb:\t0000000000000000", "Seccomp:\t2\n"} {
		require.Contains(t, string(status), want)
	}
	ours, err := os.Readlink("/proc/self/ns/user")
	require.NoError(t, err)
	its, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/user", pid))
	require.NoError(t, err)
	require.Equal(t, ours, its, "the host's user namespace")
}
