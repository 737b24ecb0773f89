package fakeruntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/fakeruntime/sandboxproc"
)

// sandboxRuntime is a runtime whose scripts run in the sandbox process:
// root, on the real clock. It skips the test when not root.
func sandboxRuntime(t *testing.T) *Runtime {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the sandbox process needs root")
	}
	r, err := NewRuntime(Config{Clock: clock.RealClock{}, StateDir: t.TempDir()})
	require.NoError(t, err)
	require.NotNil(t, r.sandbox, "a root runtime on the real clock runs its scripts in the sandbox process")
	t.Cleanup(func() { _ = r.Close() })
	for _, img := range []string{"busybox:1.36", "registry.k8s.io/pause:3.10"} {
		_, err = r.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img}})
		require.NoError(t, err)
	}
	return r
}

// sandboxPID is the process ID of pod sandbox sb's sandbox process, which
// must run.
func sandboxPID(t *testing.T, r *Runtime, sb string) int {
	t.Helper()
	pid := r.sandbox.pid(sb)
	require.NotZero(t, pid, "pod sandbox %s has a sandbox process", sb)
	return pid
}

// sandboxUIDOf is the user pod sandbox sb's sandbox process runs as.
func sandboxUIDOf(t *testing.T, r *Runtime, sb string) int {
	t.Helper()
	p := r.sandbox.lookup(sb)
	require.NotNil(t, p, "pod sandbox %s has a sandbox user", sb)
	return p.uid.uid
}

// logOf returns what container id wrote to its log.
func logOf(t *testing.T, r *Runtime, id string) string {
	t.Helper()
	r.mu.Lock()
	path := r.containers[id].logPath
	r.mu.Unlock()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	entries, err := ReadLog(f)
	require.NoError(t, err)
	out := ""
	for _, e := range entries {
		out += e.Text + "\n"
	}
	return out
}

// runLogged runs script in a new busybox container with a log, and returns
// its status once it ended and what it wrote.
func runLogged(t *testing.T, r *Runtime, pod, script string) (*runtimeapi.ContainerStatus, string) {
	t.Helper()
	ctx := context.Background()
	sb, err := r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod, Namespace: "default", Uid: "uid-" + pod},
		LogDirectory: t.TempDir(),
	}})
	require.NoError(t, err)
	c, err := r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		Command: []string{"sh", "-c", script}, LogPath: "app/0.log"}})
	require.NoError(t, err)
	startContainer(t, r, c.ContainerId)
	waitDone(t, r, c.ContainerId)
	return containerStatus(t, r, c.ContainerId), logOf(t, r, c.ContainerId)
}

// TestSandboxProcessRunsTheScript: a script in the sandbox process sees
// the container's root, its own PID 1, and its output reaches the log in
// the order it wrote it, stdout and stderr interleaved.
func TestSandboxProcessRunsTheScript(t *testing.T) {
	r := sandboxRuntime(t)
	st, out := runLogged(t, r, "smoke", `echo one $$; echo two >&2; echo three; ls /; pwd -P; echo x > /tmp/f; cat /tmp/f; exit 3`)
	require.EqualValues(t, 3, st.ExitCode)
	require.Equal(t, "one 1\ntwo\nthree\ndev\netc\nproc\ntmp\nvar\n/\nx\n", out)
	_, long := runLogged(t, r, "long", `i=0; while [ $i -lt 3000 ]; do echo "line $i: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"; echo "err $i" >&2; i=$((i+1)); done`)
	lines := strings.Split(strings.TrimSuffix(long, "\n"), "\n")
	require.Len(t, lines, 6000)
	for i := range 3000 {
		require.Equal(t, fmt.Sprintf("line %d: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", i), lines[2*i])
		require.Equal(t, fmt.Sprintf("err %d", i), lines[2*i+1])
	}
}

// TestASandboxProcessThatDiesEndsItsContainersAndIsReplaced: the sandbox
// process is killed (as a crash would end it): its containers have exited
// with 137, reason Error, as containerd reports those of a shim that died;
// the runtime answers on, and the next container runs in a new one.
func TestASandboxProcessThatDiesEndsItsContainersAndIsReplaced(t *testing.T) {
	r := sandboxRuntime(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c1 := createContainer(t, r, sb, "one", "sleep", "3600")
	startContainer(t, r, c1)
	first := sandboxPID(t, r, sb)
	require.NoError(t, syscall.Kill(first, syscall.SIGKILL))
	waitDone(t, r, c1)
	st := containerStatus(t, r, c1)
	require.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.State)
	require.EqualValues(t, ExitCodeSIGKILL, st.ExitCode)
	require.Equal(t, ReasonError, st.Reason)

	c2 := createContainer(t, r, sb, "two", "sh", "-c", "echo $$; exit 7")
	startContainer(t, r, c2)
	waitDone(t, r, c2)
	require.EqualValues(t, 7, containerStatus(t, r, c2).ExitCode)
	require.NotEqual(t, first, sandboxPID(t, r, sb), "a new sandbox process")
}

// TestSandboxProcessIsWalledIn: what the sandbox process is, from the
// host: another user, in other namespaces, with no_new_privs.
func TestSandboxProcessIsWalledIn(t *testing.T) {
	r := sandboxRuntime(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "one", "sleep", "3600")
	startContainer(t, r, c)
	pid := sandboxPID(t, r, sb)
	uid := sandboxUIDOf(t, r, sb)
	require.GreaterOrEqual(t, uid, SandboxUIDBase)
	require.Less(t, uid, SandboxUIDBase+SandboxUIDCount)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, want := range []string{fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d", uid, uid, uid, uid), fmt.Sprintf("Gid:\t%d\t%d\t%d\t%d", uid, uid, uid, uid), "Groups:\t \n", "NoNewPrivs:\t1",
		// Of root's privileges, reading any file alone (CAP_DAC_READ_SEARCH,
		// bit 2), as a container's root reads a Secret file of mode 0400.
		"CapInh:\t0000000000000000", "CapPrm:\t0000000000000004", "CapEff:\t0000000000000004", "CapBnd:\t0000000000000004", "CapAmb:\t0000000000000000"} {
		require.Contains(t, string(status), want)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	require.NoError(t, err)
	require.Equal(t, "mykubelet-sandbox\x00", string(cmdline), "ps shows it by this name")
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	require.NoError(t, err)
	require.Equal(t, "mykubelet-sandb\n", string(comm), "ps -e shows it by this name (15 bytes of it), not by the descriptor it started from")
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	require.NoError(t, err)
	vars := strings.Split(strings.TrimSuffix(string(environ), "\x00"), "\x00")
	require.Len(t, vars, 1, "nothing of the runtime's environment: %q", vars)
	require.True(t, strings.HasPrefix(vars[0], sandboxproc.SandboxEnv+"="), vars[0])
	// Its / is a tmpfs of its own, root's, holding its pod's containers'
	// files only: no file of the host.
	root := fmt.Sprintf("/proc/%d/root/", pid)
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(root, &st))
	require.EqualValues(t, 0x01021994, st.Type, "tmpfs")
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{".mounts", c}, names)
	fi, err := os.Stat(root)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o711), fi.Mode().Perm(), "its root's: the sandbox process's user may not swap a container's directory")
	require.EqualValues(t, r.sandbox.rootUID, fi.Sys().(*syscall.Stat_t).Uid, "its root is the root stand-in, no one of the host's")
	require.NotZero(t, r.sandbox.rootUID)
	r.mu.Lock()
	rootfs := filepath.Join(r.containers[c].dir, "rootfs")
	r.mu.Unlock()
	fi, err = os.Stat(rootfs)
	require.NoError(t, err)
	require.EqualValues(t, uid, fi.Sys().(*syscall.Stat_t).Uid, "the container's rootfs is its pod's sandbox user's")
	// Its user namespace maps its root to the stand-in and its user to
	// itself, nothing else: its capability is worth nothing in the host's.
	for _, f := range []string{"uid_map", "gid_map"} {
		m, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
		require.NoError(t, err)
		require.Equal(t, strings.Fields(sandboxproc.IDMap(r.sandbox.rootUID, uid)), strings.Fields(string(m)), f)
	}
	for _, ns := range []string{"user", "mnt", "pid", "ipc", "uts", "net"} {
		ours, err := os.Readlink("/proc/self/ns/" + ns)
		require.NoError(t, err)
		its, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
		require.NoError(t, err)
		require.NotEqual(t, ours, its, "namespace %s", ns)
	}
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	require.NoError(t, err)
	require.Regexp(t, `Max core file size\s+0\s+0`, string(limits))
}

// TestSandboxProcessServesOnThePodNetwork: the images' servers run in the
// sandbox process as nobody, in the pod network: nginx still binds :80,
// the host reaches it on the sandbox's IP, and the control API's fail and
// recover reach it across the process boundary.
func TestSandboxProcessServesOnThePodNetwork(t *testing.T) {
	r := networkRuntime(t, clock.RealClock{})
	require.NotNil(t, r.sandbox)
	ip, id := serverContainer(t, r, "web", "nginx:1.27", nil)
	code, body := get(t, "http://"+ip+"/")
	require.Equal(t, 200, code)
	require.Contains(t, body, "Welcome to nginx!")
	_, err := r.ContainerAction(id, ActionFail)
	require.NoError(t, err)
	require.Eventually(t, func() bool { code, _ := get(t, "http://"+ip+"/"); return code == 500 }, 10*time.Second, 10*time.Millisecond)
	_, err = r.ContainerAction(id, ActionRecover)
	require.NoError(t, err)
	require.Eventually(t, func() bool { code, _ := get(t, "http://"+ip+"/"); return code == 200 }, 10*time.Second, 10*time.Millisecond)

	// Stopping it runs its SIGTERM path in the sandbox process: nginx
	// exits 0 at once, long before the grace period.
	start := time.Now()
	_, err = r.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 30})
	require.NoError(t, err)
	require.Less(t, time.Since(start), 10*time.Second)
	st := containerStatus(t, r, id)
	require.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.State)
	require.EqualValues(t, 0, st.ExitCode)
}

// TestSandboxProcessOOMKillsAsTheMemoryDocs: the limits travel to the
// sandbox process with each run, and its OOM kill comes back as the
// container's reason: the docs' memory-demo-2 is OOMKilled, memory-demo
// runs on.
func TestSandboxProcessOOMKillsAsTheMemoryDocs(t *testing.T) {
	r := sandboxRuntime(t)
	_, err := r.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "polinux/stress"}})
	require.NoError(t, err)
	demo, _ := startMemoryDemos(t, r)
	require.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, demo).State)
}

// TestARunTooLargeForOneMessageFailsToStart: a container whose request
// does not fit in one message to the sandbox process (an environment of
// megabytes) fails StartContainer with the reason, and leaves no run
// waiting forever for an exit.
func TestARunTooLargeForOneMessageFailsToStart(t *testing.T) {
	r := sandboxRuntime(t)
	sb := runSandbox(t, r, "big", "uid-big", nil)
	resp, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "big"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		Command: []string{"sleep", "3600"}, Envs: []*runtimeapi.KeyValue{{Key: "BIG", Value: []byte(strings.Repeat("x", 4<<20))}}}})
	require.NoError(t, err)
	_, err = r.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: resp.ContainerId})
	require.ErrorContains(t, err, "message too long")
	require.Equal(t, runtimeapi.ContainerState_CONTAINER_CREATED, containerStatus(t, r, resp.ContainerId).State)
	child := r.sandbox.lookup(sb).live()
	require.NotNil(t, child)
	child.mu.Lock()
	defer child.mu.Unlock()
	require.Empty(t, child.runs)
}
