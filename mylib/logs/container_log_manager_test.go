package logs

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"mykubelet/mylib/fakeruntime"
	"mykubelet/mylib/fakeruntime/fakeruntimetest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// batchScript writes batches of numbered lines, one batch per second of
// the fake clock, the first at once: "line 0", "line 1", …
func batchScript(perBatch int) string {
	return fmt.Sprintf(`i=0; while :; do j=0; while [ $j -lt %d ]; do echo "line $i"; i=$((i+1)); j=$((j+1)); done; sleep 1; done`, perBatch)
}

// fixture serves the mock runtime on a fake clock and runs one container
// with script; it returns the runtime's client, the container's ID and
// its log path.
func fixture(t *testing.T, script string) (*clocktesting.FakeClock, runtimeapi.RuntimeServiceClient, string, string) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	rt := fakeruntime.New(clk)
	conn, err := grpc.NewClient("unix://"+fakeruntimetest.Serve(t, rt), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	rs, is := runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
	ctx := context.Background()
	_, err = is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}})
	require.NoError(t, err)
	logDir := t.TempDir()
	sb, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "chatty", Namespace: "default", Uid: "u1"}, LogDirectory: logDir}})
	require.NoError(t, err)
	c, err := rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		LogPath: "app/0.log", Command: []string{"sh", "-c", script}}})
	require.NoError(t, err)
	_, err = rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = rs.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: c.ContainerId})
	})
	return clk, rs, c.ContainerId, filepath.Join(logDir, "app/0.log")
}

// waitSleeping waits until the container sleeps on the fake clock: its
// batch is written.
func waitSleeping(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the container never slept")
		}
		time.Sleep(time.Millisecond)
	}
}

func newManager(t *testing.T, rs runtimeapi.RuntimeServiceClient, clk *clocktesting.FakeClock, maxSize string, maxFiles int) *ContainerLogManager {
	t.Helper()
	m, err := NewContainerLogManager(Config{Runtime: rs, MaxSize: maxSize, MaxFiles: maxFiles, Clock: clk})
	require.NoError(t, err)
	return m
}

// readAll reads every file of the log at path, oldest first, gunzipping
// the compressed ones, and parses them together.
func readAll(t *testing.T, path string) ([]fakeruntime.LogEntry, []string) {
	t.Helper()
	files, err := GetAllLogs(path)
	require.NoError(t, err)
	var all bytes.Buffer
	for _, name := range files {
		f, err := os.Open(name)
		require.NoError(t, err)
		var r io.Reader = f
		if strings.HasSuffix(name, compressSuffix) {
			zr, err := gzip.NewReader(f)
			require.NoError(t, err, name)
			r = zr
		}
		_, err = io.Copy(&all, r)
		require.NoError(t, err, name)
		f.Close()
	}
	entries, err := fakeruntime.ReadLog(&all)
	require.NoError(t, err)
	return entries, files
}

// requireConsecutive checks that the lines are "line first", "line
// first+1", … with none missing or repeated, and returns the last number.
func requireConsecutive(t *testing.T, entries []fakeruntime.LogEntry, first int) int {
	t.Helper()
	require.NotEmpty(t, entries)
	for i, e := range entries {
		require.Equal(t, fmt.Sprintf("line %d", first+i), e.Text, "entry %d", i)
	}
	return first + len(entries) - 1
}

func size(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

func TestDefaultsAreUpstreams(t *testing.T) {
	m, err := NewContainerLogManager(Config{Runtime: runtimeapi.NewRuntimeServiceClient(nil)})
	require.NoError(t, err)
	assert.Equal(t, int64(10*1024*1024), m.maxSize, "containerLogMaxSize 10Mi")
	assert.Equal(t, 5, m.maxFiles, "containerLogMaxFiles")
	assert.Equal(t, 10*time.Second, m.monitorInterval, "containerLogMonitorInterval")
	assert.Equal(t, 1, m.maxWorkers, "containerLogMaxWorkers")
}

func TestBadConfigIsAnError(t *testing.T) {
	rs := runtimeapi.NewRuntimeServiceClient(nil)
	for _, cfg := range []Config{
		{},
		{Runtime: rs, MaxSize: "ten megs"},
		{Runtime: rs, MaxFiles: 1},
		{Runtime: rs, MaxWorkers: -1},
		{Runtime: rs, MonitorInterval: -time.Second},
	} {
		_, err := NewContainerLogManager(cfg)
		assert.Error(t, err, "%+v", cfg)
	}
}

// TestRotatesOnceOverMaxSize: a log under the limit is left alone; once
// over it, the live file is renamed to <path>.<20060102-150405> and the
// container goes on writing to a new file at path, with no line lost.
func TestRotatesOnceOverMaxSize(t *testing.T) {
	clk, rs, _, path := fixture(t, batchScript(100)) // ~4.3 KB a batch
	m := newManager(t, rs, clk, "6Ki", 5)
	ctx := context.Background()
	waitSleeping(t, clk)
	require.NoError(t, m.rotateLogs(ctx))
	files, _ := GetAllLogs(path)
	assert.Equal(t, []string{path}, files, "under 6Ki: not rotated")

	clk.Step(time.Second) // a second batch: over 6Ki
	waitSleeping(t, clk)
	before := size(t, path)
	require.Greater(t, before, int64(6*1024))
	require.NoError(t, m.rotateLogs(ctx))
	rotated := path + "." + t0.Add(time.Second).Format("20060102-150405")
	_, files = readAll(t, path)
	assert.Equal(t, []string{rotated, path}, files)
	assert.Equal(t, before, size(t, rotated), "the whole live file, renamed")
	assert.Zero(t, size(t, path), "a new, empty live file")

	require.NoError(t, m.rotateLogs(ctx))
	files, _ = GetAllLogs(path)
	assert.Equal(t, []string{rotated, path}, files, "the new file is small: no second rotation")

	clk.Step(time.Second) // the container writes on, to the reopened file
	waitSleeping(t, clk)
	assert.Positive(t, size(t, path), "the live file gets the lines after ReopenContainerLog")
	entries, _ := readAll(t, path)
	assert.Equal(t, 299, requireConsecutive(t, entries, 0), "three batches of 100, none lost")
}

// TestNeverMoreThanMaxFiles rotates while the container writes (each
// pass runs during a batch): at most containerLogMaxFiles files remain,
// the older rotated ones gzipped, the newest not, and what remains has
// every line from the oldest kept on.
func TestNeverMoreThanMaxFiles(t *testing.T) {
	clk, rs, _, path := fixture(t, batchScript(200)) // ~9 KB a batch
	m := newManager(t, rs, clk, "4Ki", 3)
	ctx := context.Background()
	waitSleeping(t, clk)
	for range 8 {
		clk.Step(time.Second)
		require.NoError(t, m.rotateLogs(ctx)) // while the batch is written
		waitSleeping(t, clk)
		files, err := GetAllLogs(path)
		require.NoError(t, err)
		require.LessOrEqual(t, len(files), 3, "containerLogMaxFiles 3: %v", files)
	}
	entries, files := readAll(t, path)
	require.Len(t, files, 3)
	assert.True(t, strings.HasSuffix(files[0], compressSuffix), "older rotated files are gzipped: %v", files)
	assert.False(t, strings.HasSuffix(files[1], compressSuffix), "the newest rotated file is not: %v", files)
	first := 0
	_, err := fmt.Sscanf(entries[0].Text, "line %d", &first)
	require.NoError(t, err)
	assert.Positive(t, first, "the oldest files were removed")
	assert.Equal(t, 9*200-1, requireConsecutive(t, entries, first), "the last line of nine batches, nothing lost between files")
}

// TestRunKeepsTheLogUnderTheLimit runs the manager on its own fake clock
// (the container's would have the manager's ticker among its sleepers):
// every containerLogMonitorInterval it rotates, so the live file never
// grows much past the limit. Without rotation it holds every batch.
func TestRunKeepsTheLogUnderTheLimit(t *testing.T) {
	clk, rs, _, path := fixture(t, batchScript(100)) // ~3.8 KB a second
	mclk := clocktesting.NewFakeClock(t0)
	m, err := NewContainerLogManager(Config{Runtime: rs, MaxSize: "8Ki", MaxFiles: 3, MonitorInterval: 3 * time.Second, Clock: mclk})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, mclk.HasWaiters, 5*time.Second, time.Millisecond, "Run waits on its ticker")
	waitSleeping(t, clk)
	for i := range 30 {
		clk.Step(time.Second)
		waitSleeping(t, clk)
		if (i+1)%3 == 0 {
			mclk.Step(3 * time.Second) // a pass
			require.Eventually(t, func() bool { fi, err := os.Stat(path); return err == nil && fi.Size() < 8*1024 }, 5*time.Second, time.Millisecond,
				"after the pass at %ds the live log is under the limit", i+1)
		}
		assert.Less(t, size(t, path), int64(16*1024), "at most one interval of output past the limit")
	}
	cancel()
	<-done
	files, err := GetAllLogs(path)
	require.NoError(t, err)
	assert.Len(t, files, 3)
}

// failingReopen is a runtime whose ReopenContainerLog fails.
type failingReopen struct {
	runtimeapi.RuntimeServiceClient
}

func (failingReopen) ReopenContainerLog(context.Context, *runtimeapi.ReopenContainerLogRequest, ...grpc.CallOption) (*runtimeapi.ReopenContainerLogResponse, error) {
	return nil, errors.New("reopen: not today")
}

func TestFailedReopenRenamesTheLogBack(t *testing.T) {
	clk, rs, id, path := fixture(t, batchScript(200))
	m := newManager(t, failingReopen{rs}, clk, "1Ki", 5)
	waitSleeping(t, clk)
	before := size(t, path)
	err := m.processContainer(context.Background(), id)
	require.ErrorContains(t, err, "reopen: not today")
	files, _ := GetAllLogs(path)
	assert.Equal(t, []string{path}, files, "renamed back, as upstream: rotated again at the next pass")
	assert.Equal(t, before, size(t, path))

	clk.Step(time.Second)
	waitSleeping(t, clk)
	entries, _ := readAll(t, path)
	assert.Equal(t, 399, requireConsecutive(t, entries, 0), "the container still writes to it")
}

// reopenedButFailed reopens the log and then reports an error, as a call
// cut off on its way back does.
type reopenedButFailed struct {
	runtimeapi.RuntimeServiceClient
}

func (r reopenedButFailed) ReopenContainerLog(ctx context.Context, req *runtimeapi.ReopenContainerLogRequest, opts ...grpc.CallOption) (*runtimeapi.ReopenContainerLogResponse, error) {
	if _, err := r.RuntimeServiceClient.ReopenContainerLog(ctx, req, opts...); err != nil {
		return nil, err
	}
	return nil, context.Canceled
}

func TestAReopenThatHappenedIsNotUndone(t *testing.T) {
	clk, rs, id, path := fixture(t, batchScript(200))
	m := newManager(t, reopenedButFailed{rs}, clk, "1Ki", 5)
	waitSleeping(t, clk)
	require.Error(t, m.processContainer(context.Background(), id))
	files, _ := GetAllLogs(path)
	assert.Len(t, files, 2, "the runtime writes to the new file: the rotated one is kept, not renamed over it")
	clk.Step(time.Second)
	waitSleeping(t, clk)
	assert.Positive(t, size(t, path))
	entries, _ := readAll(t, path)
	assert.Equal(t, 399, requireConsecutive(t, entries, 0), "no line lost")
}

func TestTwoRotationsInOneSecondWaitForTheNext(t *testing.T) {
	clk, rs, id, path := fixture(t, batchScript(200))
	m := newManager(t, rs, clk, "1Ki", 5)
	ctx := context.Background()
	waitSleeping(t, clk)
	require.NoError(t, m.processContainer(ctx, id))
	clk.Step(500 * time.Millisecond) // the next batch is due at 1 s
	require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte(t0.Format(time.RFC3339Nano)+" stdout F filler\n"), 100), 0o600))
	require.NoError(t, m.processContainer(ctx, id))
	files, _ := GetAllLogs(path)
	assert.Len(t, files, 2, "same second, same name: not rotated, so not overwritten: %v", files)
	clk.Step(500 * time.Millisecond)
	waitSleeping(t, clk)
	require.NoError(t, m.processContainer(ctx, id))
	files, _ = GetAllLogs(path)
	assert.Len(t, files, 3, "rotated in the next second: %v", files)
}

func TestMissingLogIsReopened(t *testing.T) {
	clk, rs, id, path := fixture(t, batchScript(10))
	m := newManager(t, rs, clk, "1Mi", 5)
	waitSleeping(t, clk)
	require.NoError(t, os.Remove(path))
	require.NoError(t, m.processContainer(context.Background(), id))
	assert.FileExists(t, path, "reopened, as upstream")
}

func TestLeftoversOfACrashedCompressionAreRemoved(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	for _, name := range []string{"0.log", "0.log.20260301-110000.gz", "0.log.20260301-115900", "0.log.20260301-115900.gz", "0.log.20260301-120000.gz.tmp", "1.log"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o600))
	}
	files, err := GetAllLogs(path)
	require.NoError(t, err)
	assert.Equal(t, []string{path + ".20260301-110000.gz", path + ".20260301-115900.gz", path}, files,
		"a .tmp and a file already compressed are not part of the log; another container's log neither")
}
