package kuberuntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/kubetypes"
)

// mountsHelper is a RuntimeHelper that hands out fixed mounts and a
// container directory.
type mountsHelper struct {
	literalHelper
	mounts []kubecontainer.Mount
	dir    string
}

func (h mountsHelper) GenerateRunContainerOptions(context.Context, *v1.Pod, *v1.Container, string, []string, kubecontainer.ImageVolumes) (*kubecontainer.RunContainerOptions, error) {
	return &kubecontainer.RunContainerOptions{Mounts: h.mounts, PodContainerDir: h.dir}, nil
}

func terminationPod() (*v1.Pod, *v1.Container) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-p"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox", TerminationMessagePath: "/dev/termination-log"}}}}
	return pod, &pod.Spec.Containers[0]
}

func TestGenerateContainerConfigMountsAndTerminationFile(t *testing.T) {
	pod, c := terminationPod()
	dir := t.TempDir()
	m := &Manager{podLogsDirectory: t.TempDir(), helper: mountsHelper{dir: dir, mounts: []kubecontainer.Mount{
		{Name: "config", ContainerPath: "/etc/config", HostPath: "/r/pods/uid-p/volumes/kubernetes.io~configmap/config", ReadOnly: true},
		{Name: "k8s-managed-etc-hosts", ContainerPath: "/etc/hosts", HostPath: "/r/pods/uid-p/etc-hosts"},
	}}}
	cfg, err := m.generateContainerConfig(context.Background(), c, pod, 0, "10.0.0.2", "busybox", nil, nil)
	require.NoError(t, err)
	require.Len(t, cfg.Mounts, 3)
	assert.Equal(t, &runtimeapi.Mount{ContainerPath: "/etc/config", HostPath: "/r/pods/uid-p/volumes/kubernetes.io~configmap/config", Readonly: true}, cfg.Mounts[0])
	assert.Equal(t, &runtimeapi.Mount{ContainerPath: "/etc/hosts", HostPath: "/r/pods/uid-p/etc-hosts"}, cfg.Mounts[1])

	tm := cfg.Mounts[2]
	assert.Equal(t, "/dev/termination-log", tm.ContainerPath)
	assert.False(t, tm.Readonly)
	assert.Equal(t, dir, filepath.Dir(tm.HostPath))
	assert.Regexp(t, `^[0-9a-f]{8}$`, filepath.Base(tm.HostPath))
	fi, err := os.Stat(tm.HostPath)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o666), fi.Mode().Perm(), "the sandbox's user must write it")
	assert.Zero(t, fi.Size())

	// Each start has its own file.
	cfg2, err := m.generateContainerConfig(context.Background(), c, pod, 1, "10.0.0.2", "busybox", nil, nil)
	require.NoError(t, err)
	assert.NotEqual(t, tm.HostPath, cfg2.Mounts[2].HostPath)

	// Without a container directory (the kubelet gives no mounts) there is no file.
	m.helper = mountsHelper{}
	cfg, err = m.generateContainerConfig(context.Background(), c, pod, 0, "10.0.0.2", "busybox", nil, nil)
	require.NoError(t, err)
	assert.Empty(t, cfg.Mounts)
}

// exitedCRI is a CRI status of a container that exited with code, whose
// termination-message file is hostPath and whose log is logPath.
func exitedCRI(code int32, policy v1.TerminationMessagePolicy, hostPath, logPath string) *runtimeapi.ContainerStatus {
	return &runtimeapi.ContainerStatus{
		Id: "cid", Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, State: runtimeapi.ContainerState_CONTAINER_EXITED,
		ExitCode: code, Reason: "Error", LogPath: logPath,
		Labels: map[string]string{kubetypes.KubernetesContainerNameLabel: "c"},
		Annotations: map[string]string{
			kubetypes.ContainerTerminationMessagePathAnnotation:   "/dev/termination-log",
			kubetypes.ContainerTerminationMessagePolicyAnnotation: string(policy),
		},
		Mounts: []*runtimeapi.Mount{
			{ContainerPath: "/data", HostPath: "/nowhere"},
			{ContainerPath: "/dev/termination-log", HostPath: hostPath},
		},
	}
}

// writeLog writes a CRI log with these lines of stdout (tag F) .
func writeLog(t *testing.T, lines ...string) string {
	t.Helper()
	var b strings.Builder
	ts := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Format(time.RFC3339Nano)
	for _, l := range lines {
		fmt.Fprintf(&b, "%s stdout F %s\n", ts, l)
	}
	p := filepath.Join(t.TempDir(), "0.log")
	require.NoError(t, os.WriteFile(p, []byte(b.String()), 0o644))
	return p
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "0123abcd")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o666))
	return p
}

func TestTerminationMessageFromFile(t *testing.T) {
	m := &Manager{runtimeName: "fake"}
	log := writeLog(t, "from the log")
	cs := m.toKubeContainerStatus(exitedCRI(0, v1.TerminationMessageReadFile, writeFile(t, "all done\n"), log))
	assert.Equal(t, "all done\n", cs.Message)

	// With FallbackToLogsOnError a file that says something wins too.
	cs = m.toKubeContainerStatus(exitedCRI(1, v1.TerminationMessageFallbackToLogsOnError, writeFile(t, "disk full"), log))
	assert.Equal(t, "disk full", cs.Message)

	// The runtime's own message comes first.
	s := exitedCRI(1, v1.TerminationMessageReadFile, writeFile(t, "bye"), log)
	s.Message = "oom"
	assert.Equal(t, "oom: bye", m.toKubeContainerStatus(s).Message)

	// A running container's file is not read.
	s = exitedCRI(0, v1.TerminationMessageReadFile, writeFile(t, "bye"), log)
	s.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	assert.Empty(t, m.toKubeContainerStatus(s).Message)
}

func TestTerminationMessageLimit4096Bytes(t *testing.T) {
	m := &Manager{runtimeName: "fake"}
	content := strings.Repeat("a", 100) + strings.Repeat("b", kubecontainer.MaxContainerTerminationMessageLength)
	cs := m.toKubeContainerStatus(exitedCRI(1, v1.TerminationMessageReadFile, writeFile(t, content), ""))
	assert.Equal(t, strings.Repeat("b", 4096), cs.Message, "the file's last 4 KiB")
}

func TestTerminationMessageFallbackToLogsOnError(t *testing.T) {
	m := &Manager{runtimeName: "fake"}
	var lines []string
	for i := 1; i <= 100; i++ {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	log := writeLog(t, lines...)

	cs := m.toKubeContainerStatus(exitedCRI(2, v1.TerminationMessageFallbackToLogsOnError, writeFile(t, ""), log))
	want := strings.Join(lines[20:], "\n") + "\n"
	assert.Equal(t, want, cs.Message, "the last 80 lines")

	// Only on error, and only with that policy.
	assert.Empty(t, m.toKubeContainerStatus(exitedCRI(0, v1.TerminationMessageFallbackToLogsOnError, writeFile(t, ""), log)).Message)
	assert.Empty(t, m.toKubeContainerStatus(exitedCRI(2, v1.TerminationMessageReadFile, writeFile(t, ""), log)).Message)
	s := exitedCRI(2, v1.TerminationMessageFallbackToLogsOnError, writeFile(t, ""), log)
	s.Reason = "ContainerCannotRun"
	assert.Empty(t, m.toKubeContainerStatus(s).Message, "a container that could not start has no log")

	// No file at all (the helper gave no container directory): the log too.
	s = exitedCRI(2, v1.TerminationMessageFallbackToLogsOnError, filepath.Join(t.TempDir(), "missing"), log)
	assert.Equal(t, want, m.toKubeContainerStatus(s).Message)
}

func TestTerminationMessageLogLimit2048Bytes(t *testing.T) {
	m := &Manager{runtimeName: "fake"}
	ts := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Format(time.RFC3339Nano)
	// A long line in two parts (P then F), then 10 lines of 300 bytes.
	var b strings.Builder
	fmt.Fprintf(&b, "%s stderr P %s\n%s stderr F %s\n", ts, strings.Repeat("x", 20000), ts, "end")
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&b, "%s stdout F %d%s\n", ts, i, strings.Repeat("y", 299))
	}
	log := filepath.Join(t.TempDir(), "0.log")
	require.NoError(t, os.WriteFile(log, []byte(b.String()), 0o644))

	cs := m.toKubeContainerStatus(exitedCRI(1, v1.TerminationMessageFallbackToLogsOnError, writeFile(t, ""), log))
	require.Len(t, cs.Message, kubecontainer.MaxContainerTerminationMessageLogLength)
	assert.True(t, strings.HasSuffix(cs.Message, "9"+strings.Repeat("y", 299)+"\n"), "the log's end")

	// Partial lines are joined without a newline.
	assert.Equal(t, "ab\n", readLastStringFromContainerLogs(writeRaw(t, ts+" stdout P a\n"+ts+" stdout F b\n")))
	// A log that cannot be read says so.
	assert.True(t, strings.HasPrefix(readLastStringFromContainerLogs(filepath.Join(t.TempDir(), "none")), "Error on reading termination message from logs: "))
}

func writeRaw(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "0.log")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func TestTerminationMessageSymlinkNotFollowed(t *testing.T) {
	m := &Manager{runtimeName: "fake"}
	secret := writeFile(t, "the node's secret")
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(secret, link))
	cs := m.toKubeContainerStatus(exitedCRI(1, v1.TerminationMessageReadFile, link, ""))
	assert.NotContains(t, cs.Message, "secret")
	assert.True(t, strings.HasPrefix(cs.Message, "Error on reading termination log "), cs.Message)

	// Nor a directory, nor a FIFO (which would block).
	cs = m.toKubeContainerStatus(exitedCRI(1, v1.TerminationMessageReadFile, t.TempDir(), ""))
	assert.Contains(t, cs.Message, "is not a regular file")
}
