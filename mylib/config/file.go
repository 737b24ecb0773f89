package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"mykubelet/mylib/kubetypes"
)

// Upstream defaults: --file-check-frequency is 20 s. Upstream also watches
// the directory with inotify; we poll the directory's listing (names, sizes,
// modification times) every ChangePollInterval instead, which needs no
// extra dependency and reacts within a second.
const (
	DefaultFileCheckFrequency = 20 * time.Second
	ChangePollInterval        = time.Second
)

// SourceFile reads static pod manifests from a directory (or a single file).
// It sends the complete list (a SET) at start, every period, and whenever
// the directory's listing changes.
type SourceFile struct {
	path     string
	nodeName string
	period   time.Duration
	updates  chan<- kubetypes.PodUpdate

	clock        clock.WithTicker
	pollInterval time.Duration

	firstSeen map[types.UID]time.Time
}

// SourceFileConfig says which directory a SourceFile reads and how often.
type SourceFileConfig struct {
	// Path is the manifest directory (--pod-manifest-path). Required.
	Path string
	// NodeName is the node the static pods run on. Required.
	NodeName string
	// Period is how often the whole directory is relisted even when nothing
	// changed (--file-check-frequency); zero means DefaultFileCheckFrequency.
	Period time.Duration
	// PollInterval is how often the listing is checked for changes; zero
	// means ChangePollInterval.
	PollInterval time.Duration
	// Updates receives the pods (a SET each time). Required for Run.
	Updates chan<- kubetypes.PodUpdate
	// Clock is used for the tickers and the config.seen annotation; nil
	// means the real clock.
	Clock clock.WithTicker
}

// NewSourceFile checks cfg and returns a file source. Run starts it.
func NewSourceFile(cfg SourceFileConfig) (*SourceFile, error) {
	if cfg.Path == "" || cfg.NodeName == "" {
		return nil, errors.New("config: SourceFileConfig.Path and NodeName are required")
	}
	if cfg.Period == 0 {
		cfg.Period = DefaultFileCheckFrequency
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = ChangePollInterval
	}
	if cfg.Period < 0 || cfg.PollInterval < 0 {
		return nil, fmt.Errorf("config: file check frequency (%v) and poll interval (%v) must be positive", cfg.Period, cfg.PollInterval)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &SourceFile{
		path:         strings.TrimRight(cfg.Path, string(os.PathSeparator)),
		nodeName:     cfg.NodeName,
		period:       cfg.Period,
		updates:      cfg.Updates,
		clock:        cfg.Clock,
		pollInterval: cfg.PollInterval,
		firstSeen:    map[types.UID]time.Time{},
	}, nil
}

// Run sends the pods at once, then on every change and every period, until
// ctx ends.
func (s *SourceFile) Run(ctx context.Context) {
	klog.V(1).InfoS("Watching path", "path", s.path)
	relist := s.clock.NewTicker(s.period)
	defer relist.Stop()
	poll := s.clock.NewTicker(s.pollInterval)
	defer poll.Stop()

	last := s.fingerprint()
	s.send(ctx, s.listConfig())
	for {
		select {
		case <-ctx.Done():
			return
		case <-relist.C():
		case <-poll.C():
			now := s.fingerprint()
			if now == last {
				continue
			}
			klog.V(2).InfoS("Manifest path changed, relisting", "path", s.path)
		}
		last = s.fingerprint()
		s.send(ctx, s.listConfig())
	}
}

func (s *SourceFile) send(ctx context.Context, pods []*v1.Pod) {
	select {
	case s.updates <- kubetypes.PodUpdate{Pods: pods, Op: kubetypes.SET, Source: kubetypes.FileSource}:
	case <-ctx.Done():
	}
}

// fingerprint summarises the listing: it changes when a file is added,
// removed, renamed, resized or rewritten.
func (s *SourceFile) fingerprint() string {
	var b strings.Builder
	for _, path := range s.manifestFiles() {
		if fi, err := os.Stat(path); err == nil {
			fmt.Fprintf(&b, "%s %d %d\n", path, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return b.String()
}

// manifestFiles lists the candidate files: path itself, or the entries of
// the directory whose names do not start with a dot (editors' swap files and
// atomic writes' temporary files do), sorted.
func (s *SourceFile) manifestFiles() []string {
	fi, err := os.Stat(s.path)
	if err != nil {
		return nil
	}
	if !fi.IsDir() {
		return []string{s.path}
	}
	files, _ := filepath.Glob(filepath.Join(s.path, "[^.]*")) // only fails on a bad pattern
	sort.Strings(files)
	return files
}

// listConfig reads every manifest. A file that cannot be read or parsed is
// logged with its name and skipped; the others still count. A missing path
// gives an empty list, so the pods it held are removed.
func (s *SourceFile) listConfig() []*v1.Pod {
	pods := []*v1.Pod{}
	if _, err := os.Stat(s.path); err != nil {
		klog.ErrorS(err, "Unable to read config path", "path", s.path)
		return pods
	}
	for _, path := range s.manifestFiles() {
		fi, err := os.Stat(path)
		switch {
		case err != nil:
			klog.ErrorS(err, "Could not get metadata", "path", path)
			continue
		case fi.IsDir():
			klog.ErrorS(nil, "Manifest path is a directory, not recursing into it", "path", path)
			continue
		case !fi.Mode().IsRegular():
			klog.ErrorS(nil, "Manifest path is not a regular file", "path", path)
			continue
		}
		pod, err := s.extractFromFile(path)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) { // removed since we listed it
				klog.ErrorS(err, "Could not process manifest file, skipping it", "path", path)
			}
			continue
		}
		pods = append(pods, pod)
	}
	// Forget the first-seen times of pods that are gone.
	for uid := range s.firstSeen {
		if !containsUID(pods, uid) {
			delete(s.firstSeen, uid)
		}
	}
	return pods
}

func containsUID(pods []*v1.Pod, uid types.UID) bool {
	for _, p := range pods {
		if p.UID == uid {
			return true
		}
	}
	return false
}

// extractFromFile reads and decodes one manifest.
func (s *SourceFile) extractFromFile(path string) (*v1.Pod, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigLength+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxConfigLength {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxConfigLength)
	}
	pod, err := decodeSinglePod(data, path, s.nodeName)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	pod.Annotations[kubetypes.ConfigSourceAnnotationKey] = kubetypes.FileSource
	// config.seen: when this UID was first read. Upstream sets it when
	// PodConfig first merges the pod; we set it here so that a program that
	// reads the file source without a PodConfig shows it too (PodConfig keeps it).
	seen, ok := s.firstSeen[pod.UID]
	if !ok {
		seen = s.clock.Now()
		s.firstSeen[pod.UID] = seen
	}
	pod.Annotations[kubetypes.ConfigFirstSeenAnnotationKey] = kubetypes.Timestamp(seen)
	return pod, nil
}
