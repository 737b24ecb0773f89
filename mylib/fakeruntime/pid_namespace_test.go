package fakeruntime

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/fakeruntime/sandboxproc"
)

// createInPIDNamespace creates a container of image running cmd (none:
// the image's default) with PID namespace mode pid, as the kubelet asks
// for its containers (NamespaceMode POD for shareProcessNamespace).
func createInPIDNamespace(t *testing.T, r *Runtime, sb, name, image string, pid runtimeapi.NamespaceMode, cmd ...string) string {
	t.Helper()
	resp, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: image},
			Command: cmd,
			Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Pid: pid}}}}})
	require.NoError(t, err)
	return resp.ContainerId
}

// psIn runs ps in container id once the processes it waits for are
// listed in its PID namespace (looked at directly: each ps would take a
// PID), and returns what it printed.
func psIn(t *testing.T, r *Runtime, id string, waitFor ...string) string {
	t.Helper()
	r.mu.Lock()
	c := r.containers[id]
	r.mu.Unlock()
	require.Eventually(t, func() bool {
		for _, w := range waitFor {
			if !slices.ContainsFunc(c.running.Namespace().List(), func(e sandboxproc.PsEntry) bool { return e.Args == w }) {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "%q never ran in the PID namespace of %s", waitFor, short(id))
	resp, err := r.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"ps"}})
	require.NoError(t, err)
	return string(resp.Stdout)
}

// TestPodPIDNamespaceSharesTheProcessView: containers created with PID
// namespace mode POD (shareProcessNamespace: true) see one process list,
// whose PID 1 is the sandbox's pause process, as on a real node; a
// container of the same pod with mode CONTAINER sees only its own, its
// command as PID 1.
func TestPodPIDNamespaceSharesTheProcessView(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "shared", "uid-1", nil)
	_, err := r.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "httpd:2.4"}})
	require.NoError(t, err)
	app := createInPIDNamespace(t, r, sb, "app", "busybox:1.36", runtimeapi.NamespaceMode_POD, "sh", "-c", "sleep 1000")
	startContainer(t, r, app)
	waitRunningUtility(t, r, app, "sleep", 1)
	web := createInPIDNamespace(t, r, sb, "web", "docker.io/library/httpd:2.4", runtimeapi.NamespaceMode_POD)
	startContainer(t, r, web)
	alone := createInPIDNamespace(t, r, sb, "alone", "busybox:1.36", runtimeapi.NamespaceMode_CONTAINER, "top")
	startContainer(t, r, alone)

	want := "PID   USER     TIME  COMMAND\n" +
		"    1 65535     0:00 /pause\n" +
		"    2 root      0:00 sh -c sleep 1000\n" +
		"    3 root      0:00 sleep 1000\n" +
		"    4 root      0:00 httpd -DFOREGROUND\n"
	got := psIn(t, r, web, "httpd -DFOREGROUND")
	assert.Equal(t, want+"    5 root      0:00 ps\n", got, "the pause process, app's shell and its sleep, web's httpd (not the utilities the mock plays it with), and ps")
	assert.Equal(t, want+"    6 root      0:00 ps\n", psIn(t, r, app), "app sees the same, and ps is a new process")
	resp := execIn(t, r, app, "pgrep", "httpd")
	assert.Equal(t, "4\n", string(resp.Stdout), "pgrep finds the other container's process")

	assert.Equal(t, "PID   USER     TIME  COMMAND\n    1 root      0:00 top\n    2 root      0:00 ps\n", psIn(t, r, alone, "top"),
		"a container with its own PID namespace: its command is PID 1")
}

// TestPauseImageHasNoShell: the pause image has /pause and nothing else:
// an exec of sh in its container fails to start, as runc's does, over
// ExecSync and over the streaming exec (where kubectl prints the error
// upstream's streaming server wraps); ps in a debug container that
// targets it lists it as /pause.
func TestPauseImageHasNoShell(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "ephemeral-demo", "uid-1", nil)
	pause := createContainer(t, r, sb, "ephemeral-demo") // the pause image's default command
	startContainer(t, r, pause)
	waitSleeping(t, r)

	for _, cmd := range [][]string{{"sh"}, {"ls", "/"}, {"/bin/sh", "-c", "true"}} {
		_, err := r.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: pause, Cmd: cmd})
		require.Error(t, err, "%q", cmd)
		assert.Equal(t, codes.Unknown, status.Code(err), "%v", err)
		assert.Regexp(t, `^failed to exec in container: failed to start exec "[0-9a-f]{64}": OCI runtime exec failed: exec failed: unable to start container process: exec: "`+cmd[0]+`": `,
			status.Convert(err).Message())
	}
	_, err := r.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: pause, Cmd: []string{"sh"}})
	assert.Contains(t, err.Error(), `exec: "sh": executable file not found in $PATH: unknown`)
	_, err = r.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: pause, Cmd: []string{"/bin/sh"}})
	assert.Contains(t, err.Error(), `exec: "/bin/sh": stat /bin/sh: no such file or directory: unknown`)

	var out bytes.Buffer
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", mustParse(t, execURL(t, r, pause, true, true, "sh")))
	require.NoError(t, err)
	err = ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: strings.NewReader("echo no\n"), Stdout: &out, Tty: true})
	require.Error(t, err)
	assert.Regexp(t, `^Internal error occurred: error executing command in container: failed to exec in container: failed to start exec "[0-9a-f]{64}": OCI runtime exec failed: exec failed: unable to start container process: exec: "sh": executable file not found in \$PATH: unknown$`,
		err.Error(), "what kubectl exec prints after \"error: \"")
	assert.Empty(t, out.String())

	dbg, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "debugger"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
			Command: []string{"sleep", "1000"},
			Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: pause}}}}})
	require.NoError(t, err)
	startContainer(t, r, dbg.ContainerId)
	assert.Equal(t, "PID   USER     TIME  COMMAND\n    1 root      0:00 /pause\n    2 root      0:00 sleep 1000\n    3 root      0:00 ps\n",
		psIn(t, r, dbg.ContainerId, "sleep 1000"), "the target's /pause, not the sleep the mock plays it with")
	assert.Equal(t, "ok\n", string(execIn(t, r, dbg.ContainerId, "sh", "-c", "echo ok").Stdout), "busybox has a shell")
}

// TestPodPIDNamespaceInTheSandboxProcess: as TestPodPIDNamespaceSharesTheProcessView,
// with the scripts in the sandbox process (root): the pod's containers
// share one process list there, its PID 1 the pause process, and a
// container of another pod does not see it.
func TestPodPIDNamespaceInTheSandboxProcess(t *testing.T) {
	r := sandboxRuntime(t)
	sb := runSandbox(t, r, "shared", "uid-1", nil)
	app := createInPIDNamespace(t, r, sb, "app", "busybox:1.36", runtimeapi.NamespaceMode_POD, "sh", "-c", "sleep 1000")
	startContainer(t, r, app)
	web := createInPIDNamespace(t, r, sb, "web", "busybox:1.36", runtimeapi.NamespaceMode_POD, "top")
	startContainer(t, r, web)
	other := createInPIDNamespace(t, r, runSandbox(t, r, "other", "uid-2", nil), "other", "busybox:1.36", runtimeapi.NamespaceMode_POD, "top")
	startContainer(t, r, other)

	ps := func(id string) string {
		resp, err := r.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"ps"}})
		require.NoError(t, err)
		return string(resp.Stdout)
	}
	// The sandbox process's list is not the runtime's to look at: wait
	// with pgrep (each takes a PID), then compare without the PIDs.
	require.Eventually(t, func() bool {
		out := string(execIn(t, r, app, "sh", "-c", "pgrep sleep && pgrep top").Stdout)
		return strings.Count(out, "\n") == 2
	}, 10*time.Second, 10*time.Millisecond, "app's sleep and web's top never both ran")
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(ps(web)), "\n") {
		got = append(got, strings.Join(strings.Fields(l)[1:], " "))
	}
	// app and web start side by side in the sandbox process: their
	// processes may come in any order.
	require.Len(t, got, 6, "%q", got)
	assert.Equal(t, []string{"USER TIME COMMAND", "65535 0:00 /pause"}, got[:2])
	assert.ElementsMatch(t, []string{"root 0:00 sh -c sleep 1000", "root 0:00 sleep 1000", "root 0:00 top"}, got[2:5])
	assert.Equal(t, "root 0:00 ps", got[5])
	assert.Contains(t, ps(app), "    1 65535     0:00 /pause\n")
	require.Eventually(t, func() bool { return strings.Contains(ps(other), " top\n") }, 10*time.Second, 10*time.Millisecond)
	assert.NotContains(t, ps(other), "sleep", "another pod's namespace")
}
