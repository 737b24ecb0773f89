package fakeruntime

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// waitDone waits, bounded by a context, for c's script to return.
func waitDone(t *testing.T, r *Runtime, id string) {
	t.Helper()
	r.mu.Lock()
	done := r.containers[id].done
	r.mu.Unlock()
	// A bound for a script that never ends, not a measure: generous, for a
	// doubling variable under -race on a loaded machine (10 s was not).
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("container %s: its script did not end", short(id))
	}
}

// waitSleeping waits until n timers wait on the fake clock.
func waitSleeping(t *testing.T, r *Runtime) {
	t.Helper()
	clk := r.clock.(interface{ HasWaiters() bool })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !clk.HasWaiters() {
		select {
		case <-ctx.Done():
			t.Fatal("nothing ever waited on the clock")
		case <-time.After(time.Millisecond):
		}
	}
}

// runToEnd runs script in a new busybox container and returns its status
// once it ended, with the container's ID.
func runToEnd(t *testing.T, r *Runtime, script string) (*runtimeapi.ContainerStatus, string) {
	t.Helper()
	sb := runSandbox(t, r, "web", "uid-"+t.Name(), nil)
	c := createContainer(t, r, sb, "app", "sh", "-c", script)
	startContainer(t, r, c)
	waitDone(t, r, c)
	return containerStatus(t, r, c), c
}

// execIn runs a command in a running container.
func execIn(t *testing.T, r *Runtime, id string, cmd ...string) *runtimeapi.ExecSyncResponse {
	t.Helper()
	resp, err := r.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd})
	require.NoError(t, err)
	return resp
}

func TestExitCodesAndReasons(t *testing.T) {
	r, clk := fixture(t)
	for _, tc := range []struct {
		script string
		code   int32
		reason string
	}{
		{"echo hello", 0, ReasonCompleted},
		{"exit 3", 3, ReasonError},
		{"false", 1, ReasonError},
		{"true && exit 0 || exit 9", 0, ReasonCompleted},
		{"x=$((6*7)); [ \"$x\" = 42 ] && exit $x", 42, ReasonError},
		{"for i in 1 2 3; do n=$i; done; if [ $n -eq 3 ]; then exit 0; fi; exit 1", 0, ReasonCompleted},
		{"no-such-program", ExitCodeNotFound, ReasonError},
		{"/usr/bin/python3 -c 'print(1)'", ExitCodeNotFound, ReasonError},
		{"if then", 2, ReasonError},
	} {
		t.Run(tc.script, func(t *testing.T) {
			st, _ := runToEnd(t, r, tc.script)
			assert.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.State)
			assert.Equal(t, tc.code, st.ExitCode)
			assert.Equal(t, tc.reason, st.Reason)
			assert.Equal(t, clk.Now().UnixNano(), st.FinishedAt)
		})
	}
}

func TestImageDefaults(t *testing.T) {
	assert.Equal(t, "", imageDefault("busybox").Script, "busybox's sh exits at once")
	assert.Equal(t, "", imageDefault("docker.io/library/alpine:3.20").Script)
	assert.Equal(t, runUntilStopped, imageDefault("registry.k8s.io/pause:3.10").Script)
	assert.Equal(t, runUntilStopped, imageDefault("k8s.gcr.io/pause@sha256:0123").Script, "any tag or digest of a known repository, under any of its names")
	assert.Contains(t, imageDefault("nginx:1.27").Script, "while true")
	assert.Equal(t, UnknownImageDefault, imageDefault("example.com/whatever@sha256:abc"))

	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	resp, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "bb"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}}})
	require.NoError(t, err)
	startContainer(t, r, resp.ContainerId)
	waitDone(t, r, resp.ContainerId)
	st := containerStatus(t, r, resp.ContainerId)
	assert.Equal(t, ReasonCompleted, st.Reason, "busybox with no command completes at once, as in reality")

	pause := createContainer(t, r, sb, "pause")
	startContainer(t, r, pause)
	waitSleeping(t, r)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, pause).State)
}

func TestScriptsAreConfinedToTheContainerRoot(t *testing.T) {
	r, _ := fixture(t)
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte("host secret\n"), 0o600))
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "app", "sleep", "3600")
	startContainer(t, r, c)
	r.mu.Lock()
	rootfs := filepath.Join(r.containers[c].dir, "rootfs")
	r.mu.Unlock()
	require.NoError(t, os.Symlink(secret, filepath.Join(rootfs, "tmp/abs-link")))
	rel, err := filepath.Rel(filepath.Join(rootfs, "tmp"), secret)
	require.NoError(t, err)
	require.NoError(t, os.Symlink(rel, filepath.Join(rootfs, "tmp/rel-link")))

	for _, tc := range []struct{ cmd, stderr string }{
		{"cat /etc/passwd", "cat: /etc/passwd: no such file or directory\n"},
		{"cat ../../../../../../../../" + secret, "no such file or directory\n"},
		{"cd /tmp && cat ../../../../../../../../" + secret, "no such file or directory\n"},
		{"cat /tmp/abs-link", "cat: /tmp/abs-link: path escapes from parent\n"},
		{"cat /tmp/rel-link", "cat: /tmp/rel-link: path escapes from parent\n"},
		{"echo pwned > /tmp/rel-link", "path escapes from parent\n"},
		{"rm " + secret, "no such file or directory\n"},
		{"cat /tmp/rel-link/../../" + secret, "no such file or directory\n"},
		{"ls " + filepath.Dir(secret), "no such file or directory\n"},
		{"[ -e " + secret + " ] || echo absent >&2; exit 1", "absent\n"},
		{"rm -rf /; cat " + secret, "no such file or directory\n"},
		{"/bin/cat " + secret, "no such file or directory\n"},
		{"id; uname", "sh: id: command not found"},
		{"x=$(whoami)", "sh: whoami: command not found"},
		{"bash -i", "bash: only bash -c SCRIPT is supported\n"},
		{"type passwd sh", "type: passwd: not found\n"},
		{"command -v go || command -v python3 || echo none >&2; exit 1", "none\n"},
		{". /etc/passwd", "no such file or directory"},
	} {
		resp := execIn(t, r, c, "sh", "-c", tc.cmd)
		assert.NotZero(t, resp.ExitCode, tc.cmd)
		assert.Contains(t, string(resp.Stderr), tc.stderr, tc.cmd)
		assert.NotContains(t, string(resp.Stdout), "host secret", tc.cmd)
	}
	b, err := os.ReadFile(secret)
	require.NoError(t, err)
	assert.Equal(t, "host secret\n", string(b), "the host file is untouched")

	resp := execIn(t, r, c, "sh", "-c", "command -v sleep; command -v echo; type cat")
	assert.Equal(t, "/bin/sleep\necho\ncat is /bin/cat\n", string(resp.Stdout), string(resp.Stderr))

	// What is inside works.
	resp = execIn(t, r, c, "sh", "-c", `mkdir -p /data/x && echo "$HOSTNAME $GREETING" > /data/x/f && cat /data/x/f && ls /data/x && cd /data && cat x/f && rm -r /data && ls /`)
	assert.Equal(t, int32(0), resp.ExitCode, string(resp.Stderr))
	assert.Equal(t, "web \nf\nweb \ndev\netc\nproc\ntmp\nvar\n", string(resp.Stdout))
}

func TestEnvironmentIsTheConfigsPlusHostname(t *testing.T) {
	r, _ := fixture(t)
	sbResp, err := r.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "u"}, Hostname: "web-0"}})
	require.NoError(t, err)
	resp, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sbResp.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		Command: []string{"sleep", "1h"},
		Envs:    []*runtimeapi.KeyValue{{Key: "GREETING", Value: []byte("hi")}}}})
	require.NoError(t, err)
	startContainer(t, r, resp.ContainerId)
	out := execIn(t, r, resp.ContainerId, "env")
	assert.Equal(t, "GREETING=hi\nHOSTNAME=web-0\n", string(out.Stdout), "nothing of the host's environment")
	out = execIn(t, r, resp.ContainerId, "sh", "-c", "hostname; cat /etc/hostname; printenv GREETING")
	assert.Equal(t, "web-0\nweb-0\nhi\n", string(out.Stdout))
}

func TestWorkingDir(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	resp, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		Command: []string{"sleep", "1h"}, WorkingDir: "/srv/app"}})
	require.NoError(t, err)
	_, err = r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "root"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}, WorkingDir: "/"}})
	require.NoError(t, err)
	startContainer(t, r, resp.ContainerId)
	out := execIn(t, r, resp.ContainerId, "sh", "-c", "pwd; touch here; ls /srv/app; cd ..; pwd")
	assert.Equal(t, "/srv/app\nhere\n/srv\n", string(out.Stdout), string(out.Stderr))
}

func TestStopContainerRunsTheTERMTrap(t *testing.T) {
	r, clk := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "app", "sh", "-c", `trap 'echo bye; exit 4' TERM; while true; do sleep 1000; done`)
	startContainer(t, r, c)
	waitSleeping(t, r)
	clk.Step(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := r.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c, Timeout: 30})
	require.NoError(t, err, "the trap ends the script before the timeout (which the fake clock never reaches)")
	st := containerStatus(t, r, c)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.State)
	assert.Equal(t, int32(4), st.ExitCode, "the trap's exit code")
	assert.Equal(t, t0.Add(time.Second).UnixNano(), st.FinishedAt, "no timeout waited")
}

func TestStopContainerTrapInABusyLoop(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "app", "sh", "-c", `trap 'exit 0' TERM; while true; do :; done`)
	startContainer(t, r, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := r.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c, Timeout: 30})
	require.NoError(t, err, "the trap runs before the next command, without a sleep")
	assert.Equal(t, ReasonCompleted, containerStatus(t, r, c).Reason)
}

func TestStopContainerKillsAfterTheTimeoutWithoutATrap(t *testing.T) {
	r, clk := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	// No trap: SIGTERM is ignored, as PID 1 ignores it.
	c := createContainer(t, r, sb, "stubborn", "sh", "-c", "echo start; while true; do sleep 1000; done")
	startContainer(t, r, c)
	waitSleeping(t, r)

	waiting := make(chan struct{})
	r.testHookStopWaiting = func() { close(waiting) }
	done := make(chan error, 1)
	go func() {
		_, err := r.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: c, Timeout: 30})
		done <- err
	}()
	bound, cancelBound := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelBound()
	select {
	case <-waiting:
	case <-bound.Done():
		t.Fatal("StopContainer never waited on its timeout")
	}
	// While it waits, the runtime keeps answering and the container runs.
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, c).State)
	clk.Step(29 * time.Second)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, c).State, "SIGTERM ignored")
	clk.Step(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("StopContainer did not return after its timeout")
	}
	st := containerStatus(t, r, c)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.State)
	assert.Equal(t, int32(ExitCodeSIGKILL), st.ExitCode)
	assert.Equal(t, t0.Add(30*time.Second).UnixNano(), st.FinishedAt)
	waitDone(t, r, c) // the script's goroutine ends too
}

func TestStopContainerTimeoutZeroKillsAtOnce(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "app")
	startContainer(t, r, c)
	_, err := r.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: c, Timeout: 0})
	require.NoError(t, err)
	assert.Equal(t, int32(ExitCodeSIGKILL), containerStatus(t, r, c).ExitCode)
	waitDone(t, r, c)
}

func TestStopContainerGivesUpWithItsContext(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "stubborn", "sleep", "1000")
	startContainer(t, r, c)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := r.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c, Timeout: 30})
	assert.Equal(t, codes.Canceled, status.Code(err))
}

func TestExecSync(t *testing.T) {
	r, clk := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "app", "sh", "-c", "touch /tmp/healthy; while true; do sleep 1000; done")
	startContainer(t, r, c)
	waitSleeping(t, r)

	resp := execIn(t, r, c, "cat", "/tmp/healthy")
	assert.Equal(t, int32(0), resp.ExitCode, "the exec probe's file is there")
	resp = execIn(t, r, c, "sh", "-c", "echo out; echo err >&2; exit 7")
	assert.Equal(t, "out\n", string(resp.Stdout))
	assert.Equal(t, "err\n", string(resp.Stderr))
	assert.Equal(t, int32(7), resp.ExitCode)

	// A timeout on the runtime's clock.
	done := make(chan error, 1)
	go func() {
		_, err := r.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: c, Cmd: []string{"sleep", "60"}, Timeout: 2})
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	for err == nil {
		clk.Step(time.Second) // until the exec's own timers exist and fire
		select {
		case err = <-done:
			if err == nil {
				t.Fatal("ExecSync returned without error before its sleep ended")
			}
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("ExecSync never timed out")
		}
	}
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
	assert.Contains(t, err.Error(), "timed out after 2s")
	resp = execIn(t, r, c, "pgrep", "sleep")
	assert.Equal(t, "3\n", string(resp.Stdout), "the timed-out sleep is gone; the main script's sleep is left (PID 1 is its shell, 2 its touch)")

	_, err = r.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: c})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	_, err = r.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: c})
	require.NoError(t, err)
	_, err = r.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: c, Cmd: []string{"true"}})
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "no exec in an exited container")
}

func TestIdempotence(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a stop that waits on the fake clock fails instead of hanging
	defer cancel()
	r, _ := fixture(t)
	cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "u1"}}
	a, err := r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	require.NoError(t, err)
	b, err := r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	require.NoError(t, err)
	assert.Equal(t, a.PodSandboxId, b.PodSandboxId, "RunPodSandbox of a running sandbox returns its ID")
	c := createContainer(t, r, a.PodSandboxId, "app")
	startContainer(t, r, c)

	for i := 0; i < 2; i++ {
		_, err = r.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c, Timeout: 10})
		assert.NoError(t, err)
		_, err = r.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: a.PodSandboxId})
		assert.NoError(t, err)
	}
	_, err = r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	assert.Equal(t, codes.AlreadyExists, status.Code(err), "a stopped sandbox keeps its name until removed")
	for i := 0; i < 2; i++ {
		_, err = r.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c})
		assert.NoError(t, err)
		_, err = r.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: a.PodSandboxId})
		assert.NoError(t, err)
	}
	// Gone: stop and remove are still not errors.
	_, err = r.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c})
	assert.NoError(t, err)
	_, err = r.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: a.PodSandboxId})
	assert.NoError(t, err)
	_, err = r.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c})
	assert.Equal(t, codes.NotFound, status.Code(err), "but status of a gone container is NotFound")
}

func TestSandboxIPs(t *testing.T) {
	ctx := context.Background()
	r, _ := fixture(t)
	ip := func(id string) string {
		resp, err := r.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
		require.NoError(t, err)
		return resp.Status.Network.Ip
	}
	a := runSandbox(t, r, "a", "ua", nil)
	b := runSandbox(t, r, "b", "ub", nil)
	assert.Equal(t, "10.88.0.2", ip(a), "the first address after the gateway")
	assert.Equal(t, "10.88.0.3", ip(b))
	_, err := r.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: a})
	require.NoError(t, err)
	assert.Equal(t, "10.88.0.2", ip(a), "a stopped sandbox's status still names its IP, as containerd's does")
	_, err = r.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: a})
	require.NoError(t, err)
	c := runSandbox(t, r, "c", "uc", nil)
	assert.Equal(t, "10.88.0.4", ip(c), "not reused at once")

	// A small range: unique while alive, released when the sandbox stops
	// (as a CNI DEL), then reused; removing it afterwards frees nothing more.
	small, err := NewRuntime(Config{Clock: r.clock, PodCIDR: "192.168.7.0/29", StateDir: t.TempDir()})
	require.NoError(t, err)
	seen := map[string]bool{}
	var ids []string
	for i := 0; i < 5; i++ { // .2 to .6: .0 network, .1 gateway, .7 broadcast
		id := runSandbox(t, small, "p", string(rune('a'+i)), nil)
		resp, err := small.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
		require.NoError(t, err)
		assert.False(t, seen[resp.Status.Network.Ip], "unique")
		seen[resp.Status.Network.Ip] = true
		ids = append(ids, id)
	}
	assert.Len(t, seen, 5)
	_, err = small.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "full"}}})
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	_, err = small.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: ids[2]})
	require.NoError(t, err)
	id := runSandbox(t, small, "p", "again", nil)
	resp, err := small.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	require.NoError(t, err)
	assert.Equal(t, "192.168.7.4", resp.Status.Network.Ip, "the address the stopped sandbox gave back")
	_, err = small.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: ids[2]})
	require.NoError(t, err)
	_, err = small.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "still-full"}}})
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "removing the stopped sandbox did not free .4 a second time: the new sandbox holds it")

	for _, bad := range []string{"127.0.0.0/8", "169.254.0.0/16", "10.0.0.0/31", "fd00::/64", "nope"} {
		_, err := NewRuntime(Config{PodCIDR: bad})
		assert.Error(t, err, bad)
	}
}

// TestStats: on a fake clock the figures are still real: a script that
// wrote a file and sleeps used next to no CPU (its rate, once a second
// read comes 10 s later, is about 0), its working set is its variables
// and the file, its writable layer the bytes on disk; the sandbox sums
// its containers.
func TestStats(t *testing.T) {
	ctx := context.Background()
	r, clk := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createContainer(t, r, sb, "app", "sh", "-c", "echo 0123456789 > /tmp/f; while true; do sleep 1000; done")
	startContainer(t, r, c)
	waitSleeping(t, r)

	st, err := r.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: c})
	require.NoError(t, err)
	s := st.Stats
	assert.Less(t, s.Cpu.UsageCoreNanoSeconds.Value, uint64(20*time.Millisecond), "an echo and a sleep")
	assert.Nil(t, s.Cpu.UsageNanoCores, "no rate on the first read")
	assert.Equal(t, uint64(11+len("web\n")), s.WritableLayer.UsedBytes.Value, "/tmp/f and /etc/hostname")
	assert.Equal(t, s.Memory.RssBytes.Value+15, s.Memory.WorkingSetBytes.Value, "the files, and the variables")
	assert.Greater(t, s.Memory.RssBytes.Value, uint64(0), "the shell's variables")
	assert.Less(t, s.Memory.RssBytes.Value, uint64(64<<10), "the shell's variables")
	clk.Step(10 * time.Second)
	st, err = r.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: c})
	require.NoError(t, err)
	require.NotNil(t, st.Stats.Cpu.UsageNanoCores, "a rate on the second read")
	assert.Less(t, st.Stats.Cpu.UsageNanoCores.Value, uint64(2_000_000), "a sleeping container: under 0.2% of a core")
	assert.GreaterOrEqual(t, st.Stats.Cpu.UsageCoreNanoSeconds.Value, s.Cpu.UsageCoreNanoSeconds.Value, "cumulative")

	list, err := r.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{PodSandboxId: sb}})
	require.NoError(t, err)
	require.Len(t, list.Stats, 1)
	ps, err := r.PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: sb})
	require.NoError(t, err)
	assert.Equal(t, ps.Stats.Linux.Containers[0].Cpu.UsageCoreNanoSeconds.Value, ps.Stats.Linux.Cpu.UsageCoreNanoSeconds.Value)
	assert.Equal(t, ps.Stats.Linux.Containers[0].Memory.WorkingSetBytes.Value, ps.Stats.Linux.Memory.WorkingSetBytes.Value)
	assert.Equal(t, uint64(2), ps.Stats.Linux.Process.ProcessCount.Value, "the script and its sleep")
	assert.Zero(t, ps.Stats.Linux.Network.DefaultInterface.RxBytes.Value, "no pod network: nothing listens")
	assert.Len(t, ps.Stats.Linux.Containers, 1)
	pl, err := r.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{})
	require.NoError(t, err)
	assert.Len(t, pl.Stats, 1)
	_, err = r.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: "nope"})
	assert.Equal(t, codes.NotFound, status.Code(err))
}

func TestNoRestartInPlace(t *testing.T) {
	r, _ := fixture(t)
	st, c := runToEnd(t, r, "exit 1")
	require.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.State)
	_, err := r.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: c})
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "an exited container never runs again: the kubelet makes a new one")
}
