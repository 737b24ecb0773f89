package fakeruntime

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// statusUID is the real, effective, saved and file system uid of process
// pid, from /proc/<pid>/status.
func statusUID(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^Uid:\s+(.*)$`).FindStringSubmatch(string(b))
	require.NotNil(t, m)
	return strings.Join(strings.Fields(m[1]), " ")
}

// TestEachPodHasASandboxProcessOfItsOwn: two pods on one runtime run in two
// processes as two users of the runtime's range; one pod's process killed
// (SIGKILL) ends its containers (137), and the other pod's container keeps
// its ID and runs on in its process. (One process for every pod before:
// the kill ended both pods' containers, and both ran as 65534.)
func TestEachPodHasASandboxProcessOfItsOwn(t *testing.T) {
	r := sandboxRuntime(t)
	a := runSandbox(t, r, "a", "uid-a", nil)
	b := runSandbox(t, r, "b", "uid-b", nil)
	ca := createContainer(t, r, a, "app", "sh", "-c", "while true; do sleep 1; done")
	cb := createContainer(t, r, b, "app", "sh", "-c", "while true; do sleep 1; done")
	startContainer(t, r, ca)
	startContainer(t, r, cb)

	pa, pb := sandboxPID(t, r, a), sandboxPID(t, r, b)
	require.NotEqual(t, pa, pb, "a process per pod")
	ua, ub := sandboxUIDOf(t, r, a), sandboxUIDOf(t, r, b)
	require.NotEqual(t, ua, ub)
	for pid, uid := range map[int]int{pa: ua, pb: ub} {
		require.GreaterOrEqual(t, uid, SandboxUIDBase)
		require.Less(t, uid, SandboxUIDBase+SandboxUIDCount)
		u := strconv.Itoa(uid)
		require.Equal(t, u+" "+u+" "+u+" "+u, statusUID(t, pid))
	}

	require.NoError(t, syscall.Kill(pa, syscall.SIGKILL))
	waitDone(t, r, ca)
	st := containerStatus(t, r, ca)
	require.EqualValues(t, ExitCodeSIGKILL, st.ExitCode)
	require.Equal(t, ReasonError, st.Reason)

	time.Sleep(200 * time.Millisecond) // what a wrong death would have ended by now
	st = containerStatus(t, r, cb)
	require.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, st.State, "the other pod's container runs on")
	require.Equal(t, cb, st.Id)
	require.Equal(t, pb, sandboxPID(t, r, b), "in the same process")
	resp, err := r.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: cb, Cmd: []string{"echo", "still here"}, Timeout: 30})
	require.NoError(t, err)
	require.Equal(t, "still here\n", string(resp.Stdout))

	// Removed, a pod gives its process's user back.
	_, err = r.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: b})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !processExists(pb) }, 30*time.Second, 10*time.Millisecond)
	require.Nil(t, r.sandbox.lookup(b))
}

// processExists says whether pid is a process that has not been reaped.
func processExists(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// killAs runs kill -STOP pid as uid, and returns what it said and whether
// it succeeded.
func killAs(t *testing.T, uid, pid int) (string, bool) {
	t.Helper()
	cmd := exec.Command("kill", "-STOP", strconv.Itoa(pid))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

// TestAnotherUserCannotSignalASandboxProcess: a local process of another
// user (nobody, which every sandbox process was before) cannot stop a
// pod's sandbox process, nor can a process of another pod's user: the
// kernel says EPERM.
func TestAnotherUserCannotSignalASandboxProcess(t *testing.T) {
	r := sandboxRuntime(t)
	a := runSandbox(t, r, "a", "uid-a", nil)
	b := runSandbox(t, r, "b", "uid-b", nil)
	ca := createContainer(t, r, a, "app", "sleep", "3600")
	cb := createContainer(t, r, b, "app", "sleep", "3600")
	startContainer(t, r, ca)
	startContainer(t, r, cb)
	pa := sandboxPID(t, r, a)
	for _, uid := range []int{65534, sandboxUIDOf(t, r, b)} {
		out, ok := killAs(t, uid, pa)
		require.False(t, ok, "uid %d stopped the sandbox process: %s", uid, out)
		require.Contains(t, strings.ToLower(out), "not permitted", "uid %d", uid)
	}
	b2, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pa))
	require.NoError(t, err)
	require.Contains(t, string(b2), ") S ", "not stopped")
	resp, err := r.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: ca, Cmd: []string{"echo", "ok"}, Timeout: 30})
	require.NoError(t, err)
	require.Equal(t, "ok\n", string(resp.Stdout))
}

// testCgroup makes a pod cgroup for a test under the cgroup filesystem
// (v1: in the memory, cpu and pids hierarchies; v2: one directory), with
// memory limit bytes (0: none), and returns its cgroupfs name; it is
// removed when the test ends.
func testCgroup(t *testing.T, r *Runtime, limit int64) string {
	t.Helper()
	v2, v1, err := cgroupHierarchies()
	if err != nil {
		t.Skipf("no cgroup filesystem: %v", err)
	}
	name := fmt.Sprintf("/mykubelet-test-%d-%d/pod%s", os.Getpid(), time.Now().UnixNano(), "test")
	var tops []string
	var dirs []string
	if v2 != "" {
		for _, c := range []string{"+memory", "+cpu", "+pids"} {
			_ = os.WriteFile(filepath.Join(v2, "cgroup.subtree_control"), []byte(c), 0)
		}
		tops, dirs = append(tops, filepath.Join(v2, filepath.Dir(name))), append(dirs, filepath.Join(v2, name))
	} else {
		for _, c := range []string{"memory", "cpu", "pids"} {
			if mp, ok := v1[c]; ok {
				tops, dirs = append(tops, filepath.Join(mp, filepath.Dir(name))), append(dirs, filepath.Join(mp, name))
			}
		}
	}
	t.Cleanup(func() {
		// The runtime removes the sandbox's cgroup once its process has
		// exited: after its Close.
		_ = r.Close()
		for _, top := range tops {
			assert.Eventually(t, func() bool { return rmdirAll(top) == nil }, 30*time.Second, 50*time.Millisecond, "remove %s", top)
		}
	})
	for _, d := range dirs {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	if limit > 0 {
		if v2 != "" {
			require.NoError(t, os.WriteFile(filepath.Join(dirs[0], "memory.max"), []byte(strconv.FormatInt(limit, 10)), 0))
		} else {
			require.NoError(t, os.WriteFile(filepath.Join(v1["memory"], name, "memory.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0))
		}
	}
	return name
}

// rmdirAll removes the cgroup dir and those under it (rmdir only: a
// cgroup's files go with it), deepest first.
func rmdirAll(dir string) error {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := rmdirAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := syscall.Rmdir(dir); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// runSandboxIn runs a pod sandbox whose CgroupParent is parent.
func runSandboxIn(t *testing.T, r *Runtime, name, parent string) string {
	t.Helper()
	resp, err := r.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name},
		Linux:    &runtimeapi.LinuxPodSandboxConfig{CgroupParent: parent},
	}})
	require.NoError(t, err)
	return resp.PodSandboxId
}

// TestASandboxProcessIsInItsPodCgroup: given a CgroupParent, the pod's
// sandbox process is in a child of it named after the sandbox, in every
// hierarchy the parent is in; the cgroup goes with the pod. (It stayed in
// the runtime's cgroup before.)
func TestASandboxProcessIsInItsPodCgroup(t *testing.T) {
	r := sandboxRuntime(t)
	parent := testCgroup(t, r, 0)
	sb := runSandboxIn(t, r, "cg", parent)
	c := createContainer(t, r, sb, "app", "sleep", "3600")
	startContainer(t, r, c)
	pid := sandboxPID(t, r, sb)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	require.NoError(t, err)
	want := parent + "/" + sb
	v2, v1, err := cgroupHierarchies()
	require.NoError(t, err)
	lines := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		require.Len(t, f, 3, line)
		controllers := "," + f[1] + ","
		v1Line := strings.Contains(controllers, ",memory,") || strings.Contains(controllers, ",cpu,") || strings.Contains(controllers, ",pids,")
		if (v2 != "" && f[1] == "") || (v2 == "" && v1Line) {
			require.Equal(t, want, f[2], "%s: in the pod's cgroup", line)
			lines++
		}
	}
	require.NotZero(t, lines, string(b))

	_, err = r.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb})
	require.NoError(t, err)
	dir := filepath.Join(v2, want)
	if v2 == "" {
		dir = filepath.Join(v1["memory"], want)
	}
	require.Eventually(t, func() bool { _, err := os.Stat(dir); return os.IsNotExist(err) }, 30*time.Second, 10*time.Millisecond, "the sandbox's cgroup goes with it")
}

// TestAKernelOOMKillEndsOnlyThatPodsContainers: a pod cgroup of 64 MiB
// whose script grows a string past it (the printf of 1 MB,
// doubled): the kernel's OOM killer ends that pod's sandbox process, its
// container is OOMKilled (137), and a bystander pod runs on, its
// container and its process the same. (Before, the one sandbox process
// of every pod was in no pod cgroup: it took gigabytes.)
func TestAKernelOOMKillEndsOnlyThatPodsContainers(t *testing.T) {
	r := sandboxRuntime(t)
	by := runSandbox(t, r, "bystander", "uid-bystander", nil)
	bc := createContainer(t, r, by, "app", "sh", "-c", "while true; do sleep 1; done")
	startContainer(t, r, bc)
	byPID := sandboxPID(t, r, by)

	parent := testCgroup(t, r, 64<<20)
	sb := runSandboxIn(t, r, "hog", parent)
	c := createContainer(t, r, sb, "app", "sh", "-c", `x=$(printf '%01000000d' 0); while true; do x="$x$x"; echo "${#x}"; done`)
	startContainer(t, r, c)
	done := make(chan struct{})
	go func() { waitDone(t, r, c); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the hog was not killed in 2 minutes")
	}
	st := containerStatus(t, r, c)
	require.EqualValues(t, ExitCodeSIGKILL, st.ExitCode)
	require.Equal(t, ReasonOOMKilled, st.Reason, "the kernel's OOM kill is the container's")

	st = containerStatus(t, r, bc)
	require.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, st.State)
	require.Equal(t, bc, st.Id)
	require.Equal(t, byPID, sandboxPID(t, r, by))
}

// TestASandboxProcessStartsFromTheBinaryTheRuntimeStartedFrom: the binary
// at the runtime's path replaced (rebuilt) after it started, a new pod's
// sandbox process is still the runtime's own binary, from the descriptor
// it opened at start; by path it would have run the new file, which here
// exits at once ("it did not start").
func TestASandboxProcessStartsFromTheBinaryTheRuntimeStartedFrom(t *testing.T) {
	r := sandboxRuntime(t)
	self, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "runtime")
	copyFile(t, self, bin)
	exe, err := openExe(bin)
	require.NoError(t, err)
	t.Cleanup(func() { exe.Close() })
	r.sandbox.exe = exe // the binary of every runtime of this process stays open

	rebuilt := bin + ".new"
	require.NoError(t, os.WriteFile(rebuilt, []byte("#!/bin/sh\necho rebuilt >&2\nexit 3\n"), 0o755))
	require.NoError(t, os.Rename(rebuilt, bin))

	st, out := runLogged(t, r, "after-rebuild", `echo fine`)
	require.EqualValues(t, 0, st.ExitCode, out)
	require.Equal(t, "fine\n", out)

	// Started from a binary named "runtime", it still names itself as
	// every sandbox process does, for ps -e and top.
	pods, err := r.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1)
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", sandboxPID(t, r, pods.Items[0].Id)))
	require.NoError(t, err)
	require.Equal(t, "mykubelet-sandb\n", string(comm))
}

// copyFile copies src to dst, executable.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}

// TestSandboxUIDsAreClaimedOnceAcrossRuntimes: two runtimes of one
// machine never hand out the same uid (the lock files), and a uid given
// back is free again.
func TestSandboxUIDsAreClaimedOnceAcrossRuntimes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the sandbox users' directory is root's")
	}
	seen := map[int]bool{}
	var slots []*uidSlot
	for range 20 {
		s, err := claimUID(0)
		require.NoError(t, err)
		require.False(t, seen[s.uid], "uid %d claimed twice", s.uid)
		seen[s.uid] = true
		slots = append(slots, s)
	}
	// Another process (another runtime) cannot take a uid this one holds.
	for _, s := range slots[:3] {
		out, err := exec.Command("flock", "-n", "-x", filepath.Join(sandboxUIDDir, strconv.Itoa(s.uid)), "true").CombinedOutput()
		assert.Error(t, err, "another process locked uid %d: %s", s.uid, out)
	}
	slots[0].release()
	out, err := exec.Command("flock", "-n", "-x", filepath.Join(sandboxUIDDir, strconv.Itoa(slots[0].uid)), "true").CombinedOutput()
	assert.NoError(t, err, "a uid given back is free: %s", out)
	for _, s := range slots[1:] {
		s.release()
	}
}
