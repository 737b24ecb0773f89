package logs

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Upstream's KubeletConfiguration defaults for log rotation
// (containerLogMaxSize, containerLogMaxFiles, containerLogMonitorInterval,
// containerLogMaxWorkers).
const (
	DefaultContainerLogMaxSize         = "10Mi"
	DefaultContainerLogMaxFiles        = 5
	DefaultContainerLogMonitorInterval = 10 * time.Second
	DefaultContainerLogMaxWorkers      = 1
)

const (
	// timestampFormat is the suffix of a rotated log: <path>.20060102-150405.
	timestampFormat = "20060102-150405"
	// compressSuffix ends a rotated log that was gzipped.
	compressSuffix = ".gz"
	// tmpSuffix ends a file being compressed; one left over by a crash is
	// removed at the next rotation.
	tmpSuffix = ".tmp"
)

// Config is what NewContainerLogManager needs.
type Config struct {
	// Runtime lists the containers and reopens their logs. Required.
	Runtime runtimeapi.RuntimeServiceClient
	// MaxSize is containerLogMaxSize, a quantity ("10Mi", "256Ki"): a log
	// this big or bigger is rotated. "" means DefaultContainerLogMaxSize;
	// a negative quantity turns rotation off, as upstream.
	MaxSize string
	// MaxFiles is containerLogMaxFiles: how many files of one container's
	// log may exist, the live one included; at least 2. 0 means
	// DefaultContainerLogMaxFiles.
	MaxFiles int
	// MonitorInterval is containerLogMonitorInterval; 0 means
	// DefaultContainerLogMonitorInterval.
	MonitorInterval time.Duration
	// MaxWorkers is containerLogMaxWorkers: how many containers' logs are
	// rotated at the same time; 0 means DefaultContainerLogMaxWorkers.
	MaxWorkers int
	// Clock times the passes and names the rotated files; nil means the
	// real clock.
	Clock clock.WithTicker
}

// ContainerLogManager rotates the logs of running containers (upstream's
// containerLogManager).
type ContainerLogManager struct {
	runtime         runtimeapi.RuntimeServiceClient
	maxSize         int64 // < 0: rotation is off
	maxFiles        int
	monitorInterval time.Duration
	maxWorkers      int
	clock           clock.WithTicker
	mu              sync.Mutex // one pass at a time
}

// NewContainerLogManager checks cfg, fills in the defaults and returns a
// manager; Run starts it.
func NewContainerLogManager(cfg Config) (*ContainerLogManager, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("container log manager: Config.Runtime is required")
	}
	if cfg.MaxSize == "" {
		cfg.MaxSize = DefaultContainerLogMaxSize
	}
	if cfg.MaxFiles == 0 {
		cfg.MaxFiles = DefaultContainerLogMaxFiles
	}
	if cfg.MonitorInterval == 0 {
		cfg.MonitorInterval = DefaultContainerLogMonitorInterval
	}
	if cfg.MaxWorkers == 0 {
		cfg.MaxWorkers = DefaultContainerLogMaxWorkers
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	maxSize, err := ParseMaxSize(cfg.MaxSize)
	if err != nil {
		return nil, fmt.Errorf("container log manager: containerLogMaxSize %q: %w", cfg.MaxSize, err)
	}
	switch {
	case cfg.MaxFiles < 2:
		return nil, fmt.Errorf("container log manager: containerLogMaxFiles %d: want at least 2 (the live file and one rotated)", cfg.MaxFiles)
	case cfg.MonitorInterval < 0:
		return nil, fmt.Errorf("container log manager: containerLogMonitorInterval %v: must be positive", cfg.MonitorInterval)
	case cfg.MaxWorkers < 1:
		return nil, fmt.Errorf("container log manager: containerLogMaxWorkers %d: want at least 1", cfg.MaxWorkers)
	}
	return &ContainerLogManager{runtime: cfg.Runtime, maxSize: maxSize, maxFiles: cfg.MaxFiles,
		monitorInterval: cfg.MonitorInterval, maxWorkers: cfg.MaxWorkers, clock: cfg.Clock}, nil
}

// ParseMaxSize is a containerLogMaxSize quantity in bytes.
func ParseMaxSize(size string) (int64, error) {
	q, err := resource.ParseQuantity(size)
	if err != nil {
		return 0, err
	}
	n, ok := q.AsInt64()
	if !ok {
		return 0, errors.New("not a whole number of bytes")
	}
	return n, nil
}

// Run rotates the logs that need it every MonitorInterval until ctx ends
// (upstream's Start). With rotation off it only waits for ctx.
func (m *ContainerLogManager) Run(ctx context.Context) {
	if m.maxSize < 0 {
		klog.V(2).InfoS("Container log rotation is off (containerLogMaxSize is negative)")
		<-ctx.Done()
		return
	}
	klog.V(2).InfoS("Starting container log rotation", "maxSize", m.maxSize, "maxFiles", m.maxFiles, "workers", m.maxWorkers, "monitorPeriod", m.monitorInterval)
	t := m.clock.NewTicker(m.monitorInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if err := m.rotateLogs(ctx); err != nil && ctx.Err() == nil {
				klog.ErrorS(err, "Failed to rotate container logs; will retry")
			}
		}
	}
}

// rotateLogs is one pass: every running container's log is checked, and
// rotated if it is too big, by up to maxWorkers goroutines. A stopped
// container writes nothing more, so its log is left as it is.
func (m *ContainerLogManager) rotateLogs(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	resp, err := m.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil {
		return fmt.Errorf("list running containers: %w", err)
	}
	ids := make(chan string)
	var wg sync.WaitGroup
	for range min(m.maxWorkers, len(resp.GetContainers())) {
		wg.Go(func() {
			for id := range ids {
				if err := m.processContainer(ctx, id); err != nil {
					klog.ErrorS(err, "Failed to rotate the log of a container; will retry", "containerID", id)
				}
			}
		})
	}
	for _, c := range resp.GetContainers() {
		if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING { // the filter said so; a runtime may not filter
			ids <- c.GetId()
		}
	}
	close(ids)
	wg.Wait()
	return nil
}

// processContainer rotates container id's log if it has reached maxSize.
// A log file that is missing (removed by hand, say) is reopened, as
// upstream does, so the container's output is not lost.
func (m *ContainerLogManager) processContainer(ctx context.Context, id string) error {
	resp, err := m.runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		return fmt.Errorf("container status: %w", err)
	}
	path := resp.GetStatus().GetLogPath()
	if path == "" {
		return nil // no log file to rotate
	}
	info, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		if _, err := m.runtime.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); err != nil {
			return fmt.Errorf("log %s is missing, and reopening it failed: %w", path, err)
		}
		info, err = os.Stat(path)
	}
	if err != nil {
		return fmt.Errorf("stat log: %w", err)
	}
	if info.Size() < m.maxSize {
		return nil
	}
	if err := m.rotateLog(ctx, id, path); errors.Is(err, errRotatedThisSecond) {
		klog.V(2).InfoS("Container log was rotated within this second already; rotating at the next pass", "containerID", id, "path", path)
		return nil
	} else if err != nil {
		return fmt.Errorf("rotate log %s (%d bytes, max %d): %w", path, info.Size(), m.maxSize, err)
	}
	klog.V(2).InfoS("Rotated container log", "containerID", id, "path", path, "size", info.Size())
	return nil
}

// errRotatedThisSecond: the rotated file's name is taken already.
var errRotatedThisSecond = errors.New("rotated within this second already")

// rotateLog makes room for one more rotated file (the oldest go first, so
// that a reader of a newer one is not cut off), compresses the rotated files
// but the newest, then rotates the live file.
func (m *ContainerLogManager) rotateLog(ctx context.Context, id, path string) error {
	rotated := path + "." + m.clock.Now().Format(timestampFormat)
	for _, name := range []string{rotated, rotated + compressSuffix} {
		if _, err := os.Lstat(name); err == nil {
			return errRotatedThisSecond
		}
	}
	old, err := rotatedLogs(path)
	if err != nil {
		return err
	}
	if old, err = removeUnusedLogs(old); err != nil {
		return err
	}
	if old, err = m.removeExcessLogs(old); err != nil {
		return err
	}
	for _, l := range old {
		if !strings.HasSuffix(l, compressSuffix) {
			if err := compressLog(l); err != nil {
				return err
			}
		}
	}
	return m.rotateLatestLog(ctx, id, path, rotated)
}

// removeUnusedLogs removes what an interrupted compression left (a .tmp
// file, or a file whose .gz is complete) and returns the other files.
func removeUnusedLogs(logs []string) ([]string, error) {
	inuse, unused := filterUnusedLogs(logs)
	for _, l := range unused {
		if err := os.Remove(l); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("remove unused log: %w", err)
		}
	}
	return inuse, nil
}

func filterUnusedLogs(logs []string) (inuse, unused []string) {
	names := map[string]bool{}
	for _, l := range logs {
		names[l] = true
	}
	for _, l := range logs {
		if strings.HasSuffix(l, tmpSuffix) || names[l+compressSuffix] {
			unused = append(unused, l)
		} else {
			inuse = append(inuse, l)
		}
	}
	return inuse, unused
}

// removeExcessLogs keeps the newest maxFiles-2 rotated files: with the file
// about to be rotated and the new live one, that makes maxFiles.
func (m *ContainerLogManager) removeExcessLogs(logs []string) ([]string, error) {
	sort.Strings(logs) // the time stamps sort oldest first
	excess := max(len(logs)-(m.maxFiles-2), 0)
	for _, l := range logs[:excess] {
		if err := os.Remove(l); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("remove old log: %w", err)
		}
	}
	return logs[excess:], nil
}

// compressLog gzips l to l.gz (through l.gz.tmp, so that a crash never
// leaves a truncated .gz) and removes l.
func compressLog(l string) (err error) {
	in, err := os.Open(l)
	if err != nil {
		return fmt.Errorf("compress log: %w", err)
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return fmt.Errorf("compress log: %w", err)
	}
	tmp := l + compressSuffix + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return fmt.Errorf("compress log: %w", err)
	}
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(tmp) // best effort: the next rotation removes it otherwise
		}
	}()
	zw := gzip.NewWriter(out)
	if _, err := io.Copy(zw, in); err != nil {
		return fmt.Errorf("compress log %s: %w", l, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compress log %s: %w", l, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("compress log %s: %w", l, err)
	}
	if err := os.Rename(tmp, l+compressSuffix); err != nil {
		return fmt.Errorf("compress log: %w", err)
	}
	if err := os.Remove(l); err != nil {
		return fmt.Errorf("compress log: remove the uncompressed file: %w", err)
	}
	return nil
}

// rotateLatestLog renames the live log to rotated and has the runtime open
// a new one at path. The rotated file stays uncompressed until the next
// rotation: lines the runtime wrote before reopening land in it, and a
// reader following it can finish. If the reopen fails, the rename is
// undone so that the rotation is tried again at the next pass.
func (m *ContainerLogManager) rotateLatestLog(ctx context.Context, id, path, rotated string) error {
	if err := os.Rename(path, rotated); err != nil {
		return err
	}
	if _, err := m.runtime.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); err != nil {
		renameBack(id, path, rotated)
		return fmt.Errorf("reopen container log: %w", err)
	}
	return nil
}

// renameBack undoes the rotation's rename, unless a file is at path again:
// the runtime did reopen (the call failed on the way back, or was cut off
// by the kubelet's shutdown) and writes there. Upstream renames over it,
// and the container's next lines go to a file no name leads to. Linking
// instead of renaming never replaces a file.
func renameBack(id, path, rotated string) {
	err := os.Link(rotated, path)
	if errors.Is(err, os.ErrExist) {
		klog.InfoS("The runtime reopened the container log although the call failed; keeping the rotated file", "containerID", id, "rotatedLog", rotated)
		return
	}
	if err == nil {
		err = os.Remove(rotated)
	}
	if err != nil {
		// The lines are in one of the two names; none is lost.
		klog.ErrorS(err, "Failed to rename the rotated log back", "containerID", id, "rotatedLog", rotated, "log", path)
	}
}

// GetAllLogs is every file of the container log at path, oldest first: the
// rotated ones (compressed or not), then path itself.
func GetAllLogs(path string) ([]string, error) {
	old, err := rotatedLogs(path)
	if err != nil {
		return nil, err
	}
	inuse, _ := filterUnusedLogs(old)
	sort.Strings(inuse)
	return append(inuse, path), nil
}

// rotatedLogs is every file named path.<something> (upstream globs
// path.*; reading the directory needs no escaping of the name).
func rotatedLogs(path string) ([]string, error) {
	dir, base := filepath.Split(path)
	entries, err := os.ReadDir(filepath.Clean(dir))
	if err != nil {
		return nil, fmt.Errorf("list rotated logs of %s: %w", path, err)
	}
	var logs []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), base+".") && !e.IsDir() {
			logs = append(logs, filepath.Join(dir, e.Name()))
		}
	}
	return logs, nil
}
