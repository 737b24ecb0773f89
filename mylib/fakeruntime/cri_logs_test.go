package fakeruntime

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestContainerLogIsInTheCRIFormat(t *testing.T) {
	r, _ := fixture(t)
	logDir := t.TempDir()
	sb, err := r.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "u"}, LogDirectory: logDir}})
	require.NoError(t, err)
	c, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		LogPath: "app/0.log",
		Command: []string{"sh", "-c", `echo hello; echo oops >&2; printf 'no newline'`}}})
	require.NoError(t, err)
	startContainer(t, r, c.ContainerId)
	waitDone(t, r, c.ContainerId)
	path := filepath.Join(logDir, "app/0.log")
	assert.Equal(t, path, containerStatus(t, r, c.ContainerId).LogPath)

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	ts := t0.Format(time.RFC3339Nano)
	assert.Equal(t, ts+" stdout F hello\n"+ts+" stderr F oops\n"+ts+" stdout F no newline\n", string(raw), "as containerd writes it")
	entries, err := ReadLog(bytes.NewReader(raw))
	require.NoError(t, err)
	assert.Equal(t, []LogEntry{{t0, "stdout", "hello"}, {t0, "stderr", "oops"}, {t0, "stdout", "no newline"}}, entries)
}

func TestLongLinesArePartial(t *testing.T) {
	dir := t.TempDir()
	l, err := openLog(clocktesting.NewFakeClock(t0), filepath.Join(dir, "c.log"))
	require.NoError(t, err)
	s := l.stream(StreamStdout)
	long := strings.Repeat("x", MaxLogLine*2+5)
	_, err = s.Write([]byte(long[:100]))
	require.NoError(t, err)
	_, err = s.Write([]byte(long[100:] + "\nshort\n"))
	require.NoError(t, err)
	l.close()
	raw, err := os.ReadFile(filepath.Join(dir, "c.log"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	require.Len(t, lines, 4)
	assert.Contains(t, lines[0], " stdout P ")
	assert.Contains(t, lines[1], " stdout P ")
	assert.Contains(t, lines[2], " stdout F xxxxx")
	entries, err := ReadLog(bytes.NewReader(raw))
	require.NoError(t, err)
	require.Len(t, entries, 2)
	assert.Equal(t, long, entries[0].Text)
	assert.Equal(t, "short", entries[1].Text)
}

func TestReopenContainerLog(t *testing.T) {
	r, clk := fixture(t)
	logDir := t.TempDir()
	sb, err := r.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "u"}, LogDirectory: logDir}})
	require.NoError(t, err)
	c, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		LogPath: "app.log", Command: []string{"sh", "-c", "while true; do echo tick; sleep 1; done"}}})
	require.NoError(t, err)
	startContainer(t, r, c.ContainerId)
	waitSleeping(t, r)
	path := filepath.Join(logDir, "app.log")
	// Rotate as the kubelet does: rename, then ask the runtime to reopen.
	require.NoError(t, os.Rename(path, path+".1"))
	_, err = r.ReopenContainerLog(context.Background(), &runtimeapi.ReopenContainerLogRequest{ContainerId: c.ContainerId})
	require.NoError(t, err)
	clk.Step(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if b, _ := os.ReadFile(path); strings.Contains(string(b), " stdout F tick\n") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("nothing written to the reopened log")
		case <-time.After(5 * time.Millisecond):
		}
	}
	old, err := os.ReadFile(path + ".1")
	require.NoError(t, err)
	assert.Equal(t, t0.Format(time.RFC3339Nano)+" stdout F tick\n", string(old))

	_, err = r.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: c.ContainerId})
	require.NoError(t, err)
	_, err = r.ReopenContainerLog(context.Background(), &runtimeapi.ReopenContainerLogRequest{ContainerId: c.ContainerId})
	assert.Error(t, err, "only a running container's log is reopened, as containerd's")
}

func TestParseLogLine(t *testing.T) {
	l, err := ParseLogLine([]byte("2026-03-01T12:00:00.5Z stderr P a b  c"))
	require.NoError(t, err)
	assert.Equal(t, LogLine{Time: t0.Add(500 * time.Millisecond), Stream: "stderr", Partial: true, Text: []byte("a b  c")}, l)
	for _, bad := range []string{"", "nonsense", "2026-03-01T12:00:00Z", "2026-03-01T12:00:00Z stdin F x", "2026-03-01T12:00:00Z stdout X x", "yesterday stdout F x", "2026-03-01T12:00:00Z stdout F"} {
		_, err := ParseLogLine([]byte(bad))
		assert.Error(t, err, bad)
	}
}

// FuzzLogRoundTrip writes arbitrary output through a container's log
// stream in two writes and reads it back: the lines come back as written.
func FuzzLogRoundTrip(f *testing.F) {
	f.Add([]byte("hello\nworld\n"), 3)
	f.Add([]byte("no newline"), 0)
	f.Add([]byte("\n\n\r\n\x00 tab\there"), 5)
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		if len(data) > 4*MaxLogLine {
			return
		}
		var buf bytes.Buffer
		l := &logFile{clock: clocktesting.NewFakeClock(t0)}
		w := &logStream{log: l, name: StreamStderr}
		l.f = nil
		lines := &lineSink{buf: &buf}
		l.sink = lines.write
		cut = max(0, min(len(data), cut))
		_, _ = w.Write(data[:cut])
		_, _ = w.Write(data[cut:])
		w.flush()
		entries, err := ReadLog(&buf)
		if err != nil {
			t.Fatalf("reading back %q: %v", buf.String(), err)
		}
		var texts []string
		for _, e := range entries {
			if e.Stream != StreamStderr || !e.Time.Equal(t0) {
				t.Fatalf("entry %+v", e)
			}
			texts = append(texts, e.Text)
		}
		want := strings.TrimSuffix(string(data), "\n")
		if len(data) == 0 {
			want = ""
		}
		if got := strings.Join(texts, "\n"); got != want {
			t.Fatalf("wrote %q, read back %q", data, got)
		}
	})
}

// lineSink collects the log lines a logFile writes.
type lineSink struct{ buf *bytes.Buffer }

func (s *lineSink) write(b []byte) { s.buf.Write(b) }

// FuzzParseLogLine: any line parses or is an error, never a panic; what
// parses formats back to the same text.
func FuzzParseLogLine(f *testing.F) {
	f.Add([]byte("2026-03-01T12:00:00.123456789Z stdout F hello"))
	f.Add([]byte("2026-03-01T12:00:00Z stderr P "))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, line []byte) {
		l, err := ParseLogLine(line)
		if err != nil {
			return
		}
		again, err := ParseLogLine(bytes.TrimSuffix(l.Format(), []byte("\n")))
		if err != nil {
			t.Fatalf("formatted line %q does not parse: %v", l.Format(), err)
		}
		if !again.Time.Equal(l.Time) || again.Stream != l.Stream || again.Partial != l.Partial || !bytes.Equal(again.Text, l.Text) {
			t.Fatalf("round trip changed %+v into %+v", l, again)
		}
	})
}
