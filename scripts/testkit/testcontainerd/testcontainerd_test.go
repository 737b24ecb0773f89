package testcontainerd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/kuberuntime"
	"mykubelet/scripts/testkit/testcontainerd"
)

const busybox = "docker.io/library/busybox:1.35.0"

// TestPodOnContainerd drives containerd through the CRI as the kubelet
// does (mylib/kuberuntime's Dial): a pod sandbox on the CNI bridge and a
// busybox container in it, a real process on this host, an exec, and the
// host reaching the pod's address; then everything removed, and `down`
// leaving no mount and no bridge behind. On both flavours of
// scripts/containerd.sh: Debian's containerd 1.6 (this machine's, the
// default) and v2.4.2 built from its module (the lima VM's, vm.yaml's
// MYKUBELET_CONTAINERD=v2, where Debian's cannot be installed beside
// Docker's), one after the other on the same network.
func TestPodOnContainerd(t *testing.T) {
	for _, flavor := range []string{"debian", "v2"} {
		t.Run(flavor, func(t *testing.T) { podOnContainerd(t, flavor) })
	}
}

func podOnContainerd(t *testing.T, flavor string) {
	rt := testcontainerd.Start(t, testcontainerd.Config{Flavor: flavor})
	t.Logf("runtime: %s", rt.Version)
	want := map[string]string{"debian": ` 1\.6\.`, "v2": ` v2\.4\.`}[flavor]
	require.Regexp(t, want, rt.Version, "scripts/containerd.sh up started another containerd than its %s flavour's", flavor)
	conn, err := kuberuntime.Dial(rt.Endpoint)
	require.NoError(t, err)
	defer conn.Close()
	cri := runtimeapi.NewRuntimeServiceClient(conn)
	images := runtimeapi.NewImageServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	v, err := cri.Version(ctx, &runtimeapi.VersionRequest{})
	require.NoError(t, err)
	require.Equal(t, "containerd", v.RuntimeName)

	// The offline images are there: nothing below pulls.
	for _, ref := range []string{busybox, "registry.k8s.io/pause:3.10"} {
		st, err := images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		require.NoError(t, err)
		require.NotNil(t, st.Image, "%s is not imported", ref)
	}

	logs := t.TempDir()
	sandboxConfig := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "0c7b2d5e-test", Attempt: 0},
		Hostname:     "web",
		LogDirectory: logs,
		Linux:        &runtimeapi.LinuxPodSandboxConfig{},
	}
	sb, err := cri.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig})
	require.NoError(t, err)
	sbStatus, err := cri.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.PodSandboxId})
	require.NoError(t, err)
	podIP := net.ParseIP(sbStatus.Status.GetNetwork().GetIp())
	require.NotNil(t, podIP, "the sandbox has no IP: %v", sbStatus.Status.GetNetwork())
	require.True(t, rt.Subnet.Contains(podIP), "pod IP %s is outside the CNI range %s", podIP, rt.Subnet)

	created, err := cri.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sb.PodSandboxId,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "httpd"},
			Image:    &runtimeapi.ImageSpec{Image: busybox},
			Command:  []string{"httpd", "-f", "-p", "8080", "-h", "/tmp"},
			LogPath:  "httpd.log",
			Linux:    &runtimeapi.LinuxContainerConfig{},
		},
		SandboxConfig: sandboxConfig,
	})
	require.NoError(t, err)
	id := created.ContainerId
	_, err = cri.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	require.NoError(t, err)

	// A real process on this host, in a network namespace of its own.
	st, err := cri.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	require.NoError(t, err)
	require.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, st.Status.State)
	var info struct {
		Pid int `json:"pid"`
	}
	require.NoError(t, json.Unmarshal([]byte(st.Info["info"]), &info), "verbose status: %v", st.Info)
	require.Positive(t, info.Pid)
	// runc's init execs the command just after StartContainer returns: its
	// process is "runc init" for a moment.
	var cmdline string
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(info.Pid), "cmdline"))
		require.NoError(t, err)
		cmdline = strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
		return cmdline != "runc init"
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, "httpd -f -p 8080 -h /tmp", cmdline)
	theirs, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(info.Pid), "ns", "net"))
	require.NoError(t, err)
	ours, err := os.Readlink("/proc/self/ns/net")
	require.NoError(t, err)
	require.NotEqual(t, ours, theirs, "the container runs in the host's network namespace")

	// An exec, as `kubectl exec` gets it (without the streaming server).
	out, err := cri.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"echo", "hello from containerd"}, Timeout: 10})
	require.NoError(t, err)
	require.Equal(t, int32(0), out.ExitCode, "stderr: %s", out.Stderr)
	require.Equal(t, "hello from containerd\n", string(out.Stdout))

	// The pod's routes stay on its own subnet: no default route out.
	out, err = cri.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"ip", "route"}, Timeout: 10})
	require.NoError(t, err)
	require.Contains(t, string(out.Stdout), rt.Subnet.String())
	require.NotContains(t, string(out.Stdout), "default", "the pod has a route out of its subnet")

	// The host reaches the pod on the bridge (as the kubelet's probes do).
	var c net.Conn
	require.Eventually(t, func() bool {
		c, err = net.DialTimeout("tcp", net.JoinHostPort(podIP.String(), "8080"), time.Second)
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "dial the pod's httpd: %v", err)
	_, err = c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	reply := make([]byte, 12)
	_, err = c.Read(reply)
	c.Close()
	require.NoError(t, err)
	require.Regexp(t, `^HTTP/1\.[01] 404`, string(reply), "busybox httpd answers 404 for a directory without index.html")

	_, err = cri.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 5})
	require.NoError(t, err)
	_, err = cri.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	require.NoError(t, err)
	_, err = cri.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.PodSandboxId})
	require.NoError(t, err)
	_, err = cri.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId})
	require.NoError(t, err)
	pods, err := cri.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	require.Empty(t, pods.Items)
	_, err = os.Stat(filepath.Join("/proc", strconv.Itoa(info.Pid)))
	require.True(t, os.IsNotExist(err), "the container's process %d still runs", info.Pid)

	// down: containerd stopped, nothing of it mounted, its bridge gone.
	downOut, err := rt.Down()
	require.NoError(t, err, downOut)
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	require.NotContains(t, string(mounts), rt.StateDir, "a mount under the state directory is left")
	_, err = net.InterfaceByName(rt.Bridge)
	require.Error(t, err, "the bridge %s is left", rt.Bridge)
	status, err := rt.Status()
	require.NoError(t, err)
	require.Contains(t, status, "not running")
}

// TestUpAfterAKill: containerd killed, not stopped with down (a reboot of
// the VM, a kill -9), leaves its bridge with its address; up uses them as
// they are. The check for the address once quit reading at its match, and
// under pipefail the pipe then failed now and then ("ipv4: Address already
// assigned"): several kills and ups, so that a one-in-three failure shows.
func TestUpAfterAKill(t *testing.T) {
	rt := testcontainerd.Start(t, testcontainerd.Config{Subnet: "10.25.0.0/24", Bridge: "mykubelet-kill"})
	pidFile := filepath.Join(rt.StateDir, "containerd", "containerd.pid")
	for i := range 8 {
		b, err := os.ReadFile(pidFile)
		require.NoError(t, err)
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		require.NoError(t, err)
		p, err := os.FindProcess(pid)
		require.NoError(t, err)
		require.NoError(t, p.Kill())
		require.Eventually(t, func() bool {
			status, err := rt.Status()
			return err == nil && strings.Contains(status, "not running")
		}, 10*time.Second, 50*time.Millisecond, "containerd (pid %d) still runs after its kill", pid)
		iface, err := net.InterfaceByName(rt.Bridge)
		require.NoError(t, err, "the bridge is left by the kill")
		addrs, err := iface.Addrs()
		require.NoError(t, err)
		require.Contains(t, fmt.Sprint(addrs), "10.25.0.1/24", "and its address")

		out, err := rt.Up()
		require.NoError(t, err, "up #%d after a kill:\n%s", i+1, out)
		require.Contains(t, out, "containerd is ready")
	}
}
